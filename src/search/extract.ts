import type { Resource } from 'fhir/r4';
import { emptyIndexRows, type IndexRows, type QuantityRow, type TokenRow } from '../storage/index-schema';
import type { ChildMemo, Node } from './expression';
import type { CompiledParam, SearchParameterRegistry, SearchParamType } from './registry';
import {
  canonicalQuantity,
  clipText,
  dateRange,
  decimalRange,
  MAX_INSTANT,
  MIN_INSTANT,
  normalizeText,
  UCUM,
} from './values';

/**
 * A resource's search index rows: every indexed parameter of its type evaluated on it, each
 * selected value turned into the rows of its kind (a CodeableConcept gives a token row per
 * coding and one for its text, a HumanName a string row per part, a Period one date range...).
 * The same function serves the index (at write time) and in-memory matching, so both agree.
 */

interface ExtractOptions {
  /** The code system of a required binding's value set, so a bare `code` element has a system. */
  bindingSystem?: (valueSet: string) => string | undefined;
  /** The server's own base URL(s), so an absolute reference to this server counts as local. */
  localBases?: string[];
}

export class IndexExtractor {
  constructor(
    readonly registry: SearchParameterRegistry,
    private readonly options: ExtractOptions = {},
  ) {}

  extract(resource: Resource): IndexRows {
    const rows = emptyIndexRows();
    const root: Node = { value: resource, type: resource.resourceType };
    const memo: ChildMemo = new Map();
    for (const compiled of this.registry.indexed(resource.resourceType)) {
      if (compiled.param.code === '_text') {
        const div = (resource as { text?: { div?: string } }).text?.div;
        if (typeof div === 'string') addString(rows, '_text', 0, stripTags(div));
        continue;
      }
      const nodes = compiled.evaluate(root, memo);
      if (compiled.param.type === 'composite') this.composite(rows, compiled, nodes, memo);
      else for (const node of nodes) this.add(rows, compiled.param.code, compiled.param.type, node, 0);
    }
    return rows;
  }

  /**
   * Each selected element's components, tied together by `grp`, under `code#0`, `code#1`, ...;
   * none for a component whose rows are a plain parameter's (see `CompositeLayout`).
   */
  private composite(rows: IndexRows, compiled: CompiledParam, nodes: Node[], memo: ChildMemo): void {
    const { components, layout } = compiled;
    if (!components || !layout) return;
    nodes.forEach((node, i) => {
      components.forEach((component, k) => {
        if (layout.shared[k]) return;
        for (const value of component.evaluate(node, memo))
          this.add(rows, layout.indexes[k], component.param.type, value, i + 1);
      });
    });
  }

  /** The rows one value gives for a parameter of this type. */
  add(rows: IndexRows, param: string, type: SearchParamType, node: Node, grp: number): void {
    switch (type) {
      case 'string':
        for (const text of stringsOf(node)) addString(rows, param, grp, text);
        return;
      case 'token':
        for (const token of this.tokensOf(node)) rows.token.push({ param, grp, ...token });
        if (node.type === 'Identifier' && isObject(node.value)) this.identifierType(rows, param, grp, node.value);
        return;
      case 'date': {
        const range = dateRangeOf(node);
        if (range) rows.date.push({ param, grp, ...range });
        return;
      }
      case 'number': {
        const value = numberOf(node.value);
        if (value !== undefined) rows.number.push({ param, grp, low: value, high: value });
        return;
      }
      case 'quantity':
        quantityRows(rows, param, grp, node);
        return;
      case 'reference':
        this.referenceRows(rows, param, grp, node);
        return;
      case 'uri':
        if (typeof node.value === 'string') rows.uri.push({ param, grp, value: node.value });
        return;
      default:
        return;
    }
  }

