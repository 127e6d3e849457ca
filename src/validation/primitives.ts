import { primitivePattern } from '../fhir/datatypes';

/**
 * The FHIR R4 primitive types: their JSON representation and their lexical rules (the regular
 * expressions of the specification, with the two it gets wrong repaired: base64Binary allows `/`,
 * and is checked without a backtracking pattern, so a 10 MB attachment is one linear pass).
 */

export const PRIMITIVE_TYPES = new Set([
  'boolean',
  'integer',
  'string',
  'decimal',
  'uri',
  'url',
  'canonical',
  'base64Binary',
  'instant',
  'date',
  'dateTime',
  'time',
  'code',
  'oid',
  'id',
  'markdown',
  'unsignedInt',
  'positiveInt',
  'uuid',
  'xhtml',
]);

export function isPrimitive(type: string): boolean {
  return PRIMITIVE_TYPES.has(type);
}

/** The types whose lexical form the R4 regular expressions decide (in src/fhir/datatypes.ts). */
const LEXICAL = new Set([
  'date',
  'dateTime',
  'instant',
  'time',
  'code',
  'id',
  'oid',
  'uuid',
  'uri',
  'url',
  'canonical',
]);

/** Largest string FHIR allows (1 MB of characters); base64Binary and xhtml are exempt. */
const MAX_STRING = 1024 * 1024;

const INT_MIN = -2147483648;
const INT_MAX = 2147483647;

export interface PrimitiveProblem {
  /** `structure` for the wrong JSON type, `value` for a value of the right type that breaks the rules. */
  code: 'structure' | 'value';
  message: string;
}

/** Why `value` is not a valid `type`, or undefined when it is. `type` must be a primitive type. */
export function primitiveProblem(type: string, value: unknown): PrimitiveProblem | undefined {
  const message = lexicalProblem(type, value);
  if (message === undefined) return undefined;
  return { code: message.startsWith('must be a JSON') ? 'structure' : 'value', message };
}

function lexicalProblem(type: string, value: unknown): string | undefined {
  switch (type) {
    case 'boolean':
      return typeof value === 'boolean' ? undefined : `must be a JSON boolean (true or false), not ${describe(value)}`;
    case 'integer':
    case 'unsignedInt':
    case 'positiveInt': {
      if (typeof value !== 'number') return `must be a JSON number, not ${describe(value)}`;
      if (!Number.isInteger(value) || value < INT_MIN || value > INT_MAX)
        return `'${value}' is not a valid ${type} (a 32-bit whole number)`;
      if (type === 'unsignedInt' && value < 0) return `'${value}' is not a valid unsignedInt (0 or more)`;
      if (type === 'positiveInt' && value < 1) return `'${value}' is not a valid positiveInt (1 or more)`;
      return undefined;
    }
    case 'decimal':
      if (typeof value !== 'number') return `must be a JSON number, not ${describe(value)}`;
      return Number.isFinite(value) ? undefined : `'${value}' is not a valid decimal`;
    default:
      break;
  }
  if (typeof value !== 'string') return `must be a JSON string, not ${describe(value)}`;
  if (value === '') return 'must not be empty (leave the property out instead)';
  if (type === 'base64Binary') return isBase64(value) ? undefined : 'is not valid base64';
  if (type === 'xhtml') return undefined;
  if (value.length > MAX_STRING) return `is longer than ${MAX_STRING} characters`;
  if (type === 'string' || type === 'markdown') return undefined;
  // base64Binary was checked above without the specification's backtracking pattern.
  const pattern = LEXICAL.has(type) ? primitivePattern(type) : undefined;
  if (pattern && !pattern.test(value)) return `'${clip(value)}' is not a valid ${type}`;
  if ((type === 'date' || type === 'dateTime' || type === 'instant') && !realDay(value)) {
    return `'${clip(value)}' is not a valid ${type} (no such day)`;
  }
  return undefined;
}

/** Whitespace may break the lines of base64; the rest is groups of four from the alphabet. */
function isBase64(text: string): boolean {
  let count = 0;
  let padding = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 32 || c === 9 || c === 10 || c === 13) continue;
    const alpha = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 || c === 47;
    if (c === 61) padding++;
    else if (!alpha || padding > 0) return false;
    count++;
  }
  return count % 4 === 0 && padding <= 2;
}

/** 2023-02-30 passes the pattern but is no day of the calendar. */
function realDay(value: string): boolean {
  if (value.length < 10) return true;
  const year = Number(value.slice(0, 4));
  const month = Number(value.slice(5, 7));
  const day = Number(value.slice(8, 10));
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return day <= days;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return `the string '${clip(value)}'`;
  return `${typeof value} ${String(value)}`;
}

export function clip(text: string, max = 60): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/** The FHIR primitive a `http://hl7.org/fhirpath/System.X` type code stands for when no extension says. */
export const SYSTEM_TYPES: Record<string, string> = {
  'http://hl7.org/fhirpath/System.String': 'string',
  'http://hl7.org/fhirpath/System.Boolean': 'boolean',
  'http://hl7.org/fhirpath/System.Integer': 'integer',
  'http://hl7.org/fhirpath/System.Decimal': 'decimal',
  'http://hl7.org/fhirpath/System.Date': 'date',
  'http://hl7.org/fhirpath/System.DateTime': 'dateTime',
  'http://hl7.org/fhirpath/System.Time': 'time',
};
