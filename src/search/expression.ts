import { compileExpression } from '../fhir/fhirpath/engine';
import type { ElementModel } from '../fhir/model/model';

/**
 * SearchParameter expressions, compiled once into path walkers over the JSON. Nearly every R4
 * expression is a simple path with `as`/`ofType`, `where(resolve() is X)` (a filter on the
 * reference's target type: nothing is resolved), `where(x='lit')` and `[n]`; those run here with
 * the element model telling the type of every step (so a choice element `value` finds
 * `valueQuantity`, and a code knows its binding). Anything else is handed to HL7's FHIRPath
 * engine (`fhirpath`), loaded only when such an expression exists.
 */

export interface Node {
  value: unknown;
  /** The FHIR type of the value: a data type, a resource type, `BackboneElement`, or `unknown`. */
  type: string;
  /** For a BackboneElement: the type that defines it and its path there (to find its children). */
  root?: string;
  path?: string;
  /** For a `code` with a required binding: the value set (its code system is the token's system). */
  binding?: string;
}

/**
 * Children already found during one extraction, by the parent's value and the child's name: a
 * resource's parameters share prefixes (Observation's `code`, `combo-code` and four composites all
 * start at `code`), and each is walked once. Only for one pass over a resource that nobody changes.
 */
export type ChildMemo = Map<unknown, Map<string, Node[]>>;

export type Evaluator = (context: Node, memo?: ChildMemo) => Node[];

type Step =
  | { kind: 'member'; name: string }
  | { kind: 'index'; index: number }
  | { kind: 'as'; type: string }
  | { kind: 'resolve-is'; type: string }
  | { kind: 'where-eq'; name: string; value: string };

/** One alternative of an expression: the resource type it starts from (if any) and its steps. */
interface Alternative {
  start?: string;
  steps: Step[];
}

const ABSTRACT_STARTS = new Set(['Resource', 'DomainResource']);

export class ExpressionCompiler {
  constructor(private readonly model: ElementModel) {}

  /**
   * An evaluator of `expression` for resources of `resourceType` (alternatives that start at
   * another type are dropped), or for a context node when `relative` (composite components).
   */
  compile(expression: string, resourceType: string | undefined): Evaluator {
    const alternatives: Alternative[] = [];
    for (const text of splitTop(expression, '|')) {
      const parsed = parseAlternative(text);
      if (parsed === undefined) return fhirpathEvaluator(expression);
      if (parsed.start && resourceType && parsed.start !== resourceType && !ABSTRACT_STARTS.has(parsed.start)) continue;
      alternatives.push(parsed);
    }
    return (context, memo) => {
      const out: Node[] = [];
      for (const alt of alternatives) {
        let nodes = [context];
        for (const step of alt.steps) nodes = this.apply(step, nodes, memo);
        out.push(...nodes);
      }
      return out;
    };
  }

  private apply(step: Step, nodes: Node[], memo: ChildMemo | undefined): Node[] {
    switch (step.kind) {
      case 'member': {
        const out: Node[] = [];
        for (const node of nodes) {
          if (!memo) {
            this.children(node, step.name, out);
            continue;
          }
          // A value sits at one place in the resource, so its children do not depend on how it was reached.
          let byName = memo.get(node.value);
          let found = byName?.get(step.name);
          if (!found) {
            found = [];
            this.children(node, step.name, found);
            if (!byName) memo.set(node.value, (byName = new Map()));
            byName.set(step.name, found);
          }
          for (const child of found) out.push(child);
        }
        return out;
      }
      case 'index':
        return nodes.length > step.index ? [nodes[step.index]] : [];
      case 'as': {
        const wanted = step.type.toLowerCase();
        return nodes.filter((n) => n.type.toLowerCase() === wanted);
      }
      case 'resolve-is':
        return nodes.filter((n) => referenceTargetType(n.value) === step.type);
      case 'where-eq':
        return nodes.filter((n) => isObject(n.value) && n.value[step.name] === step.value);
      default:
        return [];
    }
  }

  /** The children called `name` of a node, typed by the model (a choice element finds each of its forms). */
  private children(node: Node, name: string, out: Node[]): void {
    const value = node.value;
    if (!isObject(value)) return;
    const inline = node.type === 'BackboneElement' || node.type === 'Element';
    const root = inline ? (node.root as string) : node.type;
    const path = inline && node.path ? `${node.path}.${name}` : name;
    const info = this.model.element(root, path);
    if (info) {
      const child = value[name];
      if (child === undefined) return;
      const type = info.types[0] ?? 'unknown';
      for (const item of each(child)) {
        if (type.startsWith('#')) out.push({ value: item, type: 'BackboneElement', root, path: type.slice(1) });
        else if (type === 'BackboneElement' || type === 'Element')
          out.push({ value: item, type: 'BackboneElement', root, path });
        else if (type === 'Resource' && isObject(item) && typeof item.resourceType === 'string')
          out.push({ value: item, type: item.resourceType });
        else out.push({ value: item, type, binding: info.binding });
      }
      return;
    }
    const choice = this.model.element(root, `${path}[x]`);
    if (choice) {
      for (const type of choice.types) {
        const child = value[name + type.charAt(0).toUpperCase() + type.slice(1)];
        if (child !== undefined) for (const item of each(child)) out.push({ value: item, type });
      }
      return;
    }
    // Not in the model (a property of an unknown shape): still followed, untyped.
    const child = value[name];
    if (child !== undefined) for (const item of each(child)) out.push({ value: item, type: 'unknown' });
  }
}

