import type { Bundle } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { StoreReader, StoredVersion } from '../storage/store';
import { isLimited, type AccessGuard, type Grant } from '../auth/guard';
import { BuiltInMatcher, type BuiltInContent, type BuiltInEntry } from './built-ins';
import { assemblePage, countMatches, whereClause, type SearchPlan } from './execute';
import type { IndexExtractor } from './extract';
import { guardCriteria } from './guarded-criteria';
import type { ElementModel } from '../fhir/model/model';
import type { Criterion } from './query/criteria';
import { parseSearch } from './query/parse';
import { splitValues, unescapeValue } from './query/split';
import { SqlBuilder, type ResolvedCodes } from './query/sql';
import type { SearchParameterRegistry } from './registry';
import { pageEntries, pagePosition, SearchLinks, type SearchTarget } from './searchset';
import type { CodeMatcher } from './terminology';

export { builtInVersion } from './built-ins';

/**
 * FHIR search over the index: a query string becomes criteria (with the principal's limits), the
 * criteria SQL (src/search/execute.ts runs it), and the rows a page of a searchset Bundle with its
 * links (src/search/searchset.ts). Pages follow a keyset cursor (the last row's sort
 * values and row id), so paging stays exact while others write: nothing is skipped or repeated
 * among the resources that were there when the search started.
 */

interface SearchServiceDeps {
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

export interface SearchHandler {
  /** Answers a search (type, system or compartment level) with a searchset Bundle. */
  search(target: SearchTarget, query: Record<string, string[]>, ctx: RequestContext): Promise<Bundle>;
}

export class SearchService implements SearchHandler {
  private readonly builtIns: BuiltInMatcher;

  constructor(private readonly deps: SearchServiceDeps) {
    this.builtIns = new BuiltInMatcher(deps.builtIn, deps.extractor);
  }

  async search(target: SearchTarget, query: Record<string, string[]>, ctx: RequestContext): Promise<Bundle> {
    const { plan, builtIns } = await this.prepare(target, query, ctx);
    const parsed = plan.query;
    const position = pagePosition(query, parsed.sort.length);
    const bundle: Bundle = { resourceType: 'Bundle', type: 'searchset' };
    const counted = async () => builtIns.length + (await countMatches(plan));
    if (parsed.summary === 'count' || parsed.total === 'accurate' || parsed.total === 'estimate')
      bundle.total = await counted();
    const links = new SearchLinks(ctx.baseUrl, target, parsed, query);
    if (parsed.summary === 'count' || parsed.count === 0) {
      bundle.total ??= await counted();
      bundle.link = [links.self(position)];
      return bundle;
    }
    const page = await assemblePage(plan, builtIns, position);
    bundle.link = links.ofPage(page, position);
    if (bundle.total === undefined && !page.hasNext && position.cursor === undefined && !position.offset)
      bundle.total = page.items.length;
    const { store, registry, model } = this.deps;
    const versions = page.items.map((item) => item.version);
    const source = {
      base: ctx.baseUrl,
      project: plan.project,
      query: parsed,
      store,
      registry,
      model,
      visible: (v: StoredVersion) => this.visible(v, ctx),
    };
    const entries = await pageEntries(versions, source);
    if (entries.length > 0) bundle.entry = entries;
    return bundle;
  }

  /**
   * The search as a plan to run: its criteria with the principal's limits and the compartment's
   * added, terminology resolved to codes; and the built-in resources that match (type level only).
   */
  private async prepare(
    target: SearchTarget,
    query: Record<string, string[]>,
    ctx: RequestContext,
  ): Promise<{ plan: SearchPlan; builtIns: StoredVersion[] }> {
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
    const candidates = target.level === 'type' ? this.builtIns.entries(target.type) : [];
    const project = ctx.project;
    const resolved = await this.resolveTerminology(project, parsed.criteria, types, candidates);
    const plan: SearchPlan = { store: this.deps.store, project, query: parsed, types, resolved };
    const builtIns = target.level === 'type' ? await this.builtIns.matches(plan, target.type, candidates) : [];
    return { plan, builtIns };
  }

  /**
   * The resources a conditional interaction's criteria match (at most `limit`), read through
   * `reader` (inside a transaction, its own view). Parsed strictly: a conditional write that
   * ignored a criterion it did not understand could change the wrong resource.
   */
  async matchKeys(
    type: string,
    query: Record<string, string[]>,
    ctx: RequestContext,
    reader: StoreReader = this.deps.store,
    limit = 2,
  ): Promise<{ id: string; rid: number }[]> {
    const parsed = parseSearch([type], query, this.deps.registry, {
      strict: true,
      localBases: [ctx.baseUrl],
      indexing: this.deps.indexing,
    });
    if (parsed.criteria.length === 0) throw fhirError('ERR_CONDITIONAL_EMPTY', { type });
    // Whether a conditional write found a match tells as much as a search's count would.
    parsed.criteria = this.reachable(parsed.criteria, ctx);
    const resolved = await this.resolveTerminology(ctx.project, parsed.criteria, [type], []);
    // Conditional writes change the project's own resources only.
    const b = new SqlBuilder(ctx.project, resolved, true);
    const rows = await b.run<{ id: string; rid: number | string }>(
      reader,
      `SELECT r.id, r.rid FROM resources r WHERE ${whereClause(b, parsed, [type])} ORDER BY r.rid LIMIT ${b.bind(limit)}`,
    );
    return rows.map((row) => ({ id: row.id, rid: Number(row.rid) }));
  }

