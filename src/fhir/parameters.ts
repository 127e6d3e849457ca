import type { ParametersParameter, Resource } from 'fhir/r4';
import { fhirError } from './errors';
import {
  acceptsType,
  isKnownValueType,
  isPrimitiveType,
  isSimpleTypeName,
  isValidPrimitive,
  parsePrimitive,
  typeOfValueKey,
} from './datatypes';
import { checkDatatype } from './datatype-check';
import type { OperationSpec, ParamSpec } from './operation-definition';

/**
 * The one module that turns a request into an operation's typed input and an operation's
 * output into a response body, driven by the OperationDefinition. Handlers never see either.
 */

/** A value whose type is open in the definition (`Element`): the handler says which it is. */
export class TypedValue {
  constructor(
    readonly type: string,
    readonly value: unknown,
  ) {}
}

export type OperationInput = Record<string, unknown>;
export type OperationOutput = Record<string, unknown>;

export interface ReadOptions {
  /** `Prefer: handling=strict`: unknown parameter names are refused instead of ignored. */
  strict: boolean;
  /** Checks a resource given as a parameter (structure, against the R4 definitions); throws a FhirError. */
  checkResource?: (resource: Resource, at: string) => void;
  /**
   * The query string of a POST. It carries the other parameters when the body is a bare resource
   * (`POST Patient/$validate?profile=...`, as HAPI takes it); with a Parameters body it is ignored.
   */
  query?: Record<string, string | string[] | undefined>;
}

/**
 * Limits on what one request may carry, so a hostile or broken client cannot make the server
 * walk without end: parameters (query names and values, or Parameters entries with their parts,
 * counted together) and codings in one CodeableConcept.
 */
export const MAX_PARAMETERS = 1000;
export const MAX_CODINGS = 100;

/** Query names that belong to the HTTP exchange, never to an operation (`_graphql` shapes the answer). */
const RESERVED_QUERY = new Set(['_format', '_pretty', '_summary', '_elements', '_graphql']);

// ---------------------------------------------------------------------------------------------
// Input

export function readQuery(
  query: Record<string, string | string[] | undefined>,
  spec: OperationSpec,
  options: ReadOptions,
): OperationInput {
  const input: OperationInput = {};
  let count = 0;
  for (const raw of Object.values(query)) count += Array.isArray(raw) ? raw.length : 1;
  if (count > MAX_PARAMETERS) throw fhirError('ERR_PARAMS_LIMIT', { count, limit: MAX_PARAMETERS });
  for (const [name, raw] of Object.entries(query)) {
    if (raw === undefined || RESERVED_QUERY.has(name)) continue;
    const param = spec.inputs.find((p) => p.name === name);
    if (!param) {
      if (options.strict) throw fhirError('ERR_PARAM_UNKNOWN', { name, code: spec.code });
      continue;
    }
    if (param.part.length > 0 || !isSimpleTypeName(param.type)) {
      throw fhirError('ERR_PARAM_NOT_IN_GET', { name, type: param.type ?? 'a parameter with parts' });
    }
    const type = param.type as string;
    const values = (Array.isArray(raw) ? raw : [raw]).map((text) => {
      const value = parsePrimitive(type, text);
      if (value === undefined) throw fhirError('ERR_PARAM_VALUE', { name, type, value: clip(text) });
      return value;
    });
    assign(input, param, values);
  }
  checkMinimums(input, spec.inputs);
  return input;
}

export function readParameters(body: unknown, spec: OperationSpec, options: ReadOptions): OperationInput {
  if (!isObject(body) || body.resourceType !== 'Parameters') {
    const found =
      isObject(body) && typeof body.resourceType === 'string' ? body.resourceType : 'something that is not a resource';
    const single = isObject(body) && typeof body.resourceType === 'string' ? singleResourceInput(spec) : undefined;
    if (!single) throw fhirError('ERR_BODY_NOT_PARAMETERS', { found });
    const others = { ...spec, inputs: spec.inputs.filter((p) => p !== single) };
    const input = readQuery(options.query ?? {}, others, options);
    input[single.name] = readBareResource(body as Record<string, unknown> & { resourceType: string }, single, options);
    return input;
  }
  const entries = body.parameter ?? [];
  if (!Array.isArray(entries)) throw fhirError('ERR_PARAM_SHAPE', { name: 'parameter', reason: 'must be an array' });
  const count = countEntries(entries);
  if (count > MAX_PARAMETERS) throw fhirError('ERR_PARAMS_LIMIT', { count, limit: MAX_PARAMETERS });
  return readEntries(entries, spec.inputs, spec.code, options, 'Parameters.parameter');
}

