import type { FhirPathPool } from '../fhir/fhirpath/pool';
import { Budget } from '../context/budget';
import type { Coding, Measure, MeasureReport, Patient, Period, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { SearchService } from '../search/search-service';
import type { TerminologyService } from '../terminology/service';
import { codeServiceFor } from './code-service';
import { CqlRunner } from './cql-runner';
import { Criteria, type SubjectScope } from './criteria';
import { CompartmentData } from './data-source';
import { resolveClosure, type LibraryFinder } from './library-closure';
import { planMeasure, type GroupPlan, type MeasurePlan } from './measure-plan';
import { buildReport, type ReportType } from './report';
import { applyRules, observed, type Members } from './scoring';
import { GroupTally, SupplementalTally } from './tally';
import { codingsOf, holds, keyOf, numberOf, resourcesOf } from './values';

/**
 * One $evaluate-measure: the Measure planned, its CQL prepared once (library closure, value sets,
 * compiled ELM), then each subject evaluated in turn (its data read as its retrieves ask) and
 * added into the running totals the report is built from.
 */

export interface EvaluationSubject {
  /** `Patient/<id>`. */
  reference: string;
  /** Undefined when the server holds no such patient: every population of it is empty. */
  patient?: Patient;
}

export interface EvaluateOptions {
  measure: Measure;
  /** The measurement period as CQL DateTimes (`2019-01-01T00:00:00.000`), inclusive. */
  period: { start: string; end: string };
  /** The period as the report states it. */
  reportPeriod: Period;
  reportType: ReportType;
  /** The report's subject (a Patient or Group reference), for individual reports and Group populations. */
  subject?: string;
  subjects: AsyncIterable<EvaluationSubject>;
}

interface EvaluateDeps {
  search: SearchService;
  terminology: TerminologyService;
  findLibrary: LibraryFinder;
  ctx: RequestContext;
  /** Throws when the request's time is spent (checked between subjects). */
  checkBudget: () => void;
  /** Where FHIRPath criteria are evaluated, bounded. */
  fhirpath: Pick<FhirPathPool, 'evaluate'>;
}

export async function evaluateMeasure(options: EvaluateOptions, deps: EvaluateDeps): Promise<MeasureReport> {
  const plan = planMeasure(options.measure);
  const runner = plan.library ? await prepareCql(plan, options.period, deps) : undefined;
  const criteria = new Criteria({
    runner,
    search: deps.search,
    ctx: deps.ctx,
    period: options.period,
    fhirpath: deps.fhirpath,
  });
  const data = new CompartmentData(deps.search, deps.ctx);
  const groups = plan.groups.map((g) => new GroupTally(g.stratifiers.length));
  const supplemental = new SupplementalTally(plan.supplemental.length);
  const evaluated = new Set<string>();
  // Each subject is evaluated on the one event loop (FHIRPath, CQL): given back between subjects.
  const pace = Budget.of(deps.ctx, 'the measure evaluation');
  for await (const subject of options.subjects) {
    deps.checkBudget();
    await pace.step();
    // Only CQL reads the patient's data through the engine's model (parsed once, a second of one turn).
    const patientData = runner && subject.patient ? data.patient(subject.patient) : undefined;
    const scope: SubjectScope = {
      reference: subject.reference,
      patient: subject.patient,
      cql: runner && patientData ? runner.subject(patientData.patient) : undefined,
      touched: new Map(),
    };
    for (let g = 0; g < plan.groups.length; g++) await evaluateGroup(plan.groups[g], scope, criteria, groups[g]);
    for (let s = 0; s < plan.supplemental.length; s++) {
      // Resources a supplemental element answers are named in evaluatedResource; other values are counted.
      const value = await criteria.value(plan.supplemental[s].criteria, scope);
      const resources = resourcesOf(value);
      if (resources.length === 0) supplemental.add(s, codingsOf(value));
      for (const r of resources) evaluated.add(`${r.resourceType}/${r.id}`);
    }
    if (options.reportType === 'subject') {
      const records: Resource[] = [
        ...(runner && scope.cql ? runner.evaluatedRecords(scope.cql) : []),
        ...scope.touched.values(),
      ];
      for (const r of records) evaluated.add(`${r.resourceType}/${r.id}`);
    }
  }
  return buildReport({
    plan,
    reportType: options.reportType,
    period: options.reportPeriod,
    subject: options.subject,
    groups,
    supplemental,
    evaluated: [...evaluated],
  });
}

async function prepareCql(
  plan: MeasurePlan,
  period: { start: string; end: string },
  deps: EvaluateDeps,
): Promise<CqlRunner> {
  const closure = await resolveClosure(
    plan.library as string,
    `Measure '${plan.canonical}'`,
    deps.findLibrary,
    deps.ctx.project,
  );
  const codes = await codeServiceFor(closure.all, {
    terminology: deps.terminology,
    project: deps.ctx.project,
    checkBudget: deps.checkBudget,
  });
  const runner = new CqlRunner(closure, codes, period);
  const missing = plan.cqlNames.filter((name) => !runner.has(name) && !runner.hasFunction(name));
  if (missing.length > 0) {
    throw fhirError('ERR_MEASURE_INVALID', {
      measure: plan.canonical,
      reason: `its library ${closure.main.canonical} defines no '${missing[0]}'`,
    });
  }
  return runner;
}

async function evaluateGroup(
  group: GroupPlan,
  scope: SubjectScope,
  criteria: Criteria,
  tally: GroupTally,
): Promise<void> {
  const raw: Members = new Map();
  const byKey = new Map<string, Resource>();
  for (const population of group.populations) {
    if (population.code === 'measure-observation') continue;
    const value = await criteria.value(population.criteria, scope);
    raw.set(population.code, membersOf(value, group.basis, scope.reference, byKey));
  }
  const members = applyRules(group.scoring, raw);
  const observations = new Map<string, number>();
  const observation = group.populations.find((p) => p.code === 'measure-observation');
  if (observation && scope.patient) {
    for (const key of observed(members)) {
      const value = await criteria.observe(
        observation.criteria,
        scope,
        group.basis === 'boolean' ? undefined : byKey.get(key),
      );
      const n = numberOf(value);
      if (n !== undefined) observations.set(key, n);
    }
  }
  const strata: { key: string; parts: Coding[][] }[] = [];
  for (const stratifier of group.stratifiers) {
    const parts: Coding[][] = [];
    for (const part of stratifier.parts) parts.push(codingsOf(await criteria.value(part.criteria, scope)));
    strata.push({ key: parts.map(keyOf).join('\u0000'), parts });
  }
  // A subject in no population is in no stratum either.
  tally.add(members, observations, (members.get('initial-population')?.size ?? 0) > 0 ? strata : []);
}

/** A criterion's answer as members: the subject (boolean basis) or the resources it lists. */
function membersOf(value: unknown, basis: string, subject: string, byKey: Map<string, Resource>): Set<string> {
  if (basis === 'boolean') return holds(value) ? new Set([subject]) : new Set();
  const keys = new Set<string>();
  for (const r of resourcesOf(value)) {
    const key = `${r.resourceType}/${r.id}`;
    keys.add(key);
    byKey.set(key, r);
  }
  return keys;
}
