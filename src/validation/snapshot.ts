import type { ElementDefinition, StructureDefinition } from 'fhir/r4';
import { ProfileError } from './compile';

/**
 * A snapshot for a profile written as a differential only: the base's snapshot with each
 * differential element merged in. Children of data-type elements the differential reaches into
 * are expanded from the type's definition; slices start as copies of the element they slice.
 * Enough for the profiles people write by hand (cardinality, types, fixed and pattern values,
 * bindings, invariants, slices, extensions); not a reimplementation of the IG Publisher.
 */

export interface SnapshotSources {
  /** A data type's definition (with its snapshot), by type name. */
  typeDefinition(type: string): StructureDefinition | undefined;
}

const MAX_ELEMENTS = 20_000;

/** Keys of an ElementDefinition that a differential element does not carry over into the snapshot. */
const IDENTITY = new Set(['id', 'path', 'base', 'sliceName']);

export function generateSnapshot(
  profile: StructureDefinition,
  base: StructureDefinition,
  sources: SnapshotSources,
): ElementDefinition[] {
  const url = profile.url ?? '(no url)';
  const baseElements = base.snapshot?.element;
  if (!baseElements?.length) throw new ProfileError(url, `its base '${base.url}' has no snapshot`);
  const elements: ElementDefinition[] = baseElements.map((e) => withBase(structuredClone(e), e));
  const rootPath = elements[0].path;
  for (const [i, raw] of (profile.differential?.element ?? []).entries()) {
    const diff = { ...raw, id: raw.id ?? derivedId(raw) };
    if (diff.path.split('.')[0] !== rootPath)
      throw new ProfileError(url, `differential element ${i} ('${diff.path}') is not within ${rootPath}`);
    const target = ensure(elements, diff.id, { url, sources, diff });
    merge(target, diff);
    if (elements.length > MAX_ELEMENTS)
      throw new ProfileError(url, `its snapshot would have more than ${MAX_ELEMENTS} elements`);
  }
  return elements;
}

function derivedId(e: ElementDefinition): string {
  return e.sliceName ? `${e.path}:${e.sliceName}` : e.path;
}

/** An element copied from a base keeps a `base` saying where it was first defined (it decides JSON arrays). */
function withBase(copy: ElementDefinition, from: ElementDefinition): ElementDefinition {
  copy.base ??= { path: from.path, min: from.min ?? 0, max: from.max ?? '1' };
  return copy;
}

interface EnsureContext {
  url: string;
  sources: SnapshotSources;
  diff: ElementDefinition;
}

/** The snapshot element with this id, creating it (a slice, or a data type's child) when missing. */
function ensure(elements: ElementDefinition[], id: string, ctx: EnsureContext, depth = 0): ElementDefinition {
  if (depth > 64) throw new ProfileError(ctx.url, `the element '${id}' is nested too deeply`);
  const found = elements.find((e) => e.id === id);
  if (found) return found;
  const dot = id.lastIndexOf('.');
  const last = id.slice(dot + 1);
  const colon = last.indexOf(':');
  if (colon >= 0) {
    const slice = { id, slicedId: `${id.slice(0, dot + 1)}${last.slice(0, colon)}`, sliceName: last.slice(colon + 1) };
    return addSlice(elements, slice, ctx, depth);
  }
  if (dot < 0) throw new ProfileError(ctx.url, `the element '${id}' is not in the base`);
  const parent = ensure(elements, id.slice(0, dot), ctx, depth + 1);
  const lookup = (): ElementDefinition | undefined =>
    elements.find((e) => e.id === `${parent.id}.${last}`) ??
    elements.find((e) => e.id === `${parent.id}.${choiceName(elements, parent, last)}`);
  const existing = lookup();
  if (existing) return existing;
  const index = elements.indexOf(parent);
  if ((elements[index + 1]?.id ?? '').startsWith(`${parent.id}.`))
    throw new ProfileError(ctx.url, `'${last}' is not an element of ${parent.path}`);
  expandChildren(elements, parent, ctx);
  const child = lookup();
  if (!child) throw new ProfileError(ctx.url, `'${last}' is not an element of ${parent.path}`);
  return child;
}

