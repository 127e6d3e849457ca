import type { CapabilityStatement, Group, Resource } from 'fhir/r4';
import type { AccessGuard, Grant } from '../auth/guard';
import type { Principal } from '../auth/principal';
import type { RequestContext } from '../context/request-context';
import { ADMIN_RESOURCE_TYPES } from '../fhir/admin-types';
import { fhirError } from '../fhir/errors';
import { SUPPORTING_TYPES } from '../fhir/patient-record';
import type { Job, JobControl, JobHandler, JobQueue } from '../jobs/queue';
import type { BulkStore } from '../storage/bulk';
import { readExportParameters, type ExportLevel } from './parameters';
import { ExportScope } from './scope';
import { FileWriter, elementsOf, deletion, refusal, PART, type ExportFile } from './export-files';

/**
 * Bulk Data 2.0.0 `$export` without HTTP: a kick-off becomes a job (with the project and
 * principal that asked, and the instant it asked: `transactionTime`); the job writes one NDJSON
 * file per type from a snapshot of the versions as of that instant, so writes made while it runs
 * never leak in; status, manifest, files and cancellation are answered only to whoever kicked it
 * off (same project, same client or user). Routes in src/http/routes/bulk.ts translate.
 */

export const EXPORT_JOB = 'bulk-export';

/** Seconds a client is asked to wait between status polls; polling sooner is 429. */
export const RETRY_AFTER_SECONDS = 1;
/** Seconds a client refused a kick-off (too many exports of its project active) is asked to wait. */
const BUSY_RETRY_AFTER_SECONDS = 30;
/** Most polls remembered (one per running export polled); beyond it the oldest are forgotten. */
const MAX_POLLS = 10_000;

export interface ExportJobInput {
  level: ExportLevel;
  /** The patients whose compartments are exported (Patient and Group level); absent: every patient. */
  patients?: string[];
  types: string[];
  /** `_typeFilter` queries per type (a resource of the type must match one). */
  typeFilters?: Record<string, string[]>;
  since?: string;
  /** `_elements`, as asked (bare names apply to every type). */
  elements?: string[];
  transactionTime: string;
  request: string;
  /** Parameters refused under `Prefer: handling=lenient`, for the manifest's error file. */
  refused: string[];
}

interface ExportJobResult {
  output: ExportFile[];
  deleted?: ExportFile;
  error?: ExportFile;
}

export interface ExportManifest {
  transactionTime: string;
  request: string;
  requiresAccessToken: true;
  output: { type: string; url: string; count: number }[];
  deleted: { type: string; url: string; count: number }[];
  error: { type: string; url: string; count: number }[];
}

/** Done: the manifest, and when its files are deleted (epoch ms). */
type ExportStatus =
  { state: 'running'; progress: string } | { state: 'done'; manifest: ExportManifest; expires: number };

export interface BulkExportDeps {
  jobs: JobQueue;
  store: BulkStore;
  guard: AccessGuard;
  isResourceType(type: string): boolean;
  /** The reference search parameters of each type that put a resource in a patient's compartment (the CompartmentDefinition's). */
  compartmentParams: Readonly<Record<string, readonly string[]>>;
  /** What a resource refers to, by reference search parameter (the index's extraction, run once per resource). */
  referencesOf(resource: Resource): { param: string; type: string; id: string }[];
  readGroup(id: string, ctx: RequestContext): Promise<Group>;
  /** A `_typeFilter` query as a test of one resource; throws a FhirError (400) for one that cannot be applied. */
  typeFilter(type: string, query: string): (resource: Resource) => boolean;
  /** `_elements`: the resource with only the named top-level elements and the mandatory ones, marked SUBSETTED. */
  subset(resource: Resource, elements: string[]): Resource;
  /** Exports one project may have queued or running at once: each holds a worker and writes its whole data again. */
  perProject: number;
  /** How long a finished export's files are kept, in ms (then the job and its files are deleted). */
  keepMs: number;
}