  private tokensOf(node: Node): Omit<TokenRow, 'param' | 'grp'>[] {
    const value = node.value;
    switch (node.type) {
      case 'Coding':
        return isObject(value) ? [coding(value)] : [];
      case 'CodeableConcept': {
        if (!isObject(value)) return [];
        const out = (Array.isArray(value.coding) ? value.coding : []).filter(isObject).map(coding);
        if (typeof value.text === 'string')
          out.push({ system: null, code: null, text: normalizeText(clipText(value.text)) });
        return out;
      }
      case 'Identifier':
        return isObject(value) && typeof value.value === 'string'
          ? [{ system: str(value.system), code: value.value, text: textOf(value.type) }]
          : [];
      case 'ContactPoint':
        return isObject(value) && typeof value.value === 'string'
          ? [{ system: str(value.system), code: value.value, text: null }]
          : [];
      case 'boolean':
        return typeof value === 'boolean' ? [{ system: null, code: String(value), text: null }] : [];
      case 'Reference':
        return isObject(value) && isObject(value.identifier) && typeof value.identifier.value === 'string'
          ? [{ system: str(value.identifier.system), code: value.identifier.value, text: null }]
          : [];
      default: {
        if (typeof value !== 'string' && typeof value !== 'number') return [];
        const system = node.binding ? (this.options.bindingSystem?.(node.binding) ?? null) : null;
        return [{ system, code: String(value), text: null }];
      }
    }
  }

  /** `identifier:of-type` rows: the identifier's type coding, with the value, under `<param>:of-type`. */
  private identifierType(rows: IndexRows, param: string, grp: number, identifier: Record<string, unknown>): void {
    const type = identifier.type;
    if (!isObject(type) || !Array.isArray(type.coding) || typeof identifier.value !== 'string') return;
    for (const c of type.coding.filter(isObject)) {
      if (typeof c.code !== 'string') continue;
      rows.token.push({
        param: `${param}:of-type`,
        grp,
        system: str(c.system),
        code: `${c.code}|${identifier.value}`,
        text: null,
      });
    }
  }

  private referenceRows(rows: IndexRows, param: string, grp: number, node: Node): void {
    const value = node.value;
    if (typeof value === 'string') {
      // canonical or uri: url|version
      const bar = value.indexOf('|');
      rows.reference.push({
        param,
        grp,
        target_type: null,
        target_id: null,
        url: bar < 0 ? value : value.slice(0, bar),
        version: bar < 0 ? null : value.slice(bar + 1),
      });
      return;
    }
    if (!isObject(value)) return;
    if (isObject(value.identifier) && typeof value.identifier.value === 'string') {
      rows.token.push({
        param: `${param}:identifier`,
        grp,
        system: str(value.identifier.system),
        code: value.identifier.value,
        text: null,
      });
    }
    if (typeof value.reference !== 'string') return;
    const target = parseReference(value.reference, this.options.localBases ?? []);
    if (target) rows.reference.push({ param, grp, ...target });
  }
}

/**
 * A reference string as the index keeps it: `Type/id` (also absolute ones to this server, and
 * with a version) as target type and id; any other absolute URL, urn or canonical as a url.
 * Contained references (`#x`) are not searchable.
 */
export function parseReference(
  reference: string,
  localBases: string[],
): { target_type: string | null; target_id: string | null; url: string | null; version: string | null } | undefined {
  if (reference.startsWith('#') || reference === '') return undefined;
  let relative = reference;
  for (const base of localBases) {
    if (reference.startsWith(`${base}/`)) relative = reference.slice(base.length + 1);
  }
  const local = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/.exec(relative);
  if (local) return { target_type: local[1], target_id: local[2], url: null, version: null };
  const bar = reference.indexOf('|');
  return {
    target_type: null,
    target_id: null,
    url: bar < 0 ? reference : reference.slice(0, bar),
    version: bar < 0 ? null : reference.slice(bar + 1),
  };
}

function addString(rows: IndexRows, param: string, grp: number, text: string): void {
  const exact = clipText(text);
  rows.string.push({ param, grp, norm: normalizeText(exact), exact });
}

function stringsOf(node: Node): string[] {
  const value = node.value;
  if (typeof value === 'string') return [value];
  if (!isObject(value)) return [];
  const parts = (keys: string[]) =>
    keys
      .flatMap((k) => (Array.isArray(value[k]) ? value[k] : [value[k]]))
      .filter((v): v is string => typeof v === 'string');
  switch (node.type) {
    case 'HumanName':
      return parts(['text', 'family', 'given', 'prefix', 'suffix']);
    case 'Address':
      return parts(['text', 'line', 'city', 'district', 'state', 'postalCode', 'country']);
    case 'CodeableConcept':
      return [
        ...parts(['text']),
        ...(Array.isArray(value.coding)
          ? value.coding
              .filter(isObject)
              .map((c) => c.display)
              .filter((d): d is string => typeof d === 'string')
          : []),
      ];
    case 'Coding':
      return parts(['display']);
    case 'Annotation':
      return parts(['text']);
    default:
      return [];
  }
}

