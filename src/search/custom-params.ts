import { RefreshGate } from '../storage/refresh-gate';
import type { SearchParameter } from 'fhir/r4';
import type { ContextLog } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import { DEFAULT_PROJECT, SYSTEM_PROJECT, type ResourceStore } from '../storage/store';
import type { SearchIndexer } from './indexer';
import type { SearchParameterRegistry } from './registry';

/**
 * SearchParameter resources users store become searchable once their base types are indexed:
 * until then asking for them is 400 "being indexed" (never a silently incomplete answer). The
 * indexing state lives in the database, so every process over it agrees, and a process that
 * starts finds unfinished indexing and finishes it. Every process learns of new or changed
 * parameters from the store's change marks before it searches or writes.
 *
 * A parameter shapes the index of the whole server, so it is defined where only operators write:
 * the default project, where they act (as partitioned HAPI servers keep theirs in the default
 * partition), and the system scope (imported packages). Other projects cannot write any.
 */

/** The scopes whose SearchParameters apply to the whole server. */
const DEFINING = [DEFAULT_PROJECT, SYSTEM_PROJECT];

const TYPES = ['SearchParameter'];
const STATE_PREFIX = 'search.param:';

interface ParamState {
  status: 'indexing' | 'ready';
  types: string[];
}

export class CustomSearchParameters {
  /** Per defining scope, the change mark last read. */
  private readonly marks = new Map<string, number>(DEFINING.map((p) => [p, 0]));
  private fresh = false;
  private readonly gate = new RefreshGate(() => this.doRefresh());
  /** url -> state, as last read. */
  private readonly states = new Map<string, ParamState>();
  /** type -> codes being indexed. */
  private indexingCodes = new Map<string, Set<string>>();
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly store: ResourceStore,
    private readonly registry: SearchParameterRegistry,
    private readonly indexer: SearchIndexer,
    private readonly log?: ContextLog,
  ) {}

  /** Refuses a SearchParameter the server could not evaluate (400), before it is stored. */
  check(resource: SearchParameter, project: string): void {
    const bad = (reason: string) =>
      fhirError('ERR_RESOURCE_INVALID', { type: 'SearchParameter', path: 'SearchParameter', reason });
    if (!DEFINING.includes(project))
      throw bad(
        `search parameters apply to the whole server and are defined in the '${DEFAULT_PROJECT}' project, by its operators`,
      );
    if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(resource.code ?? ''))
      throw bad(`'${String(resource.code).slice(0, 50)}' is not a usable code`);
    if (!resource.base?.length) throw bad('it names no base type');
    if (resource.type !== 'special' && resource.type !== 'composite' && !resource.expression)
      throw bad('it has no expression');
    if (resource.type === 'special') throw bad("parameters of type 'special' cannot be defined on this server");
    for (const type of resource.base)
      if (type !== 'Resource' && type !== 'DomainResource' && !this.registry.model.isComplexType(type))
        throw bad(`'${type}' is not a resource type`);
    if (resource.expression) {
      try {
        this.registry.compileCheck(resource.expression, resource.base[0]);
      } catch (err) {
        throw bad(`its expression does not compile (${(err as Error).message.slice(0, 200)})`);
      }
    }
    for (const c of resource.component ?? []) {
      if (!this.registry.paramByUrl(c.definition))
        throw bad(`component ${c.definition} is not a known search parameter`);
    }
  }

  /** Whether `code` of `type` is a parameter still being indexed. */
  indexing(type: string, code: string): boolean {
    return this.indexingCodes.get(type)?.has(code) ?? false;
  }

  /** Brings the registry up to date with what is stored (a refresh that read the change marks after the caller asked: see RefreshGate). */
  refresh(): Promise<void> {
    if (this.fresh) return Promise.resolve();
    return this.gate.refresh();
  }

  /** A SearchParameter this process has just written: takes effect here at once (indexing starts in the background). */
  async written(): Promise<void> {
    this.fresh = false;
    await this.refresh();
  }

  private async doRefresh(): Promise<void> {
    let changed = false;
    for (const project of DEFINING) {
      const known = this.marks.get(project) ?? 0;
      const now = (await this.store.changeMarks(project, TYPES)).get('SearchParameter') ?? 0;
      if (now <= known) continue;
      changed = true;
      for (const change of await this.store.changesSince(project, 'SearchParameter', known)) {
        const resource = change.resource as SearchParameter | null;
        // Ids are unique within a scope only.
        const key = `${project}/${change.id}`;
        this.registry.undefine(key);
        if (resource?.url) {
          const types = this.registry.define(resource, key);
          await this.startIndexing(resource.url, types);
        }
      }
      this.marks.set(project, now);
    }
    // States are read again when parameters changed, or while some are being indexed (by any process).
    if (changed || this.indexingCodes.size > 0) await this.readStates();
    this.started = true;
    this.fresh = true;
    setImmediate(() => {
      this.fresh = false;
    });
  }

  /**
   * Indexes a parameter that changed, unless it is indexed already for these types, or another
   * process is indexing it (it changed there: the writer's process indexes). At start-up,
   * unfinished indexing is taken over (its process may have stopped).
   */
  private async startIndexing(url: string, types: string[]): Promise<void> {
    const raw = await this.store.getSetting(`${STATE_PREFIX}${url}`);
    const state = raw ? (JSON.parse(raw) as ParamState) : undefined;
    const sameTypes = state !== undefined && JSON.stringify(state.types) === JSON.stringify(types);
    if (sameTypes && state.status === 'ready') return;
    if (sameTypes && state.status === 'indexing' && this.started) return;
    await this.store.setSetting(
      `${STATE_PREFIX}${url}`,
      JSON.stringify({ status: 'indexing', types } satisfies ParamState),
    );
    this.resume(url, types);
  }

  /** Set after the first refresh (start-up). */
  private started = false;

  /** Indexes in the background; the state says "ready" once every resource of the base types has its rows. */
  private resume(url: string, types: string[]): void {
    if (this.running.has(url)) return;
    const work = (async () => {
      const concrete = types.includes('Resource') || types.includes('DomainResource') ? undefined : types;
      await this.indexer.reindex({ types: concrete });
      await this.store.setSetting(
        `${STATE_PREFIX}${url}`,
        JSON.stringify({ status: 'ready', types } satisfies ParamState),
      );
      this.log?.info({ url, types }, 'search parameter indexed');
    })()
      .catch((err: unknown) =>
        this.log?.error({ err, url }, 'indexing a search parameter failed; it is retried at the next start'),
      )
      .finally(() => {
        this.running.delete(url);
        this.fresh = false;
      });
    this.running.set(url, work);
  }

  private async readStates(): Promise<void> {
    const codes = new Map<string, Set<string>>();
    for (const param of this.registry.storedParams()) {
      const raw = await this.store.getSetting(`${STATE_PREFIX}${param.url}`);
      const state = raw ? (JSON.parse(raw) as ParamState) : undefined;
      if (state) this.states.set(param.url, state);
      if (state?.status === 'ready') continue;
      for (const type of param.base) {
        const set = codes.get(type) ?? new Set<string>();
        set.add(param.code);
        codes.set(type, set);
      }
      // At start-up: indexing a process left unfinished (it may have stopped) is finished here.
      if (!this.started && !this.running.has(param.url)) this.resume(param.url, param.base);
    }
    this.indexingCodes = codes;
  }

  /** Waits until what this process has written is known here and its indexing is done (tests, tools). */
  async settled(): Promise<void> {
    this.fresh = false;
    await this.refresh();
    while (this.running.size > 0) await Promise.all(this.running.values());
  }
}
