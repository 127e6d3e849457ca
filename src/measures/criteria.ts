import type { Expression, Patient, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError, isFhirError } from '../fhir/errors';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import type { SearchService } from '../search/search-service';
import { toFhir, type CqlRunner, type CqlSubject } from './cql-runner';
import { fhirWrapper } from './data-source';
import { searchAll } from './search-pages';

/**
 * A criterion of a Measure (population, stratifier, supplemental data) evaluated for one subject,
 * in the language its Expression names: CQL (a definition of the measure's library, by name),
 * FHIRPath over the subject's Patient, or a FHIR query (`Observation?code=...`, Medplum's
 * convention) run in the subject's compartment. Answers plain values: booleans, resources,
 * lists, or what CQL answers for anything else.
 */

export type Language = 'cql' | 'fhirpath' | 'fhir-query';

const LANGUAGES: Record<string, Language> = {
  'text/cql': 'cql',
  'text/cql.identifier': 'cql',
  'text/cql-identifier': 'cql',
  'text/cql.name': 'cql',
  'text/cql-expression': 'cql',
  'text/fhirpath': 'fhirpath',
  'application/x-fhir-query': 'fhir-query',
};

/** The language of an Expression, or undefined for one this server does not run. */
export function languageOf(expression: Expression): Language | undefined {
  return LANGUAGES[expression.language ?? ''];
}

/** What one subject's criteria are evaluated against. */
export interface SubjectScope {
  /** `Patient/<id>`. */
  reference: string;
  /** Undefined for a subject the server does not hold (its criteria are all empty). */
  patient?: Patient;
  cql?: CqlSubject;
  /** Resources criteria other than CQL returned (for evaluatedResource). */
  touched: Map<string, Resource>;
}

interface CriteriaDeps {
  runner?: CqlRunner;
  search: SearchService;
  ctx: RequestContext;
  period: { start: string; end: string };
  /** Where FHIRPath criteria (a stored Measure's, so a user's) are evaluated, bounded. */
  fhirpath: Pick<FhirPathPool, 'evaluate'>;
}

export class Criteria {
  constructor(private readonly deps: CriteriaDeps) {}

  async value(expression: Expression, scope: SubjectScope): Promise<unknown> {
    if (!scope.patient) return undefined;
    const text = expression.expression ?? '';
    switch (languageOf(expression)) {
      case 'cql':
        return plain(await (this.deps.runner as CqlRunner).value(scope.cql as CqlSubject, text));
      case 'fhirpath':
        return this.fhirpath(text, scope.patient, undefined);
      case 'fhir-query':
        return this.query(text, scope);
      default:
        throw fhirError('ERR_MEASURE_EVALUATION', {
          expression: text,
          reason: `the language '${expression.language}' is not supported`,
        });
    }
  }

  /** A measure observation of one member: a CQL function of it, or a FHIRPath expression with it as focus. */
  async observe(expression: Expression, scope: SubjectScope, member: Resource | undefined): Promise<unknown> {
    if (!scope.patient) return undefined;
    const text = expression.expression ?? '';
    if (languageOf(expression) === 'cql') {
      const runner = this.deps.runner as CqlRunner;
      const args = member ? [fhirWrapper().wrap(member)] : [];
      return plain(await runner.call(scope.cql as CqlSubject, text, args));
    }
    if (languageOf(expression) === 'fhirpath') return this.fhirpath(text, member ?? scope.patient, scope.patient);
    throw fhirError('ERR_MEASURE_EVALUATION', {
      expression: text,
      reason: 'a measure observation is a CQL function or a FHIRPath expression',
    });
  }

  private async fhirpath(text: string, focus: Resource, patient: Patient | undefined): Promise<unknown> {
    const vars = {
      patient: patient ?? focus,
      subject: patient ?? focus,
      periodStart: this.deps.period.start,
      periodEnd: this.deps.period.end,
    };
    const [answer] = await this.deps.fhirpath.evaluate([{ expression: text, focus, vars, values: true }], {
      deadline: this.deps.ctx.deadline,
    });
    if (!answer.ok && answer.error === 'budget')
      throw fhirError('ERR_OP_TOO_COSTLY', {
        what: `The FHIRPath criterion '${text.slice(0, 100)}' was stopped: ${answer.message}`,
      });
    if (!answer.ok)
      throw fhirError('ERR_MEASURE_EVALUATION', { expression: text, reason: answer.message.slice(0, 300) });
    const result = answer.values ?? [];
    return result.length === 1 ? result[0] : result;
  }

  /** `Type?params`: the subject's matching resources (its compartment; for Patient, itself). */
  private async query(text: string, scope: SubjectScope): Promise<Resource[]> {
    const mark = text.indexOf('?');
    const type = (mark < 0 ? text : text.slice(0, mark)).trim();
    if (!/^[A-Z][A-Za-z]+$/.test(type))
      throw fhirError('ERR_MEASURE_EVALUATION', {
        expression: text,
        reason: 'a FHIR query starts with a resource type',
      });
    const query: Record<string, string[]> = {};
    for (const [name, value] of new URLSearchParams(mark < 0 ? '' : text.slice(mark + 1)))
      (query[name] ??= []).push(value);
    const id = scope.patient?.id as string;
    try {
      const found =
        type === 'Patient'
          ? await searchAll(this.deps.search, { level: 'type', type }, { ...query, _id: [id] }, this.deps.ctx)
          : await searchAll(
              this.deps.search,
              { level: 'compartment', compartment: 'Patient', id, type },
              query,
              this.deps.ctx,
            );
      for (const r of found) scope.touched.set(`${r.resourceType}/${r.id}`, r);
      return found;
    } catch (err) {
      if (isFhirError(err) && err.status < 500)
        throw fhirError('ERR_MEASURE_EVALUATION', { expression: text, reason: err.message });
      throw err;
    }
  }
}

/** CQL answers with FHIR objects turned back into resources, lists kept lists. */
function plain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => toFhir(v) ?? v);
  return toFhir(value) ?? value;
}
