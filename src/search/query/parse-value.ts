import { fhirError } from '../../fhir/errors';
import { parseReference } from '../extract';
import type { SearchParam } from '../registry';
import { canonicalQuantity, dateRange, decimalRange, UCUM } from '../values';
import type { Prefix, QuantityValue, ReferenceValue, ScalarType, TypedValue } from './criteria';
import { splitEscaped, unescapeValue } from './split';

/**
 * One search value read by its parameter's type (R4 search.html): a token's `system|code`, a
 * prefix and a range for dates, numbers and quantities (UCUM ones also in canonical units), a
 * reference as an id or a url. A malformed value is 400 naming the parameter.
 */

/** Where a value was written: the parameter's name as given, its modifier and definition, and the bases that mean this server. */
interface ValueSite {
  name: string;
  modifier: string | undefined;
  param: SearchParam;
  localBases: string[];
}

export function parseValue(type: ScalarType, raw: string, site: ValueSite): TypedValue {
  const { name, modifier } = site;
  const bad = () => fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
  switch (type) {
    case 'string':
      if (raw === '') throw bad();
      return { type, value: { text: unescapeValue(raw) } };
    case 'token': {
      const token = parseToken(raw);
      if (modifier !== 'text' && token.code === undefined && token.system === undefined) throw bad();
      return { type, value: modifier === 'text' ? { code: unescapeValue(raw) } : token };
    }
    case 'date': {
      const { prefix, rest } = prefixOf(raw);
      const range = dateRange(unescapeValue(rest));
      if (!range) throw bad();
      return { type, value: { prefix, range } };
    }
    case 'number': {
      const { prefix, rest } = prefixOf(raw);
      const range = decimalRange(rest);
      if (!range) throw bad();
      return { type, value: { prefix, value: Number(rest), range } };
    }
    case 'quantity': {
      const { prefix, rest } = prefixOf(raw);
      const parts = splitEscaped(rest, '|');
      const range = decimalRange(parts[0]);
      if (!range || parts.length === 2 || parts.length > 3) throw bad();
      const value: QuantityValue = {
        prefix,
        value: Number(parts[0]),
        range,
        system: parts[1] || undefined,
        code: parts[2] || undefined,
      };
      if (value.system === UCUM && value.code) {
        const low = canonicalQuantity(range.low, value.code);
        const high = canonicalQuantity(range.high, value.code);
        const point = canonicalQuantity(value.value, value.code);
        if (low && high && point)
          value.canonical = { code: point.code, value: point.value, range: { low: low.value, high: high.value } };
      }
      return { type, value };
    }
    case 'reference':
      // Unescaped first: an error names the value as unescaped.
      return { type, value: referenceValue(unescapeValue(raw), site) };
    case 'uri':
      if (raw === '') throw bad();
      return { type, value: { value: unescapeValue(raw) } };
    default:
      throw bad();
  }
}

/** A reference value: an id (of the modifier's type, or of the parameter's one target), `Type/id`, or a canonical url. */
function referenceValue(raw: string, site: ValueSite): ReferenceValue {
  const { name, modifier, param, localBases } = site;
  const bad = () => fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
  if (raw === '') throw bad();
  const targetType = modifier !== undefined && /^[A-Z]/.test(modifier) ? modifier : undefined;
  if (/^[A-Za-z0-9\-.]{1,64}$/.test(raw)) {
    const types = targetType ? [targetType] : param.target;
    return { type: types.length === 1 ? types[0] : undefined, id: raw };
  }
  const parsed = parseReference(raw, localBases);
  if (!parsed) throw bad();
  if (parsed.target_id !== null) {
    if (targetType && parsed.target_type !== targetType) throw bad();
    return { type: parsed.target_type ?? undefined, id: parsed.target_id };
  }
  return { url: parsed.url ?? undefined, version: parsed.version ?? undefined };
}

/** `system|code`, `|code` (no system), `system|` (any code), `code` (any system). */
export function parseToken(raw: string): { system?: string | null; code?: string } {
  const parts = splitEscaped(raw, '|');
  if (parts.length === 1) return parts[0] === '' ? {} : { code: parts[0] };
  const [system, code] = [parts[0], parts.slice(1).join('|')];
  return { system: system === '' ? null : system, code: code === '' ? undefined : code };
}

const PREFIXES: Prefix[] = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap'];

function prefixOf(raw: string): { prefix: Prefix; rest: string } {
  const two = raw.slice(0, 2) as Prefix;
  if (PREFIXES.includes(two) && raw.length > 2 && !/^[a-z]/.test(raw.slice(2)))
    return { prefix: two, rest: raw.slice(2) };
  return { prefix: 'eq', rest: raw };
}

/** The text as shown in an error: at most 100 characters. */
export function clip(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}