/**
 * The operation's one resource-typed input, when it has exactly one: a POST body that is a resource
 * other than Parameters is that input (as HAPI reads `POST Patient/$validate` with a Patient body).
 */
function singleResourceInput(spec: OperationSpec): ParamSpec | undefined {
  const resources = spec.inputs.filter((p) => p.part.length === 0 && p.type !== undefined && isResourceType(p.type));
  return resources.length === 1 ? resources[0] : undefined;
}

function readBareResource(
  body: Record<string, unknown> & { resourceType: string },
  param: ParamSpec,
  options: ReadOptions,
): Resource {
  const declared = param.type as string;
  if (!acceptsResource(declared, body.resourceType)) {
    throw fhirError('ERR_PARAM_TYPE', { name: param.path, expected: declared, found: body.resourceType });
  }
  options.checkResource?.(body as unknown as Resource, body.resourceType);
  return body as unknown as Resource;
}

/** Whether a parameter declared as `declared` takes a resource of type `found`. */
function acceptsResource(declared: string, found: string): boolean {
  if (declared === 'Resource') return true;
  if (declared === 'DomainResource') return found !== 'Bundle' && found !== 'Binary' && found !== 'Parameters';
  return declared === found;
}

/** Entries with their parts, all the way down (a resource inside one counts once). */
function countEntries(entries: unknown[]): number {
  let count = 0;
  const stack: unknown[][] = [entries];
  while (stack.length > 0) {
    const list = stack.pop() as unknown[];
    count += list.length;
    for (const entry of list) if (isObject(entry) && Array.isArray(entry.part)) stack.push(entry.part);
  }
  return count;
}

function readEntries(
  entries: unknown[],
  specs: ParamSpec[],
  code: string,
  options: ReadOptions,
  where: string,
): OperationInput {
  const grouped = new Map<ParamSpec, unknown[]>();
  entries.forEach((entry, index) => {
    const at = `${where}[${index}]`;
    if (!isObject(entry) || typeof entry.name !== 'string' || entry.name === '') {
      throw fhirError('ERR_PARAM_SHAPE', { name: at, reason: 'every parameter needs a name' }, { expression: [at] });
    }
    const param = specs.find((p) => p.name === entry.name);
    if (!param) {
      if (options.strict) throw fhirError('ERR_PARAM_UNKNOWN', { name: entry.name, code }, { expression: [at] });
      return;
    }
    const value = readEntry(entry as unknown as ParametersParameter, param, code, options, at);
    const list = grouped.get(param) ?? [];
    list.push(value);
    grouped.set(param, list);
  });
  const input: OperationInput = {};
  for (const [param, values] of grouped) assign(input, param, values);
  checkMinimums(input, specs);
  return input;
}

