import type { Resource } from 'fhir/r4';
import type { IndexRows, TokenRow } from '../storage/index-schema';
import type {
  Criterion,
  DateValue,
  NumberValue,
  QuantityValue,
  ScalarType,
  SortKey,
  TypedValue,
} from './query/criteria';
import type { ResolvedCodes } from './query/sql';
import { SORT_COLUMN } from './query/sql-values';
import { MAX_INSTANT, MIN_INSTANT, normalizeText } from './values';

/**
 * The same criteria as the SQL, decided in memory over one resource's index rows: for the
 * content the server holds without storing it (the bundled R4 definitions) and for checking a
 * single resource against a search (subscriptions). Criteria that need other resources (chains,
 * `_has`, compartments) cannot be decided here: `undefined` says so.
 */

type AnyRow = { param: string; grp: number } & Record<string, unknown>;

export function matches(
  resource: Resource,
  rows: IndexRows,
  criterion: Criterion,
  resolved: Map<Criterion, ResolvedCodes>,
): boolean | undefined {
  switch (criterion.kind) {
    case 'id': {
      const found = criterion.ids.includes(resource.id ?? '');
      return criterion.not ? !found : found;
    }
    case 'value': {
      const candidates = rowsOf(rows, criterion.paramType).filter((r) => r.param === criterion.index);
      const found = candidates.some((row) =>
        criterion.values.some((v) =>
          valueMatches(row, v, criterion.modifier === 'not' ? undefined : criterion.modifier),
        ),
      );
      return criterion.modifier === 'not' ? !found : found;
    }
    case 'missing': {
      if (criterion.paramType === 'composite') return undefined;
      const present = rowsOf(rows, criterion.paramType).some((r) => r.param === criterion.index);
      return criterion.missing ? !present : present;
    }
    case 'terminology': {
      const pairs = resolved.get(criterion)?.pairs ?? [];
      const found = rows.token.some(
        (t) =>
          t.param === criterion.index &&
          t.code !== null &&
          pairs.some((p) => p.system === t.system && p.code === t.code),
      );
      return criterion.modifier === 'not-in' ? !found : found;
    }
    case 'composite':
      return criterion.values.some((tuple) => {
        const first = rowsOf(rows, criterion.components[0]).filter((r) => r.param === criterion.indexes[0]);
        return first.some((anchor) =>
          tuple.every((v, i) =>
            rowsOf(rows, criterion.components[i]).some(
              (r) =>
                r.param === criterion.indexes[i] &&
                (!criterion.tied || r.grp === anchor.grp) &&
                valueMatches(r, v, undefined),
            ),
          ),
        );
      });
    case 'any':
    case 'all': {
      const answers = criterion.of.map((sub) => matches(resource, rows, sub, resolved));
      const decisive = criterion.kind === 'any';
      if (answers.includes(decisive)) return decisive;
      return answers.includes(undefined) ? undefined : !decisive;
    }
    default:
      return undefined;
  }
}

function rowsOf(rows: IndexRows, type: ScalarType): AnyRow[] {
  return rows[type] as unknown as AnyRow[];
}

