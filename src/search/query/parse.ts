import { fhirError } from '../../fhir/errors';
import type { SearchParam, SearchParameterRegistry } from '../registry';
import { UNSUPPORTED_PARAMS } from '../registry';
import type {
  Criterion,
  Include,
  ScalarType,
  SearchQuery,
  SortKey,
  SummaryMode,
  TotalMode,
  TypedValue,
} from './criteria';
import { clip, parseToken, parseValue } from './parse-value';
import { splitEscaped, splitOn, splitValues, unescapeValue } from './split';

/**
 * The query string of a search, read against the parameters of the types searched (R4
 * search.html): names with modifiers, chains and `_has`, values split on unescaped commas (OR),
 * repeated names (AND), prefixes, and the result parameters (_sort, _count, _include, ...).
 * A malformed value is 400 naming the parameter; an unknown parameter is left out (R4), or 400
 * under `Prefer: handling=strict`; a known parameter this server does not evaluate is 400, never
 * silently ignored.
 */

const DEFAULT_COUNT = 20;
const MAX_COUNT = 1000;
const MAX_CHAIN_DEPTH = 3;

/** Parameters about the result rather than the match (and HTTP's own). */
const RESULT_PARAMS = new Set([
  '_count',
  '_sort',
  '_include',
  '_revinclude',
  '_total',
  '_summary',
  '_elements',
  '_format',
  '_pretty',
  '_cursor',
  '_type',
  '_offset',
]);

const MODIFIERS: Record<ScalarType | 'composite', string[]> = {
  string: ['exact', 'contains', 'missing'],
  token: ['text', 'not', 'above', 'below', 'in', 'not-in', 'of-type', 'missing'],
  date: ['missing'],
  number: ['missing'],
  quantity: ['missing'],
  reference: ['identifier', 'missing', 'above', 'below'],
  uri: ['below', 'above', 'missing'],
  composite: ['missing'],
};

interface ParseOptions {
  strict: boolean;
  /** Absolute bases that mean this server (a reference to one of them is local). */
  localBases: string[];
  /** Parameters defined but still being indexed: asking for them is 400 until they are ready. */
  indexing?: (type: string, code: string) => boolean;
}

export function parseSearch(
  types: string[],
  query: Record<string, string[]>,
  registry: SearchParameterRegistry,
  options: ParseOptions,
): SearchQuery {
  const parser = new Parser(registry, options);
  const result: SearchQuery = {
    types,
    criteria: [],
    sort: [],
    count: DEFAULT_COUNT,
    total: 'none',
    include: [],
    revinclude: [],
    understood: [],
  };
  for (const [name, values] of Object.entries(query)) {
    if (RESULT_PARAMS.has(name)) continue;
    for (const value of values) {
      const criterion = parser.criterion(types, name, value, 0);
      if (criterion) {
        result.criteria.push(criterion);
        result.understood.push([name, value]);
      }
    }
  }
  parser.resultParams(result, query);
  return result;
}

/** A chained name `code:Type.rest` read up to its first dot: the whole name, the type modifier and what follows. */
interface ChainHead {
  name: string;
  modifier: string | undefined;
  rest: string;
}

class Parser {
  constructor(
    private readonly registry: SearchParameterRegistry,
    private readonly options: ParseOptions,
  ) {}

  /** One `name=value` as a criterion, against every type searched; undefined when it is to be ignored. */
  criterion(types: string[], name: string, raw: string, depth: number): Criterion | undefined {
    if (name.startsWith('_has:')) return this.has(types, name, raw, depth);
    const dot = name.indexOf('.');
    const head = dot < 0 ? name : name.slice(0, dot);
    const colon = head.indexOf(':');
    const code = colon < 0 ? head : head.slice(0, colon);
    const modifier = colon < 0 ? undefined : head.slice(colon + 1);
    if (code === '_id') {
      if (dot >= 0) throw fhirError('ERR_SEARCH_PARAM', { name, value: raw });
      if (modifier !== undefined && modifier !== 'not' && modifier !== 'missing') throw badModifier(name, modifier);
      if (modifier === 'missing') return undefined;
      return { kind: 'id', ids: splitValues(raw).map(unescapeValue), not: modifier === 'not' };
    }
    const param = this.param(types, code, name);
    if (!param) return undefined;
    if (dot >= 0) return this.chain(types, param, { name, modifier, rest: name.slice(dot + 1) }, raw, depth);
    const union = this.unionOf(types, param);
    if (!union) return this.valueCriterion(param, name, modifier, raw);
    const of = union.map((q) => this.valueCriterion(q, name, modifier, raw));
    const absent = modifier === 'not' || modifier === 'not-in' || (modifier === 'missing' && raw === 'true');
    return { kind: absent ? 'all' : 'any', index: param.code, of };
  }

  /** The parameters whose rows hold a union parameter's values (see `CompiledParam.union`). */
  private unionOf(types: string[], param: SearchParam): SearchParam[] | undefined {
    if (types.length !== 1) return undefined;
    const codes = this.registry.get(types[0], param.code)?.union;
    return codes?.map((code) => this.registry.get(types[0], code)?.param as SearchParam);
  }