function dateRangeOf(node: Node): { low: number; high: number } | undefined {
  const value = node.value;
  if (typeof value === 'string') return dateRange(value);
  if (!isObject(value)) return undefined;
  if (node.type === 'Period') {
    const start = typeof value.start === 'string' ? dateRange(value.start) : undefined;
    const end = typeof value.end === 'string' ? dateRange(value.end) : undefined;
    if (!start && !end) return undefined;
    return { low: start?.low ?? MIN_INSTANT, high: end?.high ?? MAX_INSTANT };
  }
  if (node.type === 'Timing') {
    const ranges = (Array.isArray(value.event) ? value.event : [])
      .filter((e): e is string => typeof e === 'string')
      .map(dateRange);
    const repeat = isObject(value.repeat) ? value.repeat : undefined;
    const bounds = repeat && isObject(repeat.boundsPeriod) ? repeat.boundsPeriod : undefined;
    if (bounds) ranges.push(dateRangeOf({ value: bounds, type: 'Period' }));
    const known = ranges.filter((r): r is { low: number; high: number } => r !== undefined);
    if (known.length === 0) return undefined;
    return { low: Math.min(...known.map((r) => r.low)), high: Math.max(...known.map((r) => r.high)) };
  }
  return undefined;
}

function numberOf(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && decimalRange(value)) return Number(value);
  return undefined;
}

function quantityRows(rows: IndexRows, param: string, grp: number, node: Node): void {
  const value = node.value;
  if (!isObject(value)) return;
  if (node.type === 'Range') {
    const low = isObject(value.low) ? value.low : undefined;
    const high = isObject(value.high) ? value.high : undefined;
    const unitOf = low ?? high;
    if (!unitOf) return;
    const lo = numberOf(low?.value);
    const hi = numberOf(high?.value);
    rows.quantity.push({ param, grp, ...quantityRow(unitOf, lo ?? -Infinity, hi ?? Infinity) });
    return;
  }
  const v = numberOf(value.value);
  if (v === undefined) return;
  if (node.type === 'Money') {
    rows.quantity.push({
      param,
      grp,
      system: 'urn:iso:std:iso:4217',
      code: str(value.currency),
      unit: str(value.currency),
      low: v,
      high: v,
      canon_code: null,
      canon_low: null,
      canon_high: null,
    });
    return;
  }
  rows.quantity.push({ param, grp, ...quantityRow(value, v, v) });
}

/** A quantity's row from the element that holds its unit and the [low, high] it spans (open ends at the largest magnitudes). */
function quantityRow(unitOf: Record<string, unknown>, low: number, high: number): Omit<QuantityRow, 'param' | 'grp'> {
  const system = str(unitOf.system);
  const code = str(unitOf.code);
  const finite = (n: number) => (Number.isFinite(n) ? n : n > 0 ? Number.MAX_VALUE : -Number.MAX_VALUE);
  let canon: { code: string; low: number; high: number } | undefined;
  if (system === UCUM && code) {
    const lo = canonicalQuantity(finite(low), code);
    const hi = canonicalQuantity(finite(high), code);
    if (lo && hi) canon = { code: lo.code, low: lo.value, high: hi.value };
  }
  return {
    system,
    code,
    unit: str(unitOf.unit),
    low: finite(low),
    high: finite(high),
    canon_code: canon?.code ?? null,
    canon_low: canon?.low ?? null,
    canon_high: canon?.high ?? null,
  };
}

function coding(c: Record<string, unknown>): Omit<TokenRow, 'param' | 'grp'> {
  return {
    system: str(c.system),
    code: str(c.code),
    text: typeof c.display === 'string' ? normalizeText(clipText(c.display)) : null,
  };
}

function textOf(value: unknown): string | null {
  if (!isObject(value)) return null;
  if (typeof value.text === 'string') return normalizeText(clipText(value.text));
  return null;
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Narrative XHTML as the words a reader sees. */
function stripTags(html: string): string {
  return html
    .replace(/<[^>]*>/g, ' ')
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .trim();
}
