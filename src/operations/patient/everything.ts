import type { Bundle, BundleEntry, Patient } from 'fhir/r4';
import { Budget } from '../../context/budget';
import type { RequestContext } from '../../context/request-context';
import { fhirError, FhirError } from '../../fhir/errors';
import { SUPPORTING_TYPES } from '../../fhir/patient-record';
import { r4Model } from '../../fhir/model/model';
import type { AppServices } from '../../services';
import { defineOperation, targetOf, type OperationContext } from '../operation';

/**
 * `Patient/[id]/$everything` and `Patient/$everything` (R4, official definition plus `_cursor`
 * for paging). A patient's record is read as a stream of phases: the Patient, then each type of
 * its compartment (a compartment search through the search service, so the project and the
 * principal's grants apply), then the resources of other types those reference. A page takes
 * `_count` entries from the stream and its next link carries where the stream stopped: no cap,
 * each resource once. At type level the stream runs patient after patient.
 */
export interface EverythingInput {
  start?: string;
  end?: string;
  _since?: string;
  _type?: string[];
  _count?: number;
  _cursor?: string;
}

/** Where a page stopped: the patient (type level: its Patient search cursor), the phase, the phase's own cursor. */
interface Position {
  patient?: string;
  patients?: string;
  phase: number;
  inner?: string;
}

const DEFAULT_COUNT = 1000;
const COMPARTMENT = r4Model().compartment('Patient') ?? {};
const COMPARTMENT_TYPES = Object.keys(COMPARTMENT)
  .filter((t) => t !== 'Patient')
  .sort();

export const patientEverything = defineOperation<AppServices, EverythingInput, { return: Bundle }>({
  definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything',
  handle: async (input, ctx) => {
    const count = Math.max(1, Math.min(input._count ?? DEFAULT_COUNT, DEFAULT_COUNT));
    const only = input._type
      ?.flatMap((t) => t.split(','))
      .map((t) => t.trim())
      .filter((t) => t !== '');
    const wanted = (type: string) => only === undefined || only.includes(type);
    const phases = ['Patient', ...COMPARTMENT_TYPES].filter(wanted);
    const referenced = SUPPORTING_TYPES.filter(wanted);
    const patient = targetOf<Patient>(ctx, 'Patient');
    let position: Position =
      input._cursor !== undefined ? decodePosition(input._cursor) : { phase: 0, patient: patient?.id };
    const entries: BundleEntry[] = [];
    const stream = new Stream(ctx, input, phases, referenced);
    let done = false;
    while (entries.length < count) {
      if (position.patient === undefined) {
        const next = await stream.nextPatient(position.patients);
        if (!next) {
          done = true;
          break;
        }
        position = { patient: next.id, patients: next.cursor, phase: 0 };
      }
      const step = await stream.take(position, count - entries.length);
      entries.push(...step.entries);
      if (step.next) {
        position = step.next;
        continue;
      }
      // This patient's stream has ended; at type level the next patient's begins (if its Patient search goes on).
      if (patient || position.patients === undefined) {
        done = true;
        break;
      }
      position = { patients: position.patients, phase: 0 };
    }
    const base = `${ctx.request.baseUrl}/Patient${patient ? `/${patient.id}` : ''}/$everything`;
    const params = new URLSearchParams();
    for (const name of ['start', 'end', '_since'] as const)
      if (input[name] !== undefined) params.append(name, String(input[name]));
    if (only) params.append('_type', only.join(','));
    params.append('_count', String(count));
    const links: Bundle['link'] = [
      {
        relation: 'self',
        url: `${base}?${params}${input._cursor ? `&_cursor=${encodeURIComponent(input._cursor)}` : ''}`,
      },
    ];
    if (!done) links.push({ relation: 'next', url: `${base}?${params}&_cursor=${encodePosition(position)}` });
    const bundle: Bundle = { resourceType: 'Bundle', type: 'searchset', link: links };
    if (entries.length > 0) bundle.entry = entries;
    return { return: bundle };
  },
});

class Stream {
  /**
   * A page at type level can walk thousands of patients, a search per phase of each: on SQLite
   * each search is synchronous, so without a pause the walk held the event loop (18 s for 3,000
   * patients); the event loop is given back every few milliseconds, within the request's time.
   */
  private readonly budget: Budget;

  constructor(
    private readonly ctx: OperationContext<AppServices>,
    private readonly input: EverythingInput,
    private readonly phases: string[],
    private readonly referenced: string[],
  ) {
    this.budget = Budget.of(ctx.request, 'Patient/$everything');
  }

  private get request(): RequestContext {
    return this.ctx.request;
  }

  /** Type level: the patient after the one a Patient search cursor stopped at (one per page of one). */
  async nextPatient(cursor: string | undefined): Promise<{ id: string; cursor?: string } | undefined> {
    const query: Record<string, string[]> = { _count: ['1'], _elements: ['id'] };
    if (cursor) query._cursor = [cursor];
    const bundle = await this.ctx.services.search.search({ level: 'type', type: 'Patient' }, query, this.request);
    const id = bundle.entry?.[0]?.resource?.id;
    return id === undefined ? undefined : { id, cursor: cursorOf(bundle) ?? undefined };
  }

