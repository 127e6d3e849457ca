import { fhirpathModel } from '../../fhir/fhirpath/load';
import { Unsupported } from './unsupported';

/**
 * The subset's values and the closures the parser composes: a collection of JSON values, child
 * navigation as FHIRPath does it over JSON (arrays flattened, `_name` twins, choice names), and the
 * three-valued logic of the specification's tables. What only the full engine can answer throws
 * `Unsupported`.
 */

/** A collection: the values found (JSON values; a primitive with only `_x` is present with no value). */
export type Collection = unknown[];
export type Expr = (focus: Collection, env: SimpleEnv) => Collection;

/** `%resource` and `%rootResource`, as the engine is given them. */
export interface SimpleEnv {
  resource?: unknown;
  rootResource?: unknown;
}

/** Stands for a primitive that has extensions but no value (`_birthDate` without `birthDate`). */
export const NO_VALUE = Symbol('no value');

/** A side of `&`: one string, or nothing (the empty string). */
export function text(c: Collection): string {
  if (c.length === 0) return '';
  if (c.length > 1 || typeof c[0] !== 'string') throw new Unsupported();
  return c[0];
}

/** An operator on two single values: empty when either side is, left to the engine when either has several. */
export function binary(left: Expr, right: Expr, apply: (x: unknown, y: unknown) => unknown): Expr {
  return (focus, env) => {
    const a = left(focus, env);
    const b = right(focus, env);
    if (a.length === 0 || b.length === 0) return [];
    if (a.length !== 1 || b.length !== 1) throw new Unsupported();
    return [apply(a[0], b[0])];
  };
}

/** Concrete resource types are tested by name; the abstract ones take the engine's type model. */
export const ABSTRACT_TYPES = new Set(['Resource', 'DomainResource', 'MetadataResource', 'CanonicalResource']);

export function isResource(item: unknown): item is { resourceType: string } {
  return (
    typeof item === 'object' &&
    item !== null &&
    !Array.isArray(item) &&
    typeof (item as { resourceType?: unknown }).resourceType === 'string'
  );
}

/** `name` on each item: arrays flattened, `_name` counted where `name` has no value, choice names found. */
export function child(input: Expr, name: string): Expr {
  return (focus, env) => {
    const out: unknown[] = [];
    for (const item of input(focus, env)) {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) continue;
      const obj = item as Record<string, unknown>;
      if (obj.resourceType !== undefined && name === obj.resourceType) throw new Unsupported();
      let found = false;
      found = collect(obj, name, out) || found;
      if (!found && isChoiceName(name)) {
        // A choice element (`value`) is written with its type (`valueQuantity`).
        for (const key in obj) {
          if (key.length > name.length && key.startsWith(name) && /[A-Z]/.test(key[name.length]))
            collect(obj, key, out);
        }
      }
    }
    return out;
  };
}

let choiceNames: Set<string> | undefined;

/**
 * Whether some R4 element of this name is a choice (`value`, `onset`): only then may a longer key
 * (`valueQuantity`) stand for it; `responseCode` is not a `response`. From the FHIRPath engine's
 * model, read once (the engine loads it too).
 */
function isChoiceName(name: string): boolean {
  if (!choiceNames) {
    const model = fhirpathModel();
    choiceNames = new Set(Object.keys(model.choiceTypePaths).map((path) => path.slice(path.lastIndexOf('.') + 1)));
  }
  return choiceNames.has(name);
}

function collect(obj: Record<string, unknown>, key: string, out: unknown[]): boolean {
  const value = obj[key];
  const ext = obj[`_${key}`];
  if (value === undefined && ext === undefined) return false;
  const values = value === undefined ? [] : Array.isArray(value) ? value : [value];
  const exts = ext === undefined ? [] : Array.isArray(ext) ? ext : [ext];
  const n = Math.max(values.length, exts.length);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v !== undefined && v !== null) out.push(v);
    else if (exts[i] !== undefined && exts[i] !== null) out.push(NO_VALUE);
  }
  return true;
}

/**
 * A string that may be a date, dateTime or time: the engine compares those as temporal values
 * (with precision), which only it knows the types to do; they are left to it.
 */
export function temporal(value: unknown): boolean {
  return typeof value === 'string' && /^(\d{4}(-\d\d)?(-\d\d)?(T|$)|\d\d:\d\d)/.test(value);
}

/** Dates (`2020`, `2020-01`, `2020-01-02`) or dateTimes to the second with a zone, alike in precision and zone. */
const DATE_OR_DATETIME =
  /^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01])(T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(Z|[+-]\d\d:\d\d))?)?)?$/;

export function sameDatePrecision(x: unknown, y: unknown): boolean {
  if (
    typeof x !== 'string' ||
    typeof y !== 'string' ||
    x.length !== y.length ||
    !DATE_OR_DATETIME.test(x) ||
    !DATE_OR_DATETIME.test(y)
  )
    return false;
  return x.length <= 10 || x.slice(19) === y.slice(19);
}

/** A collection as a boolean: empty is unknown, a single boolean is itself, any other single item is true. */
export function bool(c: Collection): boolean | undefined {
  if (c.length === 0) return undefined;
  if (c.length > 1) throw new Unsupported();
  return typeof c[0] === 'boolean' ? c[0] : true;
}

function wrap(b: boolean | undefined): Collection {
  return b === undefined ? [] : [b];
}

export function and(a: boolean | undefined, right: () => boolean | undefined): Collection {
  if (a === false) return [false];
  const b = right();
  if (b === false) return [false];
  return a === true && b === true ? [true] : [];
}

export function or(a: boolean | undefined, right: () => boolean | undefined): Collection {
  if (a === true) return [true];
  const b = right();
  if (b === true) return [true];
  return a === false && b === false ? [false] : [];
}

export function xor(a: boolean | undefined, b: boolean | undefined): Collection {
  return a === undefined || b === undefined ? [] : [a !== b];
}

export function implies(a: boolean | undefined, right: () => boolean | undefined): Collection {
  if (a === false) return [true];
  const b = right();
  if (a === true) return wrap(b);
  return b === true ? [true] : [];
}