export class BulkExports {
  /** When each running export's status was last asked for in this process. */
  private readonly polls = new Map<string, number>();

  /** Kick-offs of each project in this process, one at a time: the count of active exports is then exact here. */
  private readonly kickOffs = new Map<string, Promise<unknown>>();

  /** The types of the Patient compartment (Patient included). */
  private readonly compartmentTypes: readonly string[];

  constructor(private readonly deps: BulkExportDeps) {
    this.compartmentTypes = [...new Set(['Patient', ...Object.keys(deps.compartmentParams)])];
  }

  /** Starts an export; answers the job id (the status URL's last segment). */
  async kickOff(
    call: {
      level: ExportLevel;
      groupId?: string;
      query: Record<string, string | string[]>;
      body?: unknown;
      url: string;
    },
    ctx: RequestContext,
  ): Promise<string> {
    if (!ctx.prefer.respondAsync) throw fhirError('ERR_BULK_ASYNC', {});
    const params = readExportParameters(call.query, call.body, {
      level: call.level,
      lenient: ctx.prefer.handling === 'lenient',
      isResourceType: this.deps.isResourceType,
    });
    const exportable = (type: string) =>
      !ADMIN_RESOURCE_TYPES.includes(type) &&
      (call.level === 'system' || this.compartmentTypes.includes(type) || SUPPORTING_TYPES.includes(type));
    let types: string[];
    if (params.types) {
      for (const type of params.types) this.deps.guard.allow(ctx.principal, 'read', type);
      types = params.types.filter(exportable);
    } else {
      const present =
        call.level === 'system'
          ? await this.deps.store.types(ctx.project)
          : [...this.compartmentTypes, ...SUPPORTING_TYPES];
      types = present.filter((type) => exportable(type) && this.allowed(ctx.principal, type));
    }
    // A filter of a type not exported is left aside; the others are checked now, so a bad one is 400 at kick-off.
    const typeFilters: Record<string, string[]> = {};
    for (const [type, queries] of Object.entries(params.typeFilters ?? {})) {
      if (!types.includes(type)) continue;
      for (const query of queries) this.deps.typeFilter(type, query);
      typeFilters[type] = queries;
    }
    let patients = params.patients;
    if (call.level === 'group') {
      const group = await this.deps.readGroup(call.groupId as string, ctx);
      const members = (group.member ?? [])
        .map((m) => m.entity.reference ?? '')
        .filter((r) => r.startsWith('Patient/'))
        .map((r) => r.slice('Patient/'.length));
      patients = patients ? patients.filter((p) => members.includes(p)) : members;
    }
    const input: ExportJobInput = {
      level: call.level,
      patients,
      types: [...new Set(types)].sort(),
      typeFilters,
      since: params.since,
      elements: params.elements,
      transactionTime: new Date().toISOString(),
      request: call.url,
      refused: params.refused,
    };
    return this.oneAtATime(ctx.project, async () => {
      // Across processes two kick-offs may still both see room: at most one over per process.
      if ((await this.deps.jobs.countActive(ctx.project, EXPORT_JOB)) >= this.deps.perProject) {
        throw fhirError(
          'ERR_BULK_TOO_MANY',
          { limit: this.deps.perProject, seconds: BUSY_RETRY_AFTER_SECONDS },
          { headers: { 'retry-after': String(BUSY_RETRY_AFTER_SECONDS) } },
        );
      }
      return this.deps.jobs.enqueue({ kind: EXPORT_JOB, project: ctx.project, principal: ctx.principal, input });
    });
  }

  private async oneAtATime<T>(project: string, work: () => Promise<T>): Promise<T> {
    const before = this.kickOffs.get(project) ?? Promise.resolve();
    const mine = before.then(work, work);
    const settled = mine.catch(() => undefined);
    this.kickOffs.set(project, settled);
    try {
      return await mine;
    } finally {
      if (this.kickOffs.get(project) === settled) this.kickOffs.delete(project);
    }
  }