  /**
   * The resources of `targetTypes` that the current resources of a compartment reference, in
   * (type, id) order after `after`, at most `limit`: what `$everything` adds so the compartment
   * can be read. Only references the index holds count; whether each may be read is the caller's
   * to check (it reads them through the REST service).
   */
  async referencedFrom(
    options: {
      compartment: string;
      id: string;
      targetTypes: string[];
      after?: { type: string; id: string };
      limit: number;
    },
    ctx: RequestContext,
  ): Promise<{ type: string; id: string }[]> {
    const definition = this.deps.model.compartment(options.compartment);
    if (!definition) throw fhirError('ERR_SEARCH_COMPARTMENT', { compartment: options.compartment });
    if (options.targetTypes.length === 0) return [];
    const b = new SqlBuilder(ctx.project, new Map(), true);
    const members = Object.entries(definition)
      .filter(([, params]) => params.length > 0)
      .map(
        ([type, params]) => `(x.type = ${b.bind(type)} AND x.param IN (${params.map((p) => b.bind(p)).join(', ')}))`,
      );
    const after = options.after
      ? `AND (t.target_type > ${b.bind(options.after.type)} OR (t.target_type = ${b.bind(options.after.type)} AND t.target_id > ${b.bind(options.after.id)}))`
      : '';
    const sql = `SELECT DISTINCT t.target_type AS type, t.target_id AS id FROM search_reference t JOIN resources r ON r.rid = t.rid AND r.deleted = FALSE
      WHERE t.project = ${b.bind(ctx.project)} AND ${b.typeFilter('t.target_type', options.targetTypes)} AND t.target_id IS NOT NULL ${after}
        AND t.rid IN (SELECT x.rid FROM search_reference x WHERE x.project = ${b.bind(ctx.project)} AND (${members.join(' OR ')})
          AND x.target_type = ${b.bind(options.compartment)} AND x.target_id = ${b.bind(options.id)})
      ORDER BY t.target_type, t.target_id LIMIT ${b.bind(options.limit)}`;
    return (await b.run<{ type: string; id: string }>(this.deps.store, sql)).map((row) => ({
      type: String(row.type),
      id: String(row.id),
    }));
  }

  /** Whether `type` has a search parameter with this code. */
  hasParam(type: string, code: string): boolean {
    return this.deps.registry.forType(type).has(code);
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
      if (patients.size === 1 && (patient === undefined || (target.compartment === 'Patient' && target.id === patient)))
        return new Map();
      if (!patients.has(undefined)) return new Map([['*', { ids: [NO_ID] }]]);
    }
    const limited = [...grants.values()].some(isLimited);
    if (limited && types.length > 1 && target.level !== 'compartment') {
      throw fhirError('ERR_AUTH_FORBIDDEN', {
        reason: "the token's limits (a patient's compartment) apply one type at a time; search each type",
      });
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
    const listed = (query._type ?? [])
      .flatMap(splitValues)
      .map(unescapeValue)
      .filter((t) => t !== '');
    for (const type of listed)
      if (!this.deps.isResourceType(type))
        throw fhirError('ERR_SEARCH_PARAM', { name: '_type', value: type.slice(0, 100) });
    return [...new Set(listed)];
  }

  private compartmentCriterion(target: Extract<SearchTarget, { level: 'compartment' }>, types: string[]): Criterion {
    const definition = this.deps.model.compartment(target.compartment) ?? {};
    const byType = types.filter((t) => definition[t]).map((t): [string, string[]] => [t, definition[t]]);
    return { kind: 'compartment', byType, targetType: target.compartment, targetId: target.id };
  }

  /** Token modifiers that need the terminology engine, resolved to the codes present in the index. */
  private async resolveTerminology(
    project: string,
    criteria: Criterion[],
    types: string[],
    builtIns: BuiltInEntry[],
  ): Promise<Map<Criterion, ResolvedCodes>> {
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
      const present = await b.run<{ system: string | null; code: string }>(
        this.deps.store,
        `SELECT DISTINCT x.system, x.code FROM search_token x WHERE ${b.scoped('x', within)} AND x.param = ${b.bind(c.index)} AND x.code IS NOT NULL`,
      );
      if (within === types) {
        for (const { rows } of builtIns)
          for (const t of rows.token)
            if (t.param === c.index && t.code !== null) present.push({ system: t.system, code: t.code });
      }
      const tests: ((system: string | null, code: string) => boolean)[] = [];
      for (const value of c.values) {
        if (value.valueSet !== undefined) {
          const test = await this.deps.codes.valueSet(value.valueSet, project);
          if (!test)
            throw fhirError('ERR_SEARCH_VALUESET', {
              name: `${c.index}:${c.modifier}`,
              url: value.valueSet.slice(0, 200),
            });
          tests.push(test);
        } else {
          const system = value.system as string;
          const test = await this.deps.codes.hierarchy(
            system,
            value.code as string,
            c.modifier === 'above' ? 'above' : 'below',
            project,
          );
          // A system the engine cannot walk: only the code itself is known to be below (or above) itself.
          tests.push(test ? (s, code) => s === system && test(code) : (s, code) => s === system && code === value.code);
        }
      }
      resolved.set(c, { pairs: present.filter((p) => tests.some((t) => t(p.system, p.code))) });
    };
    for (const c of criteria) await visit(c, types);
    return resolved;
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
    else
      criteria.push({
        kind: 'compartment',
        byType: [[type, compartment[type] ?? []]],
        targetType: 'Patient',
        targetId: patient,
      });
  }
  for (const grant of grants.values())
    if (grant.ids !== undefined) criteria.push({ kind: 'id', ids: grant.ids, not: false });
  return criteria;
}
