import type { Library, Measure, MeasureReport } from 'fhir/r4';
import { fhirError, isFhirError } from '../../fhir/errors';
import { splitCanonical } from '../../measures/library-closure';
import type { ReportType } from '../../measures/report';
import { parseSubject, subjectsOf } from '../../measures/subjects';
import type { AppServices } from '../../services';
import { defineOperation, targetOf, type OperationContext } from '../operation';

/**
 * `Measure/[id]/$evaluate-measure` and `Measure/$evaluate-measure?measure=...` (R4's official
 * definition): the Measure evaluated over the period for one subject, a Group, or every patient,
 * answered as a MeasureReport (not stored). The engine is src/measures/.
 */
export interface EvaluateMeasureInput {
  periodStart: string;
  periodEnd: string;
  measure?: string;
  reportType?: string;
  subject?: string;
  practitioner?: string;
  /** Accepted and not used: every report is computed from all the data the server holds. */
  lastReceivedOn?: string;
}

const REPORT_TYPES: readonly ReportType[] = ['subject', 'subject-list', 'population'];

export const measureEvaluateMeasure = defineOperation<AppServices, EvaluateMeasureInput, { return: MeasureReport }>({
  definition: 'http://hl7.org/fhir/OperationDefinition/Measure-evaluate-measure',
  handle: async (input, ctx) => {
    const period = measurementPeriod(input.periodStart, input.periodEnd);
    const measure = targetOf<Measure>(ctx, 'Measure') ?? (await findMeasure(input.measure, ctx));
    const subjectType = input.subject === undefined ? undefined : parseSubject(input.subject).type;
    const reportType = (input.reportType ?? (subjectType === 'Patient' ? 'subject' : 'population')) as ReportType;
    if (!REPORT_TYPES.includes(reportType))
      throw fhirError('ERR_PARAM_VALUE', {
        name: 'reportType',
        type: `report type (${REPORT_TYPES.join(', ')})`,
        value: String(input.reportType).slice(0, 40),
      });
    if (reportType === 'subject' && subjectType !== 'Patient') {
      throw fhirError('ERR_MEASURE_SUBJECT', {
        subject: input.subject ?? '(none)',
        reason: 'reportType=subject needs one Patient as subject',
      });
    }
    const { services, request } = ctx;
    const subjectRef = input.subject === undefined ? undefined : `${subjectType}/${parseSubject(input.subject).id}`;
    // The CQL engine (cql-execution, cql-exec-fhir: about 30 MB and 60 ms) is loaded on first use.
    const { evaluateMeasure } = await import('../../measures/evaluate');
    const report = await evaluateMeasure(
      {
        measure,
        period,
        reportPeriod: { start: input.periodStart, end: input.periodEnd },
        reportType,
        subject: subjectRef,
        subjects: subjectsOf(
          { subject: input.subject, practitioner: input.practitioner },
          { rest: services.rest, search: services.search, ctx: request },
        ),
      },
      {
        search: services.search,
        terminology: services.terminology,
        findLibrary: (url, version) => findCanonical<Library>('Library', url, version, ctx),
        ctx: request,
        fhirpath: services.fhirpath,
        checkBudget: () => {
          if (Date.now() > ctx.deadline)
            throw fhirError('ERR_OP_TIMEOUT', { code: 'evaluate-measure', ms: services.config.operationTimeoutMs });
        },
      },
    );
    return { return: report };
  },
});

/**
 * The period's bounds as CQL DateTimes: a date's start is its first instant and its end its last
 * (the definition's "the period will end at the end of the period implied"). 400 when reversed.
 */
export function measurementPeriod(start: string, end: string): { start: string; end: string } {
  const from = bound(start, 'start');
  const to = bound(end, 'end');
  if (to < from) throw fhirError('ERR_MEASURE_PERIOD', { start, end });
  return { start: from, end: to };
}

function bound(date: string, side: 'start' | 'end'): string {
  const match = /^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$/.exec(date);
  if (!match)
    throw fhirError('ERR_PARAM_VALUE', {
      name: side === 'start' ? 'periodStart' : 'periodEnd',
      type: 'date',
      value: date.slice(0, 40),
    });
  const [, y, m, d] = match;
  if (side === 'start') return `${y}-${m ?? '01'}-${d ?? '01'}T00:00:00.000`;
  const month = m ?? '12';
  const day = d ?? String(new Date(Date.UTC(Number(y), Number(month), 0)).getUTCDate()).padStart(2, '0');
  return `${y}-${month}-${day}T23:59:59.999`;
}

/** Type level: `measure` is a canonical (url, `|version` optional), `Measure/<id>`, or an id. */
async function findMeasure(ref: string | undefined, ctx: OperationContext<AppServices>): Promise<Measure> {
  if (ref === undefined) throw fhirError('ERR_PARAM_MISSING', { name: 'measure' });
  const local = /^(?:Measure\/)?([A-Za-z0-9\-.]{1,64})$/.exec(ref);
  if (local) {
    try {
      return (await ctx.services.rest.readResource('Measure', local[1], ctx.request)) as Measure;
    } catch (err) {
      if (!(isFhirError(err) && (err.status === 404 || err.status === 410))) throw err;
      throw fhirError('ERR_MEASURE_UNKNOWN', { measure: ref });
    }
  }
  const [url, version] = splitCanonical(ref);
  const found = await findCanonical<Measure>('Measure', url, version, ctx);
  if (!found) throw fhirError('ERR_MEASURE_UNKNOWN', { measure: ref });
  return found;
}

/** A resource by canonical url (and version), through search in the request's project; the latest version when none is asked. */
async function findCanonical<T extends Library | Measure>(
  type: T['resourceType'],
  url: string,
  version: string | undefined,
  ctx: OperationContext<AppServices>,
): Promise<T | undefined> {
  const query: Record<string, string[]> = { url: [url], _count: ['50'] };
  if (version !== undefined) query.version = [version];
  const bundle = await ctx.services.search.search({ level: 'type', type }, query, ctx.request);
  const found = (bundle.entry ?? []).map((e) => e.resource as T).filter((r) => r?.resourceType === type);
  return found.sort((a, b) => (b.version ?? '').localeCompare(a.version ?? '', undefined, { numeric: true }))[0];
}
