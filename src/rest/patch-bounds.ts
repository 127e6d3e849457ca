import type { Budget } from '../context/budget';
import { fhirError } from '../fhir/errors';

/**
 * What keeps a patch the size of the request that sent it. A patch is a few hundred bytes, but
 * JSON Patch `copy` doubles what it copies, so 24 operations once made a 2 GB resource; the size
 * of the result is therefore tracked operation by operation and an operation is refused before it
 * runs when the result would outgrow what the server accepts as a request body.
 */
export interface PatchBounds {
  /** Most bytes the patched resource may take as JSON (the request body limit). */
  maxBytes: number;
  /** Most operations one patch may carry. */
  maxOperations: number;
  /** Most levels of nesting in the result, as in a request body (the JSON reader's limit). */
  maxDepth: number;
  /** Time, and the event loop given back between operations. */
  budget: Budget;
}

/** Defaults for the REST core: a body-sized resource, and more operations than any edit needs. */
export const PATCH_LIMITS = { maxBytes: 10 * 1024 * 1024, maxOperations: 1000, maxDepth: 64 };

export function refuseTooMany(count: number, bounds: Pick<PatchBounds, 'maxOperations'>): void {
  if (count > bounds.maxOperations) throw fhirError('ERR_PATCH_TOO_MANY', { count, limit: bounds.maxOperations });
}

/** The bytes a JSON value takes when serialised (what is stored, and what the body limit counts). */
export function byteSize(value: unknown): number {
  const text = JSON.stringify(value) as string | undefined;
  return text === undefined ? 0 : Buffer.byteLength(text);
}

/** Levels of objects and lists in a JSON value (a scalar: 0), counted without recursion. */
export function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [node, depth] = top;
    if (typeof node !== 'object' || node === null) continue;
    max = Math.max(max, depth + 1);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return max;
}

/** The running size of the resource being patched: each operation says how it changes it before it is applied. */
export class SizeBound {
  private size: number;

  constructor(
    document: unknown,
    private readonly maxBytes: number,
  ) {
    this.size = byteSize(document);
  }

  /** Takes `delta` bytes for operation `index`; refuses, changing nothing, when the result would be too large. */
  grow(delta: number, index: number): void {
    this.check(delta, index);
    this.size += delta;
  }

  /** Refuses operation `index` when `delta` more bytes would make the result too large. */
  check(delta: number, index: number): void {
    if (this.size + delta > this.maxBytes) throw fhirError('ERR_PATCH_TOO_LARGE', { index, limit: this.maxBytes });
  }
}