  /** The parameter `code` for all the types searched (it must mean the same kind of thing on each). */
  private param(types: string[], code: string, name: string): SearchParam | undefined {
    if (UNSUPPORTED_PARAMS.has(code)) throw fhirError('ERR_SEARCH_UNSUPPORTED', { name });
    const found = (types.length > 0 ? types : ['Resource']).map((t) => this.registry.get(t, code)?.param);
    if (found.some((p) => p === undefined)) {
      if (this.options.strict)
        throw fhirError('ERR_SEARCH_UNKNOWN', { name, types: types.join(', ') || 'all resources' });
      return undefined;
    }
    const params = found as SearchParam[];
    if (new Set(params.map((p) => p.type)).size > 1) throw fhirError('ERR_SEARCH_UNSUPPORTED', { name });
    for (const t of types) if (this.options.indexing?.(t, code)) throw fhirError('ERR_SEARCH_PARAM_INDEXING', { name });
    return params[0];
  }

  private valueCriterion(param: SearchParam, name: string, modifier: string | undefined, raw: string): Criterion {
    const type = param.type;
    if (type === 'special') throw fhirError('ERR_SEARCH_UNSUPPORTED', { name });
    if (
      modifier !== undefined &&
      !MODIFIERS[type].includes(modifier) &&
      !(type === 'reference' && /^[A-Z][A-Za-z]+$/.test(modifier))
    ) {
      throw badModifier(name, modifier);
    }
    if (modifier === 'missing') {
      if (raw !== 'true' && raw !== 'false') throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
      if (type === 'composite') {
        // A composite is there when its first component is.
        const first = this.registry.paramByUrl(param.components[0]?.definition ?? '');
        if (!first || first.type === 'composite' || first.type === 'special')
          throw fhirError('ERR_SEARCH_UNSUPPORTED', { name });
        return {
          kind: 'missing',
          index: this.registry.compositeLayout(param).indexes[0],
          paramType: first.type,
          missing: raw === 'true',
        };
      }
      return { kind: 'missing', index: param.code, paramType: type, missing: raw === 'true' };
    }
    if (type === 'composite') return this.composite(param, name, raw);
    if (
      type === 'token' &&
      (modifier === 'in' || modifier === 'not-in' || modifier === 'below' || modifier === 'above')
    ) {
      return {
        kind: 'terminology',
        index: param.code,
        modifier,
        values: splitValues(raw).map((v) => {
          if (modifier === 'in' || modifier === 'not-in') return { valueSet: unescapeValue(v) };
          const token = parseToken(v);
          if (!token.code || !token.system) throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(v) });
          return { system: token.system, code: token.code };
        }),
      };
    }
    if (type === 'reference' && modifier === 'identifier') {
      return {
        kind: 'value',
        index: `${param.code}:identifier`,
        paramType: 'token',
        values: splitValues(raw).map((v) => ({ type: 'token', value: parseToken(v) })),
      };
    }
    if (type === 'token' && modifier === 'of-type') {
      const values = splitValues(raw).map((v): TypedValue => {
        const parts = splitEscaped(v, '|');
        if (parts.length !== 3 || !parts[1] || !parts[2]) throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(v) });
        return { type: 'token', value: { system: parts[0] === '' ? null : parts[0], code: `${parts[1]}|${parts[2]}` } };
      });
      return { kind: 'value', index: `${param.code}:of-type`, paramType: 'token', values };
    }
    const values = splitValues(raw).map((v) =>
      parseValue(type, v, { name, modifier, param, localBases: this.options.localBases }),
    );
    return { kind: 'value', index: param.code, paramType: type, modifier, values };
  }

  private composite(param: SearchParam, name: string, raw: string): Criterion {
    const components = param.components.map((c) => this.registry.paramByUrl(c.definition));
    if (components.some((c) => c === undefined || c.type === 'composite' || c.type === 'special'))
      throw fhirError('ERR_SEARCH_UNSUPPORTED', { name });
    const types = (components as SearchParam[]).map((c) => c.type as ScalarType);
    const values = splitValues(raw).map((v) => {
      const parts = splitOn(v, '$');
      if (parts.length !== types.length) throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(v) });
      return parts.map((part, i) =>
        parseValue(types[i], part, {
          name,
          modifier: undefined,
          param: components[i] as SearchParam,
          localBases: this.options.localBases,
        }),
      );
    });
    const { indexes, tied } = this.registry.compositeLayout(param);
    return { kind: 'composite', index: param.code, indexes, tied, components: types, values };
  }

  /** `subject:Patient.name=x`, `subject.name=x`: the reference's targets must meet the rest. */
  private chain(
    types: string[],
    param: SearchParam,
    head: ChainHead,
    raw: string,
    depth: number,
  ): Criterion | undefined {
    const { name, modifier, rest } = head;
    if (depth >= MAX_CHAIN_DEPTH) throw fhirError('ERR_SEARCH_CHAIN_DEPTH', { name, limit: MAX_CHAIN_DEPTH });
    if (param.type !== 'reference') throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
    const nextCode = rest.split(/[.:]/)[0];
    let targets = modifier !== undefined ? [modifier] : param.target;
    if (modifier === undefined)
      targets = targets.filter(
        (t) => nextCode === '_id' || nextCode.startsWith('_has') || this.registry.get(t, nextCode) !== undefined,
      );
    if (targets.length === 0) {
      if (this.options.strict) throw fhirError('ERR_SEARCH_UNKNOWN', { name, types: types.join(', ') });
      return undefined;
    }
    // Each target type is searched with the rest; a parameter unknown there makes the whole chain unknown.
    const next = this.criterion(targets, rest, raw, depth + 1);
    if (!next) return undefined;
    return { kind: 'chain', index: param.code, targetTypes: targets, next };
  }

  /** `_has:Observation:patient:code=x`: some Observation whose `patient` points here has code x. */
  private has(types: string[], name: string, raw: string, depth: number): Criterion | undefined {
    if (depth >= MAX_CHAIN_DEPTH) throw fhirError('ERR_SEARCH_CHAIN_DEPTH', { name, limit: MAX_CHAIN_DEPTH });
    const match = /^_has:([A-Z][A-Za-z]+):([^:]+):(.+)$/.exec(name);
    if (!match) throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
    const [, type, refCode, rest] = match;
    const ref = this.registry.get(type, refCode)?.param;
    if (!ref || ref.type !== 'reference') throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
    const next = this.criterion([type], rest, raw, depth + 1);
    if (!next) return undefined;
    void types;
    return { kind: 'has', type, index: refCode, next };
  }

  resultParams(result: SearchQuery, query: Record<string, string[]>): void {
    const one = (name: string): string | undefined => {
      const values = query[name];
      if (!values || values.length === 0) return undefined;
      if (values.length > 1) throw fhirError('ERR_SEARCH_PARAM', { name, value: values.join(',') });
      return values[0];
    };
    const count = one('_count');
    if (count !== undefined) {
      if (!/^\d{1,7}$/.test(count)) throw fhirError('ERR_SEARCH_PARAM', { name: '_count', value: clip(count) });
      result.count = Math.min(Number(count), MAX_COUNT);
    }
    const total = one('_total');
    if (total !== undefined) {
      if (total !== 'none' && total !== 'estimate' && total !== 'accurate')
        throw fhirError('ERR_SEARCH_PARAM', { name: '_total', value: clip(total) });
      result.total = total as TotalMode;
    }
    const summary = one('_summary');
    if (summary !== undefined) {
      if (!['true', 'false', 'text', 'data', 'count'].includes(summary))
        throw fhirError('ERR_SEARCH_PARAM', { name: '_summary', value: clip(summary) });
      result.summary = summary as SummaryMode;
    }
    const elements = query._elements;
    if (elements) {
      result.elements = elements.flatMap(splitValues).map((e) => e.trim());
      if (result.elements.some((e) => !/^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$/.test(e))) {
        throw fhirError('ERR_SEARCH_PARAM', { name: '_elements', value: clip(elements.join(',')) });
      }
    }
    for (const raw of query._sort ?? [])
      for (const key of splitValues(raw)) result.sort.push(this.sortKey(result.types, key));
    for (const raw of query._include ?? []) result.include.push(this.include(raw, '_include', result.types));
    for (const raw of query['_include:iterate'] ?? [])
      result.include.push({ ...this.include(raw, '_include', result.types), iterate: true });
    for (const raw of query._revinclude ?? []) result.revinclude.push(this.include(raw, '_revinclude', result.types));
    for (const raw of query['_revinclude:iterate'] ?? [])
      result.revinclude.push({ ...this.include(raw, '_revinclude', result.types), iterate: true });
  }

  private sortKey(types: string[], key: string): SortKey {
    const descending = key.startsWith('-');
    const code = descending ? key.slice(1) : key;
    if (code === '_id') return { index: '_id', paramType: 'id', descending };
    const param = this.param(types, code, '_sort');
    if (!param || param.type === 'composite' || param.type === 'special')
      throw fhirError('ERR_SEARCH_PARAM', { name: '_sort', value: clip(key) });
    const rowsOf = this.unionOf(types, param)?.map((q) => q.code);
    return { index: param.code, paramType: param.type, descending, ...(rowsOf ? { rowsOf } : {}) };
  }

  private include(raw: string, name: string, types: string[]): Include {
    if (raw === '*') return { sourceType: '*', param: '*', iterate: false };
    const parts = raw.split(':');
    if (parts.length < 2 || parts.length > 3) throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
    const [sourceType, code, targetType] = parts;
    if (code !== '*') {
      const param = this.registry.get(sourceType, code)?.param;
      if (!param || param.type !== 'reference') throw fhirError('ERR_SEARCH_PARAM', { name, value: clip(raw) });
    }
    void types;
    return { sourceType, param: code, targetType, iterate: false };
  }
}

function badModifier(name: string, modifier: string) {
  return fhirError('ERR_SEARCH_MODIFIER', { name, modifier: clip(modifier) });
}
