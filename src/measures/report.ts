import type {
  FhirResource,
  List,
  MeasureReport,
  MeasureReportGroup,
  MeasureReportGroupPopulation,
  MeasureReportGroupStratifierStratum,
  Observation,
  Period,
  Reference,
} from 'fhir/r4';
import type { GroupPlan, MeasurePlan } from './measure-plan';
import { score, type Members } from './scoring';
import type { GroupTally, SupplementalTally } from './tally';

/**
 * The MeasureReport of an evaluation: populations with their counts (and, for a subject-list,
 * contained Lists of their members), measure scores, strata, supplemental data as contained
 * Observations referenced from `evaluatedResource`.
 */

export type ReportType = 'subject' | 'subject-list' | 'population';

const REPORT_TYPES: Record<ReportType, MeasureReport['type']> = {
  subject: 'individual',
  'subject-list': 'subject-list',
  population: 'summary',
};

interface ReportInput {
  plan: MeasurePlan;
  reportType: ReportType;
  period: Period;
  subject?: string;
  groups: GroupTally[];
  supplemental: SupplementalTally;
  /** Resources the evaluation read (an individual report's), by `Type/id`. */
  evaluated: string[];
}

export function buildReport(input: ReportInput): MeasureReport {
  const { plan } = input;
  const contained: FhirResource[] = [];
  const report: MeasureReport = {
    resourceType: 'MeasureReport',
    status: 'complete',
    type: REPORT_TYPES[input.reportType],
    measure: plan.canonical,
    date: new Date().toISOString(),
    period: input.period,
  };
  if (input.subject) report.subject = { reference: input.subject };
  if (plan.measure.improvementNotation) report.improvementNotation = plan.measure.improvementNotation;
  report.group = plan.groups.map((group, g) => groupOf(group, g, input, contained));
  const evaluated: Reference[] = input.evaluated.map((reference) => ({ reference }));
  input.supplemental.values.forEach((values, s) => {
    const element = plan.supplemental[s];
    let v = 0;
    for (const { coding, count } of values.values()) {
      const id = `sde-${s + 1}-${++v}`;
      const observation: Observation = {
        resourceType: 'Observation',
        id,
        status: 'final',
        code: { ...(element.code ?? {}), text: element.code?.text ?? element.id ?? element.criteria.expression },
        valueCodeableConcept: { coding: [coding] },
        component: [{ code: { text: 'count' }, valueInteger: count }],
      };
      contained.push(observation);
      evaluated.push({ reference: `#${id}` });
    }
  });
  if (evaluated.length > 0) report.evaluatedResource = evaluated;
  if (contained.length > 0) report.contained = contained;
  return report;
}

function groupOf(group: GroupPlan, g: number, input: ReportInput, contained: FhirResource[]): MeasureReportGroup {
  const tally = input.groups[g];
  const out: MeasureReportGroup = {};
  if (group.id) out.id = group.id;
  if (group.code) out.code = group.code;
  const listPrefix = `${group.id ?? `group-${g + 1}`}`;
  out.population = populationsOf(
    group,
    tally.members,
    tally.observations,
    input.reportType === 'subject-list' ? { prefix: listPrefix, contained } : undefined,
  );
  const measureScore = score(group.scoring, tally.members, [...tally.observations.values()], group.aggregate);
  if (measureScore !== undefined) out.measureScore = { value: round(measureScore) };
  if (group.stratifiers.length > 0) {
    out.stratifier = group.stratifiers.map((stratifier, s) => {
      const strata: MeasureReportGroupStratifierStratum[] = [...tally.strata[s].values()].map((stratum) => {
        const entry: MeasureReportGroupStratifierStratum = {};
        if (stratifier.component) {
          entry.component = stratifier.parts.map((part, i) => ({
            code: part.code ?? { text: part.criteria.expression },
            value: conceptOf(stratum.parts[i]),
          }));
        } else {
          entry.value = conceptOf(stratum.parts[0]);
        }
        entry.population = populationsOf(group, stratum.members, stratum.observations);
        const stratumScore = score(group.scoring, stratum.members, [...stratum.observations.values()], group.aggregate);
        if (stratumScore !== undefined) entry.measureScore = { value: round(stratumScore) };
        return entry;
      });
      return {
        ...(stratifier.id ? { id: stratifier.id } : {}),
        ...(stratifier.code ? { code: [stratifier.code] } : {}),
        stratum: strata,
      };
    });
  }
  return out;
}

function populationsOf(
  group: GroupPlan,
  members: Members,
  observations: Map<string, number>,
  lists?: { prefix: string; contained: FhirResource[] },
): MeasureReportGroupPopulation[] {
  return group.populations.map((p) => {
    const set =
      p.code === 'measure-observation' ? new Set(observations.keys()) : (members.get(p.code) ?? new Set<string>());
    const population: MeasureReportGroupPopulation = { code: p.concept, count: set.size };
    if (p.id) population.id = p.id;
    if (lists) {
      const list: List = {
        resourceType: 'List',
        id: `${lists.prefix}-${p.code}`,
        status: 'current',
        mode: 'snapshot',
        entry: [...set].sort().map((reference) => ({ item: { reference } })),
      };
      if (list.entry?.length === 0) delete list.entry;
      lists.contained.push(list);
      population.subjectResults = { reference: `#${list.id}` };
    }
    return population;
  });
}

function conceptOf(codings: readonly { system?: string; code?: string; display?: string }[] | undefined) {
  if (!codings || codings.length === 0) return { text: 'null' };
  return { coding: codings.map((c) => ({ ...c })), text: codings.map((c) => c.code).join(',') };
}

/** Scores keep what a double prints without floating-point noise. */
function round(value: number): number {
  return Math.round(value * 1e10) / 1e10;
}
