import { createRequire } from 'node:module';

/**
 * Values as the index stores and compares them: strings normalised for matching, FHIR dates as
 * the instant ranges their precision covers, decimals with the range their written precision
 * implies, and UCUM quantities in canonical units.
 */

/** Lower-case, accents removed: what string search compares. */
export function normalizeText(text: string): string {
  return text.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
}

/** Index rows keep at most this many characters of a string (a narrative can be megabytes). */
const MAX_INDEXED_TEXT = 2000;

export function clipText(text: string): string {
  return text.length > MAX_INDEXED_TEXT ? text.slice(0, MAX_INDEXED_TEXT) : text;
}

// ---------------------------------------------------------------------------------------------
// Dates

/** The ends of time, for open periods (the range of an ECMAScript Date). */
export const MIN_INSTANT = -8_640_000_000_000_000;
export const MAX_INSTANT = 8_640_000_000_000_000;

export interface Range {
  low: number;
  high: number;
}

const DATE = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

/**
 * The range of instants a FHIR date, dateTime or instant covers, from its first to its last
 * millisecond: `2013` is the whole year, `2013-01-14T10:00` that minute. A value without a zone
 * is read as UTC. Undefined when it is not such a value.
 */
export function dateRange(text: string): Range | undefined {
  const m = DATE.exec(text.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = mo === undefined ? 0 : Number(mo) - 1;
  const day = d === undefined ? 1 : Number(d);
  if (month > 11 || day < 1 || day > 31) return undefined;
  if (h !== undefined && (Number(h) > 23 || Number(mi) > 59 || (s !== undefined && Number(s) > 59))) return undefined;
  const offset =
    zone === undefined || zone === 'Z'
      ? 0
      : (zone.startsWith('-') ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
  if (mo === undefined) return { low: utcDay(year, 0, 1), high: utcDay(year + 1, 0, 1) - 1 };
  if (d === undefined) return { low: utcDay(year, month, 1), high: utcDay(year, month + 1, 1) - 1 };
  if (h === undefined) {
    const low = utcDay(year, month, day);
    if (new Date(low).getUTCDate() !== day) return undefined;
    return { low, high: utcDay(year, month, day + 1) - 1 };
  }
  const base = utcDay(year, month, day) + (Number(h) * 60 + Number(mi)) * 60_000 - offset;
  if (s === undefined) return { low: base, high: base + 60_000 - 1 };
  const seconds = base + Number(s) * 1000;
  if (frac === undefined) return { low: seconds, high: seconds + 999 };
  const digits = frac.slice(1);
  const ms = Number(`0.${digits}`) * 1000;
  const step = digits.length >= 3 ? 1 : 10 ** (3 - digits.length);
  return { low: seconds + Math.floor(ms), high: seconds + Math.floor(ms) + step - 1 };
}

/**
 * Midnight UTC of a day, in milliseconds. The year is set apart so that years 0-99 stay
 * themselves (Date.UTC reads them as 1900-1999); months and days past their end roll over.
 */
function utcDay(year: number, month: number, day: number): number {
  const date = new Date(Date.UTC(2000, month, day));
  date.setUTCFullYear(year);
  return date.getTime();
}

// ---------------------------------------------------------------------------------------------
// Numbers

/**
 * The range a decimal as written stands for: `100` is [99.5, 100.5), `1.50` is [1.495, 1.505);
 * an exponent form (`1e2`) counts its mantissa's digits.
 */
export function decimalRange(text: string): Range | undefined {
  const m = /^([-+]?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?$/.exec(text.trim());
  if (!m) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value)) return undefined;
  const decimals = (m[3]?.length ?? 0) - Number(m[4] ?? 0);
  const half = 0.5 * 10 ** -decimals;
  return { low: value - half, high: value + half };
}

// ---------------------------------------------------------------------------------------------
// UCUM

export const UCUM = 'http://unitsofmeasure.org';

interface UcumUtils {
  convertToBaseUnits(
    unit: string,
    value: number,
  ): { status: string; magnitude: number; unitToExp: Record<string, number>; fromUnitIsSpecial?: boolean };
}

const require = createRequire(import.meta.url);
let ucum: UcumUtils | undefined;
const canonicalUnits = new Map<string, { code: string; factor: number } | null>();

/**
 * A UCUM quantity in canonical units (`5 mg` -> `0.005 g`), so that quantities in commensurable
 * units compare. Undefined for units UCUM does not know, and for special units (Celsius) whose
 * conversion is not a factor.
 */
export function canonicalQuantity(value: number, unit: string): { code: string; value: number } | undefined {
  let known = canonicalUnits.get(unit);
  if (known === undefined) {
    ucum ??= (require('@lhncbc/ucum-lhc') as { UcumLhcUtils: { getInstance(): UcumUtils } }).UcumLhcUtils.getInstance();
    let converted: ReturnType<UcumUtils['convertToBaseUnits']> | undefined;
    try {
      converted = ucum.convertToBaseUnits(unit, 1);
    } catch {
      converted = undefined;
    }
    known =
      converted && converted.status === 'succeeded' && !converted.fromUnitIsSpecial
        ? {
            factor: converted.magnitude,
            code:
              Object.entries(converted.unitToExp)
                .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
                .map(([u, e]) => (e === 1 ? u : `${u}${e}`))
                .join('.') || '1',
          }
        : null;
    if (canonicalUnits.size < 10_000) canonicalUnits.set(unit, known);
  }
  return known ? { code: known.code, value: value * known.factor } : undefined;
}