function valueMatches(row: AnyRow, v: TypedValue, modifier: string | undefined): boolean {
  switch (v.type) {
    case 'string': {
      if (modifier === 'exact') return row.exact === v.value.text;
      const norm = normalizeText(v.value.text);
      return modifier === 'contains' ? String(row.norm).includes(norm) : String(row.norm).startsWith(norm);
    }
    case 'token': {
      const t = row as unknown as TokenRow;
      if (modifier === 'text') {
        const words = normalizeText(v.value.code ?? '');
        return t.text !== null && (t.text.startsWith(words) || t.text.includes(` ${words}`));
      }
      if (v.value.code !== undefined && t.code !== v.value.code) return false;
      if (v.value.system === null) return t.system === null;
      return v.value.system === undefined || t.system === v.value.system;
    }
    case 'date':
      return inRange(row.low as number, row.high as number, v.value, 'date');
    case 'number':
      return inRange(row.low as number, row.high as number, v.value, 'number');
    case 'quantity':
      return quantityMatches(row, v.value);
    case 'reference': {
      const r = v.value;
      if (r.id !== undefined) return row.target_id === r.id && (r.type === undefined || row.target_type === r.type);
      if (r.url !== undefined) return row.url === r.url && (r.version === undefined || row.version === r.version);
      return false;
    }
    case 'uri': {
      const value = String(row.value);
      if (modifier === 'below')
        return (
          value === v.value.value || value.startsWith(v.value.value.endsWith('/') ? v.value.value : `${v.value.value}/`)
        );
      if (modifier === 'above') return v.value.value === value || v.value.value.startsWith(`${value}/`);
      return value === v.value.value;
    }
    default:
      return false;
  }
}

function quantityMatches(row: AnyRow, v: QuantityValue): boolean {
  if (v.system && v.code) {
    if (
      v.canonical &&
      row.canon_code === v.canonical.code &&
      inRange(
        row.canon_low as number,
        row.canon_high as number,
        { prefix: v.prefix, value: v.canonical.value, range: v.canonical.range },
        'number',
      )
    )
      return true;
    if (row.system !== v.system || row.code !== v.code) return false;
  } else if (v.code) {
    if (row.code !== v.code && row.unit !== v.code) return false;
  } else if (v.system && row.system !== v.system) return false;
  return inRange(row.low as number, row.high as number, v, 'number');
}

/** The prefixes over ranges, exactly as the SQL states them (see SqlBuilder.range). */
function inRange(low: number, high: number, v: DateValue | NumberValue, kind: 'date' | 'number'): boolean {
  const vl = v.range.low;
  const vh = v.range.high;
  switch (v.prefix) {
    case 'eq':
      return low >= vl && high <= vh;
    case 'ne':
      return low < vl || high > vh;
    case 'gt':
      return high > vh;
    case 'lt':
      return low < vl;
    case 'ge':
      return high > vh || (low >= vl && high <= vh);
    case 'le':
      return low < vl || (low >= vl && high <= vh);
    case 'sa':
      return low > vh;
    case 'eb':
      return high < vl;
    case 'ap': {
      const center = 'value' in v ? v.value : (vl + vh) / 2;
      const slack = kind === 'date' ? Math.abs(Date.now() - center) * 0.1 : Math.abs(center) * 0.1;
      return (
        low <= Math.min(vh + slack, kind === 'date' ? MAX_INSTANT : Number.MAX_VALUE) &&
        high >= Math.max(vl - slack, kind === 'date' ? MIN_INSTANT : -Number.MAX_VALUE)
      );
    }
    default:
      return false;
  }
}

/** A sort key's value in memory, as the SQL computes it (missing values last either way). */
export function sortValue(resource: Resource, rows: IndexRows, key: SortKey): string | number {
  if (key.paramType === 'id') return resource.id ?? '';
  const type = key.paramType as ScalarType;
  const candidates = rowsOf(rows, type).filter((r) =>
    key.rowsOf ? key.rowsOf.includes(r.param) : r.param === key.index,
  );
  const column = SORT_COLUMN[type];
  const numeric = type === 'date' || type === 'number' || type === 'quantity';
  const pick = key.descending && numeric ? 'high' : column;
  const values = candidates.map((r) => r[pick]).filter((v) => v !== null && v !== undefined) as (string | number)[];
  if (values.length === 0) {
    if (!numeric) return key.descending ? '' : '\u{10FFFF}';
    const [lowest, highest] = type === 'date' ? [MIN_INSTANT, MAX_INSTANT] : [-Number.MAX_VALUE, Number.MAX_VALUE];
    return key.descending ? lowest : highest;
  }
  return values.reduce((a, b) => ((key.descending ? b > a : b < a) ? b : a));
}