function readEntry(
  entry: ParametersParameter,
  param: ParamSpec,
  code: string,
  options: ReadOptions,
  at: string,
): unknown {
  const valueKeys = Object.keys(entry).filter((k) => k.startsWith('value'));
  const hasResource = entry.resource !== undefined;
  const hasPart = entry.part !== undefined;
  const forms = valueKeys.length + (hasResource ? 1 : 0) + (hasPart ? 1 : 0);
  if (forms === 0) {
    throw fhirError(
      'ERR_PARAM_SHAPE',
      { name: param.path, reason: 'has no value, resource or part' },
      { expression: [at] },
    );
  }
  if (forms > 1) {
    throw fhirError(
      'ERR_PARAM_SHAPE',
      { name: param.path, reason: 'carries more than one of value[x], resource and part' },
      { expression: [at] },
    );
  }
  if (param.part.length > 0) {
    if (!hasPart || !Array.isArray(entry.part)) {
      throw fhirError(
        'ERR_PARAM_TYPE',
        { name: param.path, expected: 'parts', found: foundForm(entry, valueKeys) },
        { expression: [at] },
      );
    }
    return readEntries(entry.part, param.part, code, options, `${at}.part`);
  }
  const declared = param.type ?? 'Element';
  if (isResourceType(declared)) {
    if (!hasResource) {
      throw fhirError(
        'ERR_PARAM_TYPE',
        { name: param.path, expected: declared, found: foundForm(entry, valueKeys) },
        { expression: [at] },
      );
    }
    const resource = entry.resource as unknown;
    if (!isObject(resource) || typeof resource.resourceType !== 'string') {
      throw fhirError(
        'ERR_PARAM_SHAPE',
        { name: param.path, reason: 'resource has no resourceType' },
        { expression: [at] },
      );
    }
    if (!acceptsResource(declared, resource.resourceType)) {
      throw fhirError(
        'ERR_PARAM_TYPE',
        { name: param.path, expected: declared, found: resource.resourceType },
        { expression: [at] },
      );
    }
    options.checkResource?.(resource as unknown as Resource, `${at}.resource`);
    return resource;
  }
  if (valueKeys.length !== 1) {
    throw fhirError(
      'ERR_PARAM_TYPE',
      { name: param.path, expected: declared, found: foundForm(entry, valueKeys) },
      { expression: [at] },
    );
  }
  const key = valueKeys[0];
  const actual = typeOfValueKey(key);
  const value = tolerated(actual, (entry as unknown as Record<string, unknown>)[key]);
  if (!acceptsType(declared, actual) || !isKnownValueType(actual)) {
    throw fhirError(
      'ERR_PARAM_TYPE',
      { name: param.path, expected: declared, found: actual },
      { expression: [`${at}.${key}`] },
    );
  }
  if (isPrimitiveType(actual)) {
    if (!isValidPrimitive(actual, value)) {
      throw fhirError(
        'ERR_PARAM_VALUE',
        { name: param.path, type: actual, value: clip(String(JSON.stringify(value))) },
        { expression: [`${at}.${key}`] },
      );
    }
  } else if (!isObject(value)) {
    throw fhirError(
      'ERR_PARAM_VALUE',
      { name: param.path, type: actual, value: clip(String(JSON.stringify(value))) },
      { expression: [`${at}.${key}`] },
    );
  } else if (actual === 'CodeableConcept' && Array.isArray(value.coding) && value.coding.length > MAX_CODINGS) {
    throw fhirError(
      'ERR_CODINGS_LIMIT',
      { name: param.path, count: value.coding.length, limit: MAX_CODINGS },
      { expression: [`${at}.${key}.coding`] },
    );
  } else {
    // Handlers may then trust what they read: a code is a string without stray whitespace, a coding list a list.
    const problem = checkDatatype(actual, value, `${at}.${key}`);
    if (problem) {
      throw fhirError(
        'ERR_PARAM_DATATYPE',
        { name: param.path, type: actual, ...problem },
        { expression: [problem.path] },
      );
    }
  }
  return declared === 'Element' ? new TypedValue(actual, value) : value;
}

/**
 * A boolean written as the JSON string "true" or "false" is read as that boolean: some clients
 * (and files of the HL7 terminology test suite) write it so, and what it means is not in doubt.
 * Anything else must be the JSON type FHIR prescribes.
 */
function tolerated(type: string, value: unknown): unknown {
  if (type === 'boolean' && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}

function foundForm(entry: ParametersParameter, valueKeys: string[]): string {
  if (valueKeys.length === 1) return typeOfValueKey(valueKeys[0]);
  if (entry.resource) return `a ${entry.resource.resourceType ?? 'resource'} resource`;
  if (entry.part) return 'parts';
  return 'several values';
}

function assign(input: OperationInput, param: ParamSpec, values: unknown[]): void {
  if (values.length > param.max) {
    throw fhirError('ERR_PARAM_TOO_MANY', { name: param.path, max: param.maxText, count: values.length });
  }
  input[param.name] = param.max > 1 ? values : values[0];
}

function checkMinimums(input: OperationInput, specs: ParamSpec[]): void {
  for (const param of specs) {
    const value = input[param.name];
    const count = value === undefined ? 0 : Array.isArray(value) && param.max > 1 ? value.length : 1;
    if (count < param.min) throw fhirError('ERR_PARAM_MISSING', { name: param.path });
  }
}

// ---------------------------------------------------------------------------------------------
// Output

/** A declared type that is neither a primitive nor a data type names a resource type. */
export function isResourceType(type: string): boolean {
  return type !== 'Element' && !isKnownValueType(type) && /^[A-Z]/.test(type);
}

export function isObject(
  value: unknown,
): value is Record<string, unknown> & { resourceType?: unknown; parameter?: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function clip(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}