/** `valueQuantity` under an element that has `value[x]`: that choice, restricted to the type. */
function choiceName(elements: ElementDefinition[], parent: ElementDefinition, name: string): string {
  for (const e of elements) {
    if (!e.id?.startsWith(`${parent.id}.`) || !e.id.endsWith('[x]')) continue;
    const stem = e.id.slice(parent.id?.length ?? 0).slice(1, -3);
    if (!stem.includes('.') && name.startsWith(stem) && /[A-Z]/.test(name[stem.length] ?? '')) {
      const type = name.slice(stem.length);
      e.type = (e.type ?? []).filter((t) => t.code.toLowerCase() === type.toLowerCase());
      return `${stem}[x]`;
    }
  }
  return name;
}

function descendantsEnd(elements: ElementDefinition[], index: number): number {
  const id = elements[index].id as string;
  let end = index + 1;
  while (end < elements.length) {
    const other = elements[end].id as string;
    if (!other.startsWith(`${id}.`) && !other.startsWith(`${id}:`)) break;
    end++;
  }
  return end;
}

/** A slice to add: its element id (`Observation.code.coding:loinc`), the sliced element's id and the slice's name. */
interface SliceToAdd {
  id: string;
  slicedId: string;
  sliceName: string;
}

function addSlice(
  elements: ElementDefinition[],
  slice: SliceToAdd,
  ctx: EnsureContext,
  depth: number,
): ElementDefinition {
  const { id, slicedId, sliceName } = slice;
  const sliced = ensure(elements, slicedId, ctx, depth + 1);
  const index = elements.indexOf(sliced);
  const end = descendantsEnd(elements, index);
  // The slice starts as the sliced element and its children (not its other slices).
  const template = elements.slice(index, end).filter((e, i) => i === 0 || (e.id as string).startsWith(`${slicedId}.`));
  const copies = template.map((e, i) => {
    const copy = structuredClone(e);
    copy.id = `${id}${(e.id as string).slice(slicedId.length)}`;
    if (i === 0) {
      copy.sliceName = sliceName;
      delete copy.slicing;
    }
    return copy;
  });
  elements.splice(end, 0, ...copies);
  return copies[0];
}

/** Brings a data-type element's children into the snapshot from the type's own definition. */
function expandChildren(elements: ElementDefinition[], parent: ElementDefinition, ctx: EnsureContext): void {
  const types = parent.type ?? [];
  if (types.length !== 1)
    throw new ProfileError(ctx.url, `cannot constrain the children of '${parent.id}', which has ${types.length} types`);
  const type = types[0].code;
  const definition = ctx.sources.typeDefinition(type);
  const own = definition?.snapshot?.element;
  if (!own?.length) throw new ProfileError(ctx.url, `the type '${type}' of '${parent.id}' has no definition to expand`);
  const index = elements.indexOf(parent);
  const end = descendantsEnd(elements, index);
  const children = own.slice(1).map((e) => {
    const copy = withBase(structuredClone(e), e);
    copy.id = `${parent.id}${(e.id ?? e.path).slice(own[0].path.length)}`;
    copy.path = `${parent.path}${e.path.slice(own[0].path.length)}`;
    return copy;
  });
  elements.splice(end, 0, ...children);
}

function merge(target: ElementDefinition, diff: ElementDefinition): void {
  const t = target as unknown as Record<string, unknown>;
  const d = diff as unknown as Record<string, unknown>;
  for (const key of Object.keys(d)) {
    if (IDENTITY.has(key)) continue;
    if (key === 'constraint') {
      const existing = target.constraint ?? [];
      const added = (diff.constraint ?? []).filter((c) => !existing.some((e) => e.key === c.key));
      target.constraint = [...existing, ...added];
      continue;
    }
    if (key.startsWith('fixed') || key.startsWith('pattern')) {
      for (const other of Object.keys(t)) if (other.startsWith('fixed') || other.startsWith('pattern')) delete t[other];
    }
    t[key] = structuredClone(d[key]);
  }
  if (diff.sliceName && !target.sliceName) target.sliceName = diff.sliceName;
}
