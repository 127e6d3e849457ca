import { DATATYPE_SHAPES } from './datatype-shapes';
import { isPrimitiveType, isValidPrimitive } from './datatypes';

/**
 * Checks a value against an R4 data type, all the way down: each property an element of the type,
 * a list where the element repeats and a single value where it does not, every primitive in its
 * format (a code without surrounding whitespace, a uri without spaces), no nulls, no empty objects,
 * lists or strings, required elements present. Driven by the generated table `DATATYPE_SHAPES`;
 * each type's JSON keys are worked out once, on first use, so a check is a few lookups.
 */

export interface DatatypeProblem {
  /** Where, e.g. `Parameters.parameter[1].valueCoding.system`. */
  path: string;
  reason: string;
}

interface Rule {
  type: string;
  many: boolean;
  /** `_code` beside `code`: the id and extensions of a primitive value. */
  primitiveElement: boolean;
}

interface Shape {
  rules: Map<string, Rule>;
  /** Elements that must be present (by their JSON key, or its `_` twin). */
  required: string[];
}

const shapes = new Map<string, Shape | undefined>();

function shapeOf(type: string): Shape | undefined {
  if (shapes.has(type)) return shapes.get(type);
  const table = DATATYPE_SHAPES[type];
  const shape = table === undefined ? undefined : compile(table);
  shapes.set(type, shape);
  return shape;
}

function compile(table: Readonly<Record<string, string>>): Shape {
  const rules = new Map<string, Rule>();
  const required: string[] = [];
  for (const [element, spec] of Object.entries(table)) {
    const match = /^([^*!]+)(\*?)(!?)$/.exec(spec) as RegExpExecArray;
    const types = match[1].split('|');
    const many = match[2] === '*';
    const choice = element.endsWith('[x]');
    const name = choice ? element.slice(0, -3) : element;
    for (const type of types) {
      const key = choice ? name + type.charAt(0).toUpperCase() + type.slice(1) : name;
      rules.set(key, { type, many, primitiveElement: false });
      if (isPrimitiveType(type)) rules.set(`_${key}`, { type: 'Element', many, primitiveElement: true });
    }
    if (match[3] === '!' && !choice) required.push(name);
  }
  return { rules, required };
}

export function checkDatatype(type: string, value: unknown, path: string): DatatypeProblem | undefined {
  if (isPrimitiveType(type) || type === 'xhtml') {
    if (value === '' || !isValidPrimitive(type === 'xhtml' ? 'string' : type, value)) {
      return { path, reason: `${describe(value)} is not a valid ${type}` };
    }
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { path, reason: `${describe(value)} is not a ${type} (an object)` };
  }
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object);
  if (keys.length === 0) return { path, reason: 'is empty; an element has a value or children' };
  if (type === 'Element') return checkProperties(elementShape, object, keys, path);
  const shape = shapeOf(type);
  // A type the table does not describe (none that Parameters can carry) is taken as it is.
  return shape === undefined ? undefined : checkProperties(shape, object, keys, path);
}

/** What `_name` holds beside a primitive: an id and extensions. */
const elementShape: Shape = compile({ id: 'string', extension: 'Extension*' });

function checkProperties(
  shape: Shape,
  object: Record<string, unknown>,
  keys: string[],
  path: string,
): DatatypeProblem | undefined {
  for (const key of keys) {
    const at = `${path}.${key}`;
    const rule = shape.rules.get(key);
    if (rule === undefined) return { path: at, reason: 'is not an element of this type' };
    const value = object[key];
    if (!rule.many) {
      if (Array.isArray(value)) return { path: at, reason: 'does not repeat: give one value, not a list' };
      const problem = checkDatatype(rule.type, value, at);
      if (problem) return problem;
      continue;
    }
    if (!Array.isArray(value)) return { path: at, reason: 'repeats: give a list' };
    if (value.length === 0) return { path: at, reason: 'is an empty list' };
    for (let i = 0; i < value.length; i++) {
      // A list of primitives and its `_` twin line up by position, with null where one side has nothing.
      const twin = key.startsWith('_') ? key.slice(1) : `_${key}`;
      if (value[i] === null && (rule.primitiveElement || isPrimitiveType(rule.type)) && twin in object) continue;
      const problem = checkDatatype(rule.type, value[i], `${at}[${i}]`);
      if (problem) return problem;
    }
  }
  for (const name of shape.required) {
    if (!(name in object) && !(`_${name}` in object)) return { path: `${path}.${name}`, reason: 'is required' };
  }
  return undefined;
}

function describe(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}
