import type { Parameters } from 'fhir/r4';
import { fhirError } from '../fhir/errors';

/**
 * The kick-off parameters of Bulk Data 2.0.0, from the query (GET) or a Parameters body (POST).
 * What the server does not support is refused (400), or with `Prefer: handling=lenient` noted for
 * the manifest's error file and ignored.
 */

export type ExportLevel = 'system' | 'patient' | 'group';

interface ExportParameters {
  types?: string[];
  since?: string;
  patients?: string[];
  /** `_typeFilter`: per type, search queries of which a resource must match one. */
  typeFilters?: Record<string, string[]>;
  /** `_elements`: top-level element names, bare (every type) or `Type.name` (that type only). */
  elements?: string[];
  refused: string[];
}

const OUTPUT_FORMATS = ['application/fhir+ndjson', 'application/ndjson', 'ndjson'];
const IGNORED = new Set(['_format', '_pretty']);
const UNSUPPORTED = new Set(['includeAssociatedData', '_until', 'organizeOutputBy', 'allowPartialManifests']);
const ELEMENT_NAME = /^[a-z][A-Za-z0-9]*(\[x\])?$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

interface Raw {
  name: string;
  value?: string;
  reference?: string;
}

type ReadOptions = { level: ExportLevel; lenient: boolean; isResourceType(type: string): boolean };

/** Where one parameter's value goes: the result, and the refusal (400, or a note under lenient handling). */
interface Reader {
  result: ExportParameters;
  options: ReadOptions;
  refuse(name: string, reason: string): void;
}

export function readExportParameters(
  query: Record<string, string | string[]>,
  body: unknown,
  options: ReadOptions,
): ExportParameters {
  const result: ExportParameters = { refused: [] };
  const refuse = (name: string, reason: string) => {
    if (!options.lenient) throw fhirError('ERR_BULK_PARAM', { name, reason });
    result.refused.push(`${name}: ${reason} (ignored)`);
  };
  for (const p of rawParameters(query, body)) {
    if (IGNORED.has(p.name)) continue;
    readParameter(p, { result, options, refuse });
  }
  return result;
}

/** The parameters as given: the query's, then a Parameters body's. */
function rawParameters(query: Record<string, string | string[]>, body: unknown): Raw[] {
  const raw: Raw[] = [];
  for (const [name, value] of Object.entries(query))
    for (const v of Array.isArray(value) ? value : [value]) raw.push({ name, value: v });
  if (body !== undefined && body !== null && (typeof body !== 'object' || Object.keys(body).length > 0)) {
    const parameters = body as Parameters;
    if (parameters.resourceType !== 'Parameters')
      throw fhirError('ERR_BODY_NOT_PARAMETERS', {
        found: String(parameters.resourceType ?? 'something that is not a resource'),
      });
    for (const p of parameters.parameter ?? []) {
      const value =
        p.valueString ?? p.valueCode ?? p.valueInstant ?? p.valueDateTime ?? p.valueUri ?? p.valueBoolean?.toString();
      raw.push({ name: p.name, value, reference: p.valueReference?.reference });
    }
  }
  return raw;
}

function readParameter(p: Raw, reader: Reader): void {
  const { result, options, refuse } = reader;
  switch (p.name) {
    case '_outputFormat':
      if (!OUTPUT_FORMATS.includes(p.value ?? ''))
        throw fhirError('ERR_BULK_PARAM', {
          name: p.name,
          reason: `'${clip(p.value)}' is not one of ${OUTPUT_FORMATS.join(', ')}`,
        });
      break;
    case '_since':
      if (!INSTANT.test(p.value ?? '') || Number.isNaN(Date.parse(p.value ?? '')))
        throw fhirError('ERR_BULK_PARAM', { name: p.name, reason: `'${clip(p.value)}' is not an instant` });
      result.since = new Date(p.value as string).toISOString();
      break;
    case '_type':
      for (const type of (p.value ?? '')
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t !== '')) {
        if (options.isResourceType(type)) (result.types ??= []).push(type);
        else refuse(p.name, `'${clip(type)}' is not a resource type`);
      }
      break;
    case '_typeFilter':
      readTypeFilter(p, reader);
      break;
    case '_elements':
      readElements(p, reader);
      break;
    case 'patient':
      if (options.level === 'system') refuse(p.name, 'applies to Patient and Group level exports');
      else if (!p.reference?.startsWith('Patient/'))
        throw fhirError('ERR_BULK_PARAM', { name: p.name, reason: 'must be a valueReference to Patient/[id]' });
      else (result.patients ??= []).push(p.reference.slice('Patient/'.length));
      break;
    default:
      refuse(p.name, UNSUPPORTED.has(p.name) ? 'not supported by this server' : 'not a Bulk Data kick-off parameter');
  }
}

/** `Type?query` (Bulk Data 2.0.0); several for one type are alternatives. */
function readTypeFilter(p: Raw, { result, options, refuse }: Reader): void {
  const text = p.value ?? '';
  const q = text.indexOf('?');
  const type = q < 0 ? '' : text.slice(0, q);
  if (!options.isResourceType(type) || q === text.length - 1) {
    refuse(p.name, `'${clip(text)}' is not [type]?[search query]`);
    return;
  }
  ((result.typeFilters ??= {})[type] ??= []).push(text.slice(q + 1));
}

/** Only root elements are permitted (Bulk Data 2.0.0): `name` or `Type.name`. */
function readElements(p: Raw, { result, options, refuse }: Reader): void {
  for (const element of (p.value ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const dot = element.indexOf('.');
    const type = dot < 0 ? undefined : element.slice(0, dot);
    const name = dot < 0 ? element : element.slice(dot + 1);
    if (!ELEMENT_NAME.test(name) || (type !== undefined && !options.isResourceType(type)))
      refuse(p.name, `'${clip(element)}' is not [element] or [resource type].[element] of a root element`);
    else (result.elements ??= []).push(element);
  }
}

function clip(text: string | undefined): string {
  return (text ?? '').slice(0, 100);
}
