import type { Bundle, BundleEntry, BundleLink, OperationOutcome, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { StoreReader, StoredVersion } from '../storage/store';
import { versionFromRow, type VersionRow } from '../storage/store';
import type { IndexRows } from '../storage/index-schema';
import type { IndexExtractor } from './extract';
import { includeEntries } from './includes';
import { matches, sortValue } from './memory-match';
import type { ElementModel } from './model/model';
import type { Criterion, SearchQuery } from './query/criteria';
import { decodeCursor, encodeCursor, type Cursor } from './query/cursor';
import { parseSearch } from './query/parse';
import { splitValues, unescapeValue } from './query/split';
import { isTextSort, restrictsType, SqlBuilder, type ResolvedCodes } from './query/sql';
import type { SearchParameterRegistry } from './registry';
import { subset } from './summary';
import type { CodeMatcher } from './terminology';
import { isLimited, type AccessGuard, type Grant } from '../auth/guard';
import { guardCriteria } from './guarded-criteria';

/**
 * FHIR search over the index: a query string becomes criteria, the criteria SQL, and the rows a
 * page of a searchset Bundle with its links. Pages follow a keyset cursor (the last row's sort
 * values and row id), so paging stays exact while others write: nothing is skipped or repeated
 * among the resources that were there when the search started.
 */

export interface SearchServiceDeps {
  store: StoreReader;
  registry: SearchParameterRegistry;
  model: ElementModel;
  codes: CodeMatcher;
  isResourceType(type: string): boolean;
  /** Parameters still being indexed after being defined (400 until done). */
  indexing?: (type: string, code: string) => boolean;
  builtIn?: BuiltInContent;
  /** Index rows for built-in resources, matched in memory. */
  extractor?: IndexExtractor;
  /** What the request's principal may search (every search is limited to it). */
  guard?: AccessGuard;
}

/** An id no resource can have (ids have no spaces): a criterion that matches nothing. */
const NO_ID = ' ';

/** How many resources `_include`/`_revinclude` add to one page at most; beyond it an outcome says so. */
export const MAX_INCLUDED = 1000;

export interface SearchHandler {
  /** Answers a search (type, system or compartment level) with a searchset Bundle. */
  search(target: SearchTarget, query: Record<string, string[]>, ctx: RequestContext): Promise<Bundle>;
}

export type SearchTarget =
  | { level: 'type'; type: string }
  | { level: 'system' }
  | { level: 'compartment'; compartment: string; id: string; type: string };

/** Resources the server holds without storing them (the bundled R4 definitions), by type. */
export interface BuiltInContent {
  of(type: string): readonly Resource[];
}

interface BuiltInEntry {
  resource: Resource;
  rows: IndexRows;
}

interface PageItem {
  version: StoredVersion;
  rid: number;
  keys: unknown[];
}

interface PageRow {
  rid: number;
  project: string;
  type: string;
  id: string;
  version: number;
  keys: unknown[];
}

export class SearchService implements SearchHandler {
  constructor(private readonly deps: SearchServiceDeps) {}

  async search(target: SearchTarget, query: Record<string, string[]>, ctx: RequestContext): Promise<Bundle> {
    const types = this.typesOf(target, query);
    const parsed = parseSearch(types, query, this.deps.registry, {
      strict: ctx.prefer.handling === 'strict',
      localBases: [ctx.baseUrl],
      indexing: this.deps.indexing,
    });
    parsed.criteria = this.reachable(parsed.criteria, ctx);
    if (target.level === 'compartment') parsed.criteria.push(this.compartmentCriterion(target, types));
    const grants = this.grants(target, types, ctx);
    parsed.criteria.push(...grantCriteria(grants, this.deps.model));
    const builtInCandidates = target.level === 'type' ? this.builtInEntries(target.type) : [];
    const project = ctx.project;
    const resolved = await this.resolveTerminology(project, parsed.criteria, types, builtInCandidates);
    const builtIns = await this.builtInMatches(project, target, parsed, resolved, builtInCandidates);
    const cursor = query._cursor?.[0] !== undefined ? decodeCursor(query._cursor[0], parsed.sort.length) : undefined;
    const offsetText = query._offset?.[0];
    if (offsetText !== undefined && !/^\d{1,9}$/.test(offsetText)) throw fhirError('ERR_SEARCH_PARAM', { name: '_offset', value: offsetText.slice(0, 20) });
    const offset = offsetText === undefined ? undefined : Number(offsetText);

    const bundle: Bundle = { resourceType: 'Bundle', type: 'searchset' };
    const counted = async () => builtIns.length + (await this.count(project, parsed, types, resolved));
    if (parsed.summary === 'count' || parsed.total === 'accurate' || parsed.total === 'estimate') bundle.total = await counted();
    const links: BundleLink[] = [];
    const self = selfParams(parsed, query);
    const url = (params: [string, string][]) => linkUrl(ctx.baseUrl, target, params);
    links.push({ relation: 'self', url: url(cursor || offset ? [...self, ...pagingParams(query)] : self) });
    if (parsed.summary === 'count' || parsed.count === 0) {
      bundle.total ??= await counted();
      bundle.link = links;
      return bundle;
    }

    const page = await this.assemble(project, parsed, types, resolved, builtIns, cursor, offset);
    if (page.items.length > 0 && page.hasNext) {
      const last = page.items[page.items.length - 1];
      const next: [string, string][] =
        offset !== undefined ? [['_offset', String(offset + parsed.count)]] : [['_cursor', encodeCursor({ keys: last.keys, rid: last.rid, direction: 'next' })]];
      links.push({ relation: 'next', url: url([...self, ...next]) });
    }
    if (page.items.length > 0 && page.hasPrevious) {
      const first = page.items[0];
      const previous: [string, string][] =
        offset !== undefined ? [['_offset', String(Math.max(0, offset - parsed.count))]] : [['_cursor', encodeCursor({ keys: first.keys, rid: first.rid, direction: 'previous' })]];
      links.push({ relation: 'previous', url: url([...self, ...previous]) });
    }
    if (cursor !== undefined || (offset ?? 0) > 0) links.push({ relation: 'first', url: url(self) });
    bundle.link = links;
    if (bundle.total === undefined && !page.hasNext && cursor === undefined && !offset) bundle.total = page.items.length;

    const versions = page.items.map((item) => item.version);
    const entries: BundleEntry[] = versions.map((v) => this.entry(ctx, v, parsed, 'match'));
    if (parsed.include.length > 0 || parsed.revinclude.length > 0) {
      const included = await includeEntries({ project, store: this.deps.store, registry: this.deps.registry, matches: versions, query: parsed, limit: MAX_INCLUDED });
      for (const v of included.versions) if (this.visible(v, ctx)) entries.push(this.entry(ctx, v, parsed, 'include'));
      if (included.truncated) {
        const outcome: OperationOutcome = {
          resourceType: 'OperationOutcome',
          issue: [{ severity: 'warning', code: 'too-costly', details: { text: `_include and _revinclude were stopped at ${MAX_INCLUDED} resources for this page` } }],
        };
        entries.push({ resource: outcome, search: { mode: 'outcome' } });
      }
    }
    if (entries.length > 0) bundle.entry = entries;
    return bundle;
  }

  /**
   * One page in the search's order: built-in resources first (in their own sort order), then the
   * stored ones. A cursor into the built-in part carries a negative position; one into the
   * stored part is a keyset over the index.
   */
  private async assemble(
    project: string,
    query: SearchQuery,
    types: string[],
    resolved: Map<Criterion, ResolvedCodes>,
    builtIns: StoredVersion[],
    cursor: Cursor | undefined,
    offset: number | undefined,
  ): Promise<{ items: PageItem[]; hasNext: boolean; hasPrevious: boolean }> {
    const n = builtIns.length;
    const placeholder = query.sort.map(() => 0);
    const inStored = cursor !== undefined && cursor.rid > 0;
    const items: PageItem[] = [];
    let start = 0;
    if (!inStored && n > 0) {
      if (cursor) start = cursor.direction === 'next' ? -cursor.rid : Math.max(0, -cursor.rid - 1 - query.count);
      else if (offset !== undefined) start = Math.min(offset, n);
      builtIns.slice(start, start + query.count).forEach((version, i) => items.push({ version, rid: -(start + i + 1), keys: placeholder }));
    }
    const room = query.count - items.length;
    if (room === 0) {
      const more = start + items.length < n || (await this.page(project, query, types, resolved, undefined, undefined, 0)).hasMore;
      return { items, hasNext: more, hasPrevious: start > 0 };
    }
    const storedOffset = offset !== undefined ? Math.max(0, offset - n) : undefined;
    const { rows, hasMore } = await this.page(project, query, types, resolved, inStored ? cursor : undefined, inStored ? undefined : storedOffset, room);
    const versions = await this.contents(project, rows);
    rows.forEach((row, i) => {
      if (versions[i]) items.push({ version: versions[i], rid: row.rid, keys: row.keys });
    });
    const backwards = cursor?.direction === 'previous' && inStored;
    return {
      items,
      hasNext: backwards ? true : hasMore,
      hasPrevious: backwards ? hasMore || n > 0 : start > 0 || inStored || (offset ?? 0) > 0,
    };
  }

  /** Built-in resources of the type searched that meet every criterion, in sort order; those a stored one replaces are left out. */
  private async builtInMatches(project: string, target: SearchTarget, query: SearchQuery, resolved: Map<Criterion, ResolvedCodes>, candidates: BuiltInEntry[]): Promise<StoredVersion[]> {
    if (target.level !== 'type' || candidates.length === 0) return [];
    const found = candidates.filter(({ resource, rows }) => query.criteria.every((c) => matches(resource, rows, c, resolved) === true));
    if (found.length === 0) return [];
    const b = new SqlBuilder(project);
    const ids = found.map((f) => b.bind(f.resource.id));
    const shadowed = new Set(
      (await b.run<{ id: string }>(this.deps.store, `SELECT id FROM resources r WHERE ${b.scoped('r', [target.type])} AND deleted = FALSE AND id IN (${ids.join(', ')})`)).map((r) => r.id),
    );
    const visible = found.filter((f) => !shadowed.has(f.resource.id as string));
    const keyed = visible.map((f) => ({ f, keys: query.sort.map((key) => sortValue(f.resource, f.rows, key)) }));
    keyed.sort((a, b) => {
      for (let i = 0; i < query.sort.length; i++) {
        if (a.keys[i] === b.keys[i]) continue;
        const before = a.keys[i] < b.keys[i];
        return (before ? -1 : 1) * (query.sort[i].descending ? -1 : 1);
      }
      return (a.f.resource.id as string) < (b.f.resource.id as string) ? -1 : 1;
    });
    return keyed.map(({ f }) => builtInVersion(f.resource, project));
  }

  /** The built-in resources of a type with their index rows (extracted once: the content never changes). */
  private builtInEntries(type: string): BuiltInEntry[] {
    const { builtIn, extractor } = this.deps;
    if (!builtIn || !extractor) return [];
    let entries = this.builtInCache.get(type);
    if (!entries) {
      entries = builtIn.of(type).map((resource) => ({ resource, rows: extractor.extract(resource) }));
      this.builtInCache.set(type, entries);
    }
    return entries;
  }

  private readonly builtInCache = new Map<string, BuiltInEntry[]>();

  /**
   * The resources a conditional interaction's criteria match (at most `limit`), read through
   * `reader` (inside a transaction, its own view). Parsed strictly: a conditional write that
   * ignored a criterion it did not understand could change the wrong resource.
   */
  async matchKeys(type: string, query: Record<string, string[]>, ctx: RequestContext, reader: StoreReader = this.deps.store, limit = 2): Promise<{ id: string; rid: number }[]> {
    const parsed = parseSearch([type], query, this.deps.registry, { strict: true, localBases: [ctx.baseUrl], indexing: this.deps.indexing });
    if (parsed.criteria.length === 0) throw fhirError('ERR_CONDITIONAL_EMPTY', { type });
    // Whether a conditional write found a match tells as much as a search's count would.
    parsed.criteria = this.reachable(parsed.criteria, ctx);
    const resolved = await this.resolveTerminology(ctx.project, parsed.criteria, [type], []);
    // Conditional writes change the project's own resources only.
    const b = new SqlBuilder(ctx.project, resolved, true);
    const rows = await b.run<{ id: string; rid: number | string }>(reader, `SELECT r.id, r.rid FROM resources r WHERE ${this.where(b, parsed, [type])} ORDER BY r.rid LIMIT ${b.bind(limit)}`);
    return rows.map((row) => ({ id: row.id, rid: Number(row.rid) }));
  }

  /**
   * The resources of `targetTypes` that the current resources of a compartment reference, in
   * (type, id) order after `after`, at most `limit`: what `$everything` adds so the compartment
   * can be read. Only references the index holds count; whether each may be read is the caller's
   * to check (it reads them through the REST service).
   */
  async referencedFrom(
    options: { compartment: string; id: string; targetTypes: string[]; after?: { type: string; id: string }; limit: number },
    ctx: RequestContext,
  ): Promise<{ type: string; id: string }[]> {
    const definition = this.deps.model.compartment(options.compartment);
    if (!definition) throw fhirError('ERR_SEARCH_COMPARTMENT', { compartment: options.compartment });
    if (options.targetTypes.length === 0) return [];
    const b = new SqlBuilder(ctx.project, new Map(), true);
    const members = Object.entries(definition)
      .filter(([, params]) => params.length > 0)
      .map(([type, params]) => `(x.type = ${b.bind(type)} AND x.param IN (${params.map((p) => b.bind(p)).join(', ')}))`);
    const after = options.after ? `AND (t.target_type > ${b.bind(options.after.type)} OR (t.target_type = ${b.bind(options.after.type)} AND t.target_id > ${b.bind(options.after.id)}))` : '';
    const sql = `SELECT DISTINCT t.target_type AS type, t.target_id AS id FROM search_reference t JOIN resources r ON r.rid = t.rid AND r.deleted = FALSE
      WHERE t.project = ${b.bind(ctx.project)} AND ${b.typeFilter('t.target_type', options.targetTypes)} AND t.target_id IS NOT NULL ${after}
        AND t.rid IN (SELECT x.rid FROM search_reference x WHERE x.project = ${b.bind(ctx.project)} AND (${members.join(' OR ')})
          AND x.target_type = ${b.bind(options.compartment)} AND x.target_id = ${b.bind(options.id)})
      ORDER BY t.target_type, t.target_id LIMIT ${b.bind(options.limit)}`;
    return (await b.run<{ type: string; id: string }>(this.deps.store, sql)).map((row) => ({ type: String(row.type), id: String(row.id) }));
  }

  /** Whether `type` has a search parameter with this code. */
  hasParam(type: string, code: string): boolean {
    return this.deps.registry.forType(type).has(code);
  }

  private entry(ctx: RequestContext, version: StoredVersion, query: SearchQuery, mode: 'match' | 'include'): BundleEntry {
    const resource = subset(version.resource as Resource, this.deps.model, { summary: query.summary, elements: query.elements });
    return { fullUrl: `${ctx.baseUrl}/${version.type}/${version.id}`, resource, search: { mode } };
  }

  /**
   * What the principal may search, per type: 403 for a type it may not search at all; a limit
   * (a patient's compartment, its own ids) becomes a criterion. A search of every type needs every
   * type without limits.
   */
  private grants(target: SearchTarget, types: string[], ctx: RequestContext): Map<string, Grant> {
    const grants = new Map<string, Grant>();
    const guard = this.deps.guard;
    if (!guard || ctx.principal.operator) return grants;
    if (types.length === 0) {
      guard.allowAll(ctx.principal, 'search');
      return grants;
    }
    for (const type of types) grants.set(type, guard.allow(ctx.principal, 'search', type));
    if (target.level === 'compartment' && [...grants.values()].every((g) => g.ids === undefined)) {
      // A patient's own compartment is within a patient/ grant as it is; another's is outside it.
      const patients = new Set([...grants.values()].map((g) => g.patient));
      const patient = [...patients][0];
      if (patients.size === 1 && (patient === undefined || (target.compartment === 'Patient' && target.id === patient))) return new Map();
      if (!patients.has(undefined)) return new Map([['*', { ids: [NO_ID] }]]);
    }
    const limited = [...grants.values()].some(isLimited);
    if (limited && types.length > 1 && target.level !== 'compartment') {
      throw fhirError('ERR_AUTH_FORBIDDEN', { reason: "the token's limits (a patient's compartment) apply one type at a time; search each type" });
    }
    return grants;
  }

  /** The criteria with the types their chains and `_has` reach checked against the principal's grants (src/search/guarded-criteria.ts). */
  private reachable(criteria: Criterion[], ctx: RequestContext): Criterion[] {
    const guard = this.deps.guard;
    if (!guard || ctx.principal.operator) return criteria;
    return guardCriteria(criteria, {
      allow: (type) => guard.allow(ctx.principal, 'search', type),
      limits: (type, grant) => grantCriteria(new Map([[type, grant]]), this.deps.model),
    });
  }

  /** An included resource is shown only when the principal may read it. */
  private visible(version: StoredVersion, ctx: RequestContext): boolean {
    const guard = this.deps.guard;
    if (!guard || ctx.principal.operator || !version.resource) return true;
    try {
      return guard.covers(guard.allow(ctx.principal, 'read', version.type), version.resource);
    } catch {
      return false;
    }
  }

  private typesOf(target: SearchTarget, query: Record<string, string[]>): string[] {
    if (target.level === 'type') return [target.type];
    if (target.level === 'compartment') {
      const definition = this.deps.model.compartment(target.compartment);
      if (!definition) throw fhirError('ERR_SEARCH_COMPARTMENT', { compartment: target.compartment });
      return target.type === '*' ? Object.keys(definition).sort() : [target.type];
    }
    const listed = (query._type ?? []).flatMap(splitValues).map(unescapeValue).filter((t) => t !== '');
    for (const type of listed) if (!this.deps.isResourceType(type)) throw fhirError('ERR_SEARCH_PARAM', { name: '_type', value: type.slice(0, 100) });
    return [...new Set(listed)];
  }

  private compartmentCriterion(target: Extract<SearchTarget, { level: 'compartment' }>, types: string[]): Criterion {
    const definition = this.deps.model.compartment(target.compartment) ?? {};
    const byType = types.filter((t) => definition[t]).map((t): [string, string[]] => [t, definition[t]]);
    return { kind: 'compartment', byType, targetType: target.compartment, targetId: target.id };
  }

  /** Token modifiers that need the terminology engine, resolved to the codes present in the index. */
  private async resolveTerminology(project: string, criteria: Criterion[], types: string[], builtIns: BuiltInEntry[]): Promise<Map<Criterion, ResolvedCodes>> {
    const resolved = new Map<Criterion, ResolvedCodes>();
    const visit = async (c: Criterion, within: string[]): Promise<void> => {
      if (c.kind === 'chain') return visit(c.next, c.targetTypes);
      if (c.kind === 'has') return c.next ? visit(c.next, [c.type]) : undefined;
      if (c.kind === 'any' || c.kind === 'all') {
        for (const sub of c.of) await visit(sub, within);
        return;
      }
      if (c.kind !== 'terminology') return;
      const b = new SqlBuilder(project);
      const present = await b.run<{ system: string | null; code: string }>(this.deps.store, `SELECT DISTINCT x.system, x.code FROM search_token x WHERE ${b.scoped('x', within)} AND x.param = ${b.bind(c.index)} AND x.code IS NOT NULL`);
      if (within === types) {
        for (const { rows } of builtIns) for (const t of rows.token) if (t.param === c.index && t.code !== null) present.push({ system: t.system, code: t.code });
      }
      const tests: ((system: string | null, code: string) => boolean)[] = [];
      for (const value of c.values) {
        if (value.valueSet !== undefined) {
          const test = await this.deps.codes.valueSet(value.valueSet, project);
          if (!test) throw fhirError('ERR_SEARCH_VALUESET', { name: `${c.index}:${c.modifier}`, url: value.valueSet.slice(0, 200) });
          tests.push(test);
        } else {
          const system = value.system as string;
          const test = await this.deps.codes.hierarchy(system, value.code as string, c.modifier === 'above' ? 'above' : 'below', project);
          // A system the engine cannot walk: only the code itself is known to be below (or above) itself.
          tests.push(test ? (s, code) => s === system && test(code) : (s, code) => s === system && code === value.code);
        }
      }
      resolved.set(c, { pairs: present.filter((p) => tests.some((t) => t(p.system, p.code))) });
    };
    for (const c of criteria) await visit(c, types);
    return resolved;
  }

  private where(b: SqlBuilder, query: SearchQuery, types: string[]): string {
    // A criterion whose index rows are of the types searched already restricts the type; stating it
    // again on `resources` would make the planner scan every resource of the type instead of
    // looking up the few row ids the criterion names.
    const typed = query.criteria.some(restrictsType);
    const conditions = typed ? [] : [b.scoped('r', types)];
    return [...conditions, 'r.deleted = FALSE', ...query.criteria.map((c) => b.criterion(c, 'r', types))].join('\n  AND ');
  }

  private async count(project: string, query: SearchQuery, types: string[], resolved: Map<Criterion, ResolvedCodes>): Promise<number> {
    const b = new SqlBuilder(project, resolved);
    const sql = `SELECT COUNT(*) AS n FROM resources r WHERE ${this.where(b, query, types)}`;
    const [row] = await b.run<{ n: number | string }>(this.deps.store, sql);
    return Number(row?.n ?? 0);
  }

  /** One page of matching rows in sort order, and whether more lie beyond it. */
  private async page(project: string, query: SearchQuery, types: string[], resolved: Map<Criterion, ResolvedCodes>, cursor: Cursor | undefined, offset: number | undefined, count: number) {
    const b = new SqlBuilder(project, resolved);
    const keys = query.sort.map((key, i) => `${b.sortExpression(key, 'r')} AS k${i}`);
    const inner = `SELECT r.rid, r.project, r.type, r.id, r.version${keys.map((k) => `, ${k}`).join('')} FROM resources r WHERE ${this.where(b, query, types)}`;
    const backwards = cursor?.direction === 'previous';
    const ascending = query.sort.map((key) => key.descending === backwards);
    let keyset = '';
    if (cursor) {
      const terms: string[] = [];
      for (let i = 0; i <= query.sort.length; i++) {
        const equal = query.sort.slice(0, i).map((_, j) => `q.k${j} = ${b.bind(cursor.keys[j])}`);
        const after = i < query.sort.length ? `q.k${i} ${ascending[i] ? '>' : '<'} ${b.bind(cursor.keys[i])}` : `q.rid ${backwards ? '<' : '>'} ${b.bind(cursor.rid)}`;
        terms.push(`(${[...equal, after].join(' AND ')})`);
      }
      keyset = `WHERE ${terms.join(' OR ')}`;
    }
    const order = [...query.sort.map((_, i) => `q.k${i} ${ascending[i] ? 'ASC' : 'DESC'}`), `q.rid ${backwards ? 'DESC' : 'ASC'}`].join(', ');
    const sql = `SELECT q.* FROM (${inner}) q ${keyset} ORDER BY ${order} LIMIT ${b.bind(count + 1)}${offset ? ` OFFSET ${b.bind(offset)}` : ''}`;
    const raw = await b.run<Record<string, unknown>>(this.deps.store, sql);
    const hasMore = raw.length > count;
    const rows: PageRow[] = raw.slice(0, count).map((row) => ({
      rid: Number(row.rid),
      project: String(row.project),
      type: String(row.type),
      id: String(row.id),
      version: Number(row.version),
      keys: query.sort.map((key, i) => (isTextSort(key) ? row[`k${i}`] : Number(row[`k${i}`]))),
    }));
    if (backwards) rows.reverse();
    return { rows, hasMore };
  }

  /** The stored versions of a page's rows, in the page's order. */
  private async contents(project: string, rows: PageRow[]): Promise<(StoredVersion | undefined)[]> {
    if (rows.length === 0) return [];
    const b = new SqlBuilder(project);
    const keys = rows.map((row) => `(${b.bind(row.project)}, ${b.bind(row.type)}, ${b.bind(row.id)}, CAST(${b.bind(row.version)} AS INTEGER))`).join(', ');
    const found = await b.run<VersionRow>(this.deps.store, `SELECT project, type, id, version, last_updated, content FROM resource_versions WHERE (project, type, id, version) IN (VALUES ${keys})`);
    const byKey = new Map(found.map((row) => [`${row.project}/${row.type}/${row.id}`, versionFromRow(row)]));
    return rows.map((row) => byKey.get(`${row.project}/${row.type}/${row.id}`) as StoredVersion);
  }
}

/** The criteria that keep a search within each type's grant (all types searched have the same limit kind). */
function grantCriteria(grants: Map<string, Grant>, model: ElementModel): Criterion[] {
  const criteria: Criterion[] = [];
  const compartment = model.compartment('Patient') ?? {};
  const patientLimited = [...grants].filter(([, g]) => g.patient !== undefined);
  for (const [type, grant] of patientLimited) {
    const patient = grant.patient as string;
    if (type === 'Patient') criteria.push({ kind: 'id', ids: [patient], not: false });
    else criteria.push({ kind: 'compartment', byType: [[type, compartment[type] ?? []]], targetType: 'Patient', targetId: patient });
  }
  for (const grant of grants.values()) if (grant.ids !== undefined) criteria.push({ kind: 'id', ids: grant.ids, not: false });
  return criteria;
}

/** The parameters of the self link: the criteria understood, then the result parameters asked for. */
function selfParams(query: SearchQuery, raw: Record<string, string[]>): [string, string][] {
  const params: [string, string][] = [...query.understood];
  for (const name of ['_type', '_sort', '_include', '_include:iterate', '_revinclude', '_revinclude:iterate', '_total', '_summary', '_elements']) {
    for (const value of raw[name] ?? []) params.push([name, value]);
  }
  params.push(['_count', String(query.count)]);
  return params;
}

function pagingParams(raw: Record<string, string[]>): [string, string][] {
  const out: [string, string][] = [];
  for (const name of ['_cursor', '_offset']) for (const value of raw[name] ?? []) out.push([name, value]);
  return out;
}

function linkUrl(base: string, target: SearchTarget, params: [string, string][]): string {
  const path = target.level === 'type' ? `/${target.type}` : target.level === 'compartment' ? `/${target.compartment}/${target.id}/${target.type}` : '';
  const query = new URLSearchParams(params).toString();
  return `${base}${path}${query ? `?${query}` : ''}`;
}

/** A built-in resource as a version (what the server holds is its version 1, as published). */
export function builtInVersion(resource: Resource, project: string): StoredVersion {
  const meta = resource.meta;
  return {
    project,
    type: resource.resourceType,
    id: resource.id as string,
    versionId: Number(meta?.versionId ?? 1) || 1,
    lastUpdated: meta?.lastUpdated ?? '2019-11-01T00:00:00.000Z',
    resource,
  };
}

