import type { Group, Patient, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError, isFhirError } from '../fhir/errors';
import type { RestService } from '../rest/rest-service';
import type { SearchService } from '../search/search-service';
import { searchPages } from './search-pages';
import type { EvaluationSubject } from './evaluate';

/**
 * Whom a measure is evaluated for: one Patient, a Group's members, or every Patient the request
 * may read (page by page, never all in memory); narrowed to a practitioner's patients
 * (`Patient.general-practitioner`) when one is given. Read through REST and search, so the
 * project and the principal's grants apply. A subject the server does not hold is still a
 * subject: it is evaluated as having no data (every population 0).
 */

interface SubjectRequest {
  /** `Patient/<id>`, `Group/<id>` or a bare Patient id. */
  subject?: string;
  practitioner?: string;
}

interface SubjectDeps {
  rest: RestService;
  search: SearchService;
  ctx: RequestContext;
}

/** `Patient/x` | `Group/x` | `x` -> type and id (400 for anything else). */
export function parseSubject(text: string): { type: 'Patient' | 'Group'; id: string } {
  const match = /^(?:(Patient|Group)\/)?([A-Za-z0-9\-.]{1,64})$/.exec(text.trim());
  if (!match)
    throw fhirError('ERR_MEASURE_SUBJECT', {
      subject: text.slice(0, 100),
      reason: 'give Patient/<id>, Group/<id> or a Patient id',
    });
  return { type: (match[1] as 'Patient' | 'Group' | undefined) ?? 'Patient', id: match[2] };
}

export async function* subjectsOf(request: SubjectRequest, deps: SubjectDeps): AsyncGenerator<EvaluationSubject> {
  const allowed =
    request.practitioner === undefined ? undefined : await practitionerPatients(request.practitioner, deps);
  const keep = (id: string) => allowed === undefined || allowed.has(id);
  if (request.subject === undefined) {
    for await (const page of searchPages(deps.search, { level: 'type', type: 'Patient' }, {}, deps.ctx, 200)) {
      for (const patient of page as Patient[])
        if (patient.id && keep(patient.id)) yield { reference: `Patient/${patient.id}`, patient };
    }
    return;
  }
  const { type, id } = parseSubject(request.subject);
  if (type === 'Patient') {
    if (keep(id)) yield { reference: `Patient/${id}`, patient: await readOrNothing<Patient>('Patient', id, deps) };
    return;
  }
  const group = await readOrNothing<Group>('Group', id, deps);
  const seen = new Set<string>();
  for (const member of group?.member ?? []) {
    if (member.inactive) continue;
    const match = /^(?:.*\/)?Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(member.entity?.reference ?? '');
    if (!match || seen.has(match[1]) || !keep(match[1])) continue;
    seen.add(match[1]);
    yield { reference: `Patient/${match[1]}`, patient: await readOrNothing<Patient>('Patient', match[1], deps) };
  }
}

/** The resource, or undefined when the server holds none (unknown or deleted). */
async function readOrNothing<T extends Resource>(type: string, id: string, deps: SubjectDeps): Promise<T | undefined> {
  try {
    return (await deps.rest.readResource(type, id, deps.ctx)) as T;
  } catch (err) {
    if (isFhirError(err) && (err.status === 404 || err.status === 410)) return undefined;
    throw err;
  }
}

async function practitionerPatients(practitioner: string, deps: SubjectDeps): Promise<Set<string>> {
  const reference = practitioner.includes('/') ? practitioner : `Practitioner/${practitioner}`;
  const ids = new Set<string>();
  for await (const page of searchPages(
    deps.search,
    { level: 'type', type: 'Patient' },
    { 'general-practitioner': [reference], _elements: ['id'] },
    deps.ctx,
  )) {
    for (const r of page) if (r.id) ids.add(r.id);
  }
  return ids;
}
