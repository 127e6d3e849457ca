/**
 * FHIR R4 data types as the parameter layer needs them: which are primitive, how a query-string
 * value becomes a typed value, and which value[x] types stand in for a declared type.
 */

export type PrimitiveValue = string | number | boolean;

const PRIMITIVE_PATTERNS: Record<string, RegExp> = {
  boolean: /^(true|false)$/,
  integer: /^(0|[-+]?[1-9][0-9]*)$/,
  positiveInt: /^\+?[1-9][0-9]*$/,
  unsignedInt: /^(0|\+?[1-9][0-9]*)$/,
  decimal: /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/,
  date: /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1]))?)?$/,
  dateTime:
    /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1])(T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00)))?)?)?$/,
  instant:
    /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)-(0[1-9]|1[0-2])-(0[1-9]|[1-2][0-9]|3[0-1])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))$/,
  time: /^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?$/,
  // code, uri, url and canonical are strings too: no characters below U+0020 (the R4 patterns' \S
  // would let U+0001 through, and an operation echoing the value would then break its answer).
  code: /^[^\s\x00-\x1f]+(\s[^\s\x00-\x1f]+)*$/,
  id: /^[A-Za-z0-9\-.]{1,64}$/,
  oid: /^urn:oid:[0-2](\.(0|[1-9][0-9]*))+$/,
  uuid: /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  uri: /^[^\s\x00-\x1f]*$/,
  url: /^[^\s\x00-\x1f]*$/,
  canonical: /^[^\s\x00-\x1f]*$/,
  // Groups of four base64 characters, whitespace allowed between (the count is checked apart): a
  // nested pattern would overflow the regex engine's stack on a value of a few megabytes.
  base64Binary: /^[\s0-9a-zA-Z+/=]+$/,
  // R4: no characters below U+0020 except tab, line feed and carriage return.
  markdown: /^[^\x00-\x08\x0b\x0c\x0e-\x1f]+$/,
  string: /^[^\x00-\x08\x0b\x0c\x0e-\x1f]+$/,
};

/** The lexical pattern of a primitive type (the R4 regular expression, anchored), if it has one. */
export function primitivePattern(type: string): RegExp | undefined {
  return PRIMITIVE_PATTERNS[type];
}

export function isPrimitiveType(type: string): boolean {
  return type in PRIMITIVE_PATTERNS;
}

/** FHIR's rule: a type whose name starts lower-case is primitive (seed rule for GET). */
export function isSimpleTypeName(type: string | undefined): boolean {
  return type !== undefined && /^[a-z]/.test(type);
}

/** Parses a query-string value by its declared type; undefined when it does not parse. */
export function parsePrimitive(type: string, raw: string): PrimitiveValue | undefined {
  if (!(type in PRIMITIVE_PATTERNS) || !matches(type, raw)) return undefined;
  switch (type) {
    case 'boolean':
      return raw === 'true';
    case 'integer':
    case 'positiveInt':
    case 'unsignedInt': {
      const n = Number(raw);
      return Number.isSafeInteger(n) && n <= 2147483647 && n >= -2147483648 ? n : undefined;
    }
    case 'decimal': {
      const n = Number(raw);
      return Number.isFinite(n) ? n : undefined;
    }
    default:
      return raw;
  }
}

/** Checks a JSON value from a POST body against a primitive type. */
export function isValidPrimitive(type: string, value: unknown): boolean {
  switch (type) {
    case 'boolean':
      return typeof value === 'boolean';
    case 'integer':
    case 'unsignedInt':
    case 'positiveInt':
      return (
        typeof value === 'number' &&
        Number.isInteger(value) &&
        value <= 2147483647 &&
        value >= (type === 'integer' ? -2147483648 : type === 'positiveInt' ? 1 : 0)
      );
    case 'decimal':
      return typeof value === 'number' && Number.isFinite(value);
    default: {
      if (typeof value !== 'string') return false;
      return matches(type, value);
    }
  }
}

/** The type's pattern (none: any text); base64 also comes in whole groups of four characters. */
function matches(type: string, text: string): boolean {
  const pattern = PRIMITIVE_PATTERNS[type];
  if (pattern !== undefined && !pattern.test(text)) return false;
  if (type !== 'base64Binary') return true;
  // The pattern let through only whitespace and base64 characters; the latter are all between
  // '+' and 'z', whitespace never is.
  let characters = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x2b && c <= 0x7a) characters++;
  }
  return characters > 0 && characters % 4 === 0;
}

/**
 * Types a value[x] may carry for a declared type. FHIR derives canonical, url, oid and uuid
 * from uri, and code, id and markdown from string, so a value of a derived type is a value of
 * the declared one (clients routinely send valueCanonical for a uri parameter).
 */
const ACCEPTED_FOR: Record<string, readonly string[]> = {
  uri: ['uri', 'url', 'canonical', 'oid', 'uuid'],
  canonical: ['canonical', 'uri', 'url'],
  url: ['url', 'uri'],
  string: ['string', 'code', 'id', 'markdown', 'uri', 'canonical', 'url'],
  // A code written as valueUri is read too (the HL7 suite's UCUM requests send units so).
  code: ['code', 'string', 'id', 'uri'],
  id: ['id', 'string', 'code'],
  integer: ['integer', 'positiveInt', 'unsignedInt'],
  decimal: ['decimal', 'integer'],
  dateTime: ['dateTime', 'date', 'instant'],
  date: ['date'],
};

export function acceptsType(declared: string, actual: string): boolean {
  if (declared === actual) return true;
  if (declared === 'Element' || declared === '*' || declared === 'Any') return true;
  return ACCEPTED_FOR[declared]?.includes(actual) ?? false;
}

/** `valueCodeableConcept` -> `CodeableConcept`, `valueUri` -> `uri`. */
export function typeOfValueKey(key: string): string {
  const suffix = key.slice('value'.length);
  const complex = suffix.charAt(0).toLowerCase() + suffix.slice(1);
  return isPrimitiveType(complex) ? complex : suffix;
}

/** `CodeableConcept` -> `valueCodeableConcept`, `uri` -> `valueUri`. */
export function valueKeyOfType(type: string): string {
  return 'value' + type.charAt(0).toUpperCase() + type.slice(1);
}

/** The data types (complex) a Parameters value[x] may hold in R4. */
export const PARAMETER_VALUE_TYPES: readonly string[] = [
  'Address',
  'Age',
  'Annotation',
  'Attachment',
  'CodeableConcept',
  'Coding',
  'ContactPoint',
  'Count',
  'Distance',
  'Duration',
  'HumanName',
  'Identifier',
  'Money',
  'Period',
  'Quantity',
  'Range',
  'Ratio',
  'Reference',
  'SampledData',
  'Signature',
  'Timing',
  'ContactDetail',
  'Contributor',
  'DataRequirement',
  'Expression',
  'ParameterDefinition',
  'RelatedArtifact',
  'TriggerDefinition',
  'UsageContext',
  'Dosage',
  'Meta',
];
const COMPLEX_TYPES = new Set(PARAMETER_VALUE_TYPES);

export function isKnownValueType(type: string): boolean {
  return isPrimitiveType(type) || COMPLEX_TYPES.has(type);
}