  /** Up to `room` entries from `position` on; `next` when the patient's stream goes on beyond them. */
  async take(position: Position, room: number): Promise<{ entries: BundleEntry[]; next?: Position }> {
    const entries: BundleEntry[] = [];
    const id = position.patient as string;
    let { phase, inner } = position;
    while (entries.length < room) {
      await this.budget.step();
      if (phase < this.phases.length) {
        const type = this.phases[phase];
        const found = await this.compartmentPage(type, id, room - entries.length, inner);
        entries.push(...found.entries);
        if (found.next) return { entries, next: { ...position, phase, inner: found.next } };
      } else if (phase === this.phases.length) {
        const found = await this.referencedPage(id, room - entries.length, inner);
        entries.push(...found.entries);
        if (found.next) return { entries, next: { ...position, phase, inner: found.next } };
      } else {
        return { entries };
      }
      phase++;
      inner = undefined;
    }
    return { entries, next: phase > this.phases.length ? undefined : { ...position, phase, inner } };
  }

  private async compartmentPage(
    type: string,
    id: string,
    room: number,
    cursor?: string,
  ): Promise<{ entries: BundleEntry[]; next?: string }> {
    const query: Record<string, string[]> = { _count: [String(room)] };
    if (type === 'Patient' && cursor === undefined) {
      // The patient itself leads; patients linked to it follow through the compartment.
      const self = await this.guarded(() =>
        this.ctx.services.search.search({ level: 'type', type: 'Patient' }, { _id: [id] }, this.request),
      );
      const own = (self?.entry ?? []).map((e) => ({ ...e, search: { mode: 'match' as const } }));
      if (room - own.length <= 0) return { entries: own, next: own.length > 0 ? 'linked' : undefined };
      const rest = await this.compartmentPage(type, id, room - own.length, 'linked');
      return { entries: [...own, ...rest.entries], next: rest.next };
    }
    if (cursor !== undefined && cursor !== 'linked') query._cursor = [cursor];
    if (this.input._since !== undefined) query._lastUpdated = [`ge${this.input._since}`];
    if (this.ctx.services.search.hasParam(type, 'date')) {
      const dates: string[] = [];
      if (this.input.start !== undefined) dates.push(`ge${this.input.start}`);
      if (this.input.end !== undefined) dates.push(`le${this.input.end}`);
      if (dates.length > 0) query.date = dates;
    }
    const bundle = await this.guarded(() =>
      this.ctx.services.search.search({ level: 'compartment', compartment: 'Patient', id, type }, query, this.request),
    );
    if (!bundle) return { entries: [] };
    const entries = (bundle.entry ?? []).filter(
      (e) => e.search?.mode === 'match' && !(type === 'Patient' && e.resource?.id === id),
    );
    return { entries, next: cursorOf(bundle) };
  }

  private async referencedPage(
    id: string,
    room: number,
    cursor?: string,
  ): Promise<{ entries: BundleEntry[]; next?: string }> {
    const after =
      cursor === undefined
        ? undefined
        : { type: cursor.slice(0, cursor.indexOf('/')), id: cursor.slice(cursor.indexOf('/') + 1) };
    const targets = await this.ctx.services.search.referencedFrom(
      { compartment: 'Patient', id, targetTypes: this.referenced, after, limit: room + 1 },
      this.request,
    );
    const page = targets.slice(0, room);
    const entries: BundleEntry[] = [];
    const since = this.input._since === undefined ? undefined : Date.parse(this.input._since);
    for (const target of page) {
      const resource = await this.guarded(() =>
        this.ctx.services.rest.readResource(target.type, target.id, this.request),
      );
      if (!resource) continue;
      if (since !== undefined && Date.parse(resource.meta?.lastUpdated ?? '') < since) continue;
      entries.push({
        fullUrl: `${this.request.baseUrl}/${target.type}/${target.id}`,
        resource,
        search: { mode: 'include' },
      });
    }
    const last = page[page.length - 1];
    return { entries, next: targets.length > room && last ? `${last.type}/${last.id}` : undefined };
  }

  /** What the principal may not read, or what is gone, is left out rather than failing the record. */
  private async guarded<T>(work: () => Promise<T>): Promise<T | undefined> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof FhirError && (err.status === 403 || err.status === 404 || err.status === 410))
        return undefined;
      throw err;
    }
  }
}

function cursorOf(bundle: Bundle): string | undefined {
  const next = bundle.link?.find((l) => l.relation === 'next')?.url;
  return next === undefined ? undefined : (new URL(next).searchParams.get('_cursor') ?? undefined);
}

function encodePosition(position: Position): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

function decodePosition(text: string): Position {
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Position;
    if (typeof value === 'object' && value !== null && Number.isInteger(value.phase) && value.phase >= 0) return value;
  } catch {
    // falls through to the error below
  }
  throw fhirError('ERR_PARAM_VALUE', { name: '_cursor', type: 'string', value: text.slice(0, 40) });
}