function each(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [value];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `Patient/123`, `http://x/fhir/Patient/123/_history/2` -> `Patient`; a Reference's `type` counts too. */
function referenceTargetType(value: unknown): string | undefined {
  if (!isObject(value)) return undefined;
  const reference = typeof value.reference === 'string' ? value.reference : undefined;
  if (reference) {
    const match = /(?:^|\/)([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[^/]+)?$/.exec(reference);
    if (match) return match[1];
  }
  return typeof value.type === 'string' ? value.type : undefined;
}

// ---------------------------------------------------------------------------------------------
// Parsing the expression subset

function parseAlternative(source: string): Alternative | undefined {
  let text = source.trim();
  while (text.startsWith('(') && closing(text, 0) === text.length - 1) text = text.slice(1, -1).trim();
  const infixAs = /^(.*\S)\s+as\s+([A-Za-z]+)$/.exec(text);
  if (infixAs) {
    const inner = parseAlternative(infixAs[1]);
    return inner && { ...inner, steps: [...inner.steps, { kind: 'as', type: infixAs[2] }] };
  }
  const parts = splitTop(text, '.');
  if (parts.some((p) => p === '')) return undefined;
  const alt: Alternative = { steps: [] };
  parts.forEach((part, i) => {
    if (alt.steps === undefined) return;
    if (i === 0 && /^[A-Z][A-Za-z]+$/.test(part)) {
      alt.start = part;
      return;
    }
    const steps = parseStep(part);
    if (!steps) {
      (alt as { steps?: Step[] }).steps = undefined;
      return;
    }
    alt.steps.push(...steps);
  });
  return alt.steps === undefined ? undefined : alt;
}

function parseStep(part: string): Step[] | undefined {
  const member = /^([a-z][A-Za-z0-9]*)(?:\[(\d+)\])?$/.exec(part);
  if (member) {
    const steps: Step[] = [{ kind: 'member', name: member[1] }];
    if (member[2] !== undefined) steps.push({ kind: 'index', index: Number(member[2]) });
    return steps;
  }
  const call = /^([a-zA-Z]+)\((.*)\)$/.exec(part);
  if (!call) return undefined;
  const [, fn, arg] = call;
  if ((fn === 'as' || fn === 'ofType') && /^[A-Za-z]+$/.test(arg.trim())) return [{ kind: 'as', type: arg.trim() }];
  if (fn === 'where') {
    const resolveIs = /^resolve\(\)\s+is\s+([A-Z][A-Za-z]+)$/.exec(arg.trim());
    if (resolveIs) return [{ kind: 'resolve-is', type: resolveIs[1] }];
    const equals = /^([a-z][A-Za-z0-9]*)\s*=\s*'([^']*)'$/.exec(arg.trim());
    if (equals) return [{ kind: 'where-eq', name: equals[1], value: equals[2] }];
  }
  return undefined;
}

/** Splits at `separator` outside parentheses, brackets and quotes. */
export function splitTop(text: string, separator: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === "'" && text[i - 1] !== '\\') quoted = !quoted;
    if (quoted) continue;
    if (ch === '(' || ch === '[') depth++;
    else if (ch === ')' || ch === ']') depth--;
    else if (ch === separator && depth === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts;
}

function closing(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return i;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// The fallback: HL7's FHIRPath engine, for the few expressions outside the subset

function fhirpathEvaluator(expression: string): Evaluator {
  // In-process, as indexing is synchronous: the expressions are the core's, or those of stored
  // SearchParameters, which only the operators of the default project may define (custom-params.ts).
  const compiled = compileExpression(expression);
  return (context) => {
    let values: unknown[];
    try {
      values = compiled(context.value, { resource: context.value });
    } catch {
      return [];
    }
    return values.map((value) => ({ value, type: typeOfPlain(value) }));
  };
}

/** The type of a value the FHIRPath engine answered, from its shape (it does not say). */
function typeOfPlain(value: unknown): string {
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number') return 'decimal';
  if (typeof value === 'string') return 'string';
  if (!isObject(value)) return 'unknown';
  if (Array.isArray(value.coding) || typeof value.text === 'string') return 'CodeableConcept';
  if (typeof value.reference === 'string') return 'Reference';
  if (typeof value.code === 'string' && typeof value.system === 'string') return 'Coding';
  if (typeof value.value === 'number') return 'Quantity';
  if (typeof value.start === 'string' || typeof value.end === 'string') return 'Period';
  if (typeof value.value === 'string' && typeof value.system === 'string') return 'Identifier';
  return 'unknown';
}