  async status(id: string, ctx: RequestContext): Promise<ExportStatus> {
    const job = await this.own(id, ctx);
    if (job.state === 'dead') throw fhirError('ERR_BULK_FAILED', { reason: job.lastError ?? 'unknown' });
    if (job.state !== 'done') {
      const now = Date.now();
      const last = this.polls.get(id);
      if (last !== undefined && now - last < RETRY_AFTER_SECONDS * 1000) {
        throw fhirError(
          'ERR_BULK_TOO_FAST',
          { seconds: RETRY_AFTER_SECONDS },
          { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } },
        );
      }
      this.polls.delete(id);
      this.polls.set(id, now);
      if (this.polls.size > MAX_POLLS) this.polls.delete(this.polls.keys().next().value as string);
      return { state: 'running', progress: job.progress ?? (job.state === 'queued' ? 'queued' : 'started') };
    }
    this.polls.delete(id);
    const result = job.result as ExportJobResult;
    const url = (file: ExportFile) => ({
      type: file.type,
      url: `${ctx.baseUrl}/bulk/files/${id}/${file.file}`,
      count: file.count,
    });
    return {
      state: 'done',
      expires: (job.finishedAt ?? Date.now()) + this.deps.keepMs,
      manifest: {
        transactionTime: job.input.transactionTime,
        request: job.input.request,
        requiresAccessToken: true,
        output: result.output.map(url),
        deleted: result.deleted ? [url(result.deleted)] : [],
        error: result.error ? [url(result.error)] : [],
      },
    };
  }

  /**
   * Cancels (or, done, deletes) an export: its status URL answers 404 from now on, and its files
   * are deleted (a handler running it here is aborted first, so it writes no part after them).
   */
  async cancel(id: string, ctx: RequestContext): Promise<void> {
    await this.own(id, ctx);
    this.polls.delete(id);
    await this.deps.jobs.remove(id);
    await this.deps.store.removeFiles(id);
  }

  /** The NDJSON text of a finished export's file, part by part. */
  async *file(id: string, file: string, ctx: RequestContext): AsyncGenerator<string> {
    const job = await this.own(id, ctx);
    const result = job.result as ExportJobResult | undefined;
    const files = result ? [...result.output, result.deleted, result.error] : [];
    if (job.state !== 'done' || !files.some((f) => f?.file === file)) throw fhirError('ERR_BULK_NOT_FOUND', {});
    let after = 0;
    for (;;) {
      const parts = await this.deps.store.parts(id, file, after, 4);
      for (const part of parts) yield part.content;
      if (parts.length < 4) return;
      after = parts[parts.length - 1].part;
    }
  }

  handler(): JobHandler<ExportJobInput> {
    return { kind: EXPORT_JOB, run: (job, control) => this.run(job, control), keepDoneMs: this.deps.keepMs };
  }

  /**
   * Runs an export from the start (a retry after a crash begins again: files of the last attempt
   * are dropped). At Patient and Group level the compartments come first; the supporting resources
   * they refer to (as `$everything` adds them) follow.
   */
  private async run(job: Job<ExportJobInput>, control: JobControl): Promise<ExportJobResult> {
    const { input } = job;
    await this.deps.store.removeFiles(job.id);
    const scope = new ExportScope(input, this.compartmentTypes, this.deps);
    const writerOf = (file: string, type: string) =>
      new FileWriter({ store: this.deps.store, job: job.id, file, type, signal: control.signal });
    const deleted = writerOf('deleted.ndjson', 'Bundle');
    const output: ExportFile[] = [];
    for (const type of scope.order()) {
      if (scope.nothingReferenced(type)) continue;
      const grant = this.grant(job.principal, type);
      if (!grant) continue;
      const file = await this.exportType(
        { job, control, scope, deleted, writer: writerOf(`${type}.ndjson`, type) },
        type,
        grant,
      );
      if (file) output.push(file);
    }
    const result: ExportJobResult = { output };
    const deletedFile = await deleted.finish();
    if (deletedFile) result.deleted = deletedFile;
    if (input.refused.length > 0) {
      const errors = writerOf('errors.ndjson', 'OperationOutcome');
      for (const text of input.refused) await errors.add(JSON.stringify(refusal(text)));
      result.error = (await errors.finish()) ?? undefined;
    }
    return result;
  }

  /** One type's file: its snapshot page by page, each resource the grant covers, its filters pass and the scope takes. */
  private async exportType(run: TypeExport, type: string, grant: Grant): Promise<ExportFile | undefined> {
    const { job, control, scope, deleted, writer } = run;
    const { input } = job;
    const filters = (input.typeFilters?.[type] ?? []).map((query) => this.deps.typeFilter(type, query));
    const filtered = (resource: Resource) => filters.length === 0 || filters.some((f) => f(resource));
    const elements = input.elements && elementsOf(input.elements, type);
    let after = '';
    for (;;) {
      if (control.signal.aborted) throw control.signal.reason;
      const page = await this.deps.store.snapshot({
        project: job.project,
        type,
        asOf: input.transactionTime,
        since: input.since,
        afterId: after,
        limit: PART,
      });
      for (const row of page.rows) {
        if (row.content === null) {
          // A deleted supporting resource cannot be told to have been referred to: left out.
          if (input.since !== undefined && !scope.isSupporting(type))
            await deleted.add(JSON.stringify(deletion(type, row.id)));
          continue;
        }
        const resource = JSON.parse(row.content) as Resource;
        resource.meta = { ...(resource.meta ?? {}), versionId: String(row.version), lastUpdated: row.lastUpdated };
        if (!this.deps.guard.covers(grant, resource) || !filtered(resource) || !scope.inScope(resource)) continue;
        await writer.add(JSON.stringify(elements ? this.deps.subset(resource, elements) : resource));
      }
      if (page.next === undefined) break;
      after = page.next;
      await control.progress(`${type}: ${writer.count} resources`);
      // SQLite answers synchronously: between pages the process answers its requests.
      await new Promise((resolve) => setImmediate(resolve));
    }
    return writer.finish();
  }

  private allowed(principal: Principal, type: string): boolean {
    return this.grant(principal, type) !== undefined;
  }

  private grant(principal: Principal, type: string): Grant | undefined {
    try {
      return this.deps.guard.allow(principal, 'read', type);
    } catch {
      return undefined;
    }
  }

  /** The job, when it is an export of this project asked for by this same client or user (or an operator); else 404. */
  private async own(id: string, ctx: RequestContext) {
    const job = await this.deps.jobs.get<ExportJobInput, ExportJobResult>(id);
    if (!job || job.kind !== EXPORT_JOB || job.project !== ctx.project) throw fhirError('ERR_BULK_NOT_FOUND', {});
    const asker = job.principal;
    const same = ctx.principal.operator
      ? asker.operator
      : !asker.operator && asker.client === ctx.principal.client && asker.user === ctx.principal.user;
    if (!same) throw fhirError('ERR_BULK_NOT_FOUND', {});
    return job;
  }
}

/** One type's export within a job: the job, its control, its scope, and the files it writes to. */
interface TypeExport {
  job: Job<ExportJobInput>;
  control: JobControl;
  scope: ExportScope;
  /** `deleted.ndjson`, shared by every type. */
  deleted: FileWriter;
  writer: FileWriter;
}

/** The CapabilityStatement's Bulk Data declarations: it instantiates the Bulk Data server, with `export` at three levels. */
export function decorateBulkData(statement: CapabilityStatement): void {
  statement.instantiates = [
    ...(statement.instantiates ?? []),
    'http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data',
  ];
  const rest = statement.rest?.[0];
  if (!rest) return;
  rest.operation = [
    ...(rest.operation ?? []),
    { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' },
  ];
  for (const [type, definition] of [
    ['Patient', 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export'],
    ['Group', 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export'],
  ]) {
    const resource = rest.resource?.find((r) => r.type === type);
    if (resource) resource.operation = [...(resource.operation ?? []), { name: 'export', definition }];
  }
}
