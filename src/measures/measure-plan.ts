import type { CodeableConcept, Element, Expression, Measure } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import { languageOf } from './criteria';
import {
  AGGREGATE_METHODS,
  POPULATION_CODES,
  type AggregateMethod,
  type PopulationCode,
  type Scoring,
} from './scoring';

/**
 * A Measure read once into what evaluation needs, and refused (422, saying why) when it cannot be
 * evaluated: groups with their scoring, population basis, populations, stratifiers; the
 * supplemental data; whether CQL runs and from which library. The CQF measures IG's extensions
 * are honoured where R4 has no element (population basis, per-group scoring, aggregate method).
 */

const CQFM = 'http://hl7.org/fhir/us/cqfmeasures/StructureDefinition/';
const SCORINGS: readonly Scoring[] = ['proportion', 'ratio', 'continuous-variable', 'cohort'];

interface PopulationPlan {
  id?: string;
  code: PopulationCode;
  concept: CodeableConcept;
  criteria: Expression;
}

interface StratifierPlan {
  id?: string;
  code?: CodeableConcept;
  /** One criterion, or the components' (code and criterion each). */
  parts: { code?: CodeableConcept; criteria: Expression }[];
  component: boolean;
}

export interface GroupPlan {
  id?: string;
  code?: CodeableConcept;
  scoring: Scoring;
  /** 'boolean', or the resource type the populations are lists of (an episode-of-care measure). */
  basis: string;
  populations: PopulationPlan[];
  stratifiers: StratifierPlan[];
  aggregate: AggregateMethod;
}

export interface MeasurePlan {
  measure: Measure;
  /** `url|version`, or `Measure/<id>` for a Measure without a url. */
  canonical: string;
  groups: GroupPlan[];
  supplemental: { id?: string; code?: CodeableConcept; criteria: Expression }[];
  /** The library CQL criteria are definitions of (Measure.library[0]), when any criterion is CQL. */
  library?: string;
  /** Every CQL definition the criteria name (checked against the library before any subject). */
  cqlNames: string[];
}

export function planMeasure(measure: Measure): MeasurePlan {
  const canonical = measure.url
    ? `${measure.url}${measure.version ? `|${measure.version}` : ''}`
    : `Measure/${measure.id}`;
  const invalid = (reason: string) => fhirError('ERR_MEASURE_INVALID', { measure: canonical, reason });
  const cqlNames: string[] = [];
  const criterion = (expression: Expression | undefined, where: string): Expression => {
    if (!expression?.expression) throw invalid(`${where} has no criteria expression`);
    const language = languageOf(expression);
    if (!language)
      throw invalid(
        `${where}: the expression language '${expression.language}' is not supported (CQL, text/fhirpath, application/x-fhir-query)`,
      );
    if (language === 'cql') cqlNames.push(expression.expression);
    return expression;
  };
  const measureScoring = measure.scoring?.coding?.find((c) => c.code)?.code;
  const measureBasis = extension(measure, 'cqfm-populationBasis')?.valueCode;
  const groups = (measure.group ?? []).map((group, g): GroupPlan => {
    const where = `group ${group.id ?? g + 1}`;
    const scoring = (extension(group, 'cqfm-scoring')?.valueCodeableConcept?.coding?.[0]?.code ?? measureScoring) as
      Scoring | undefined;
    if (!scoring || !SCORINGS.includes(scoring))
      throw invalid(`${where} has no scoring this server knows (${SCORINGS.join(', ')}), found '${scoring ?? 'none'}'`);
    let aggregate: AggregateMethod = 'sum';
    const populations = (group.population ?? []).map((p, i): PopulationPlan => {
      const code = p.code?.coding?.find((c) => POPULATION_CODES.includes(c.code as PopulationCode))?.code as
        PopulationCode | undefined;
      if (!code) throw invalid(`${where} population ${i + 1} has no measure-population code`);
      const method = extension(p, 'cqfm-aggregateMethod')?.valueCode;
      if (code === 'measure-observation' && method !== undefined) {
        if (!AGGREGATE_METHODS.includes(method as AggregateMethod))
          throw invalid(`${where}: aggregate method '${method}' is not one of ${AGGREGATE_METHODS.join(', ')}`);
        aggregate = method as AggregateMethod;
      }
      return {
        id: p.id,
        code,
        concept: p.code as CodeableConcept,
        criteria: criterion(p.criteria, `${where} population ${code}`),
      };
    });
    if (!populations.some((p) => p.code === 'initial-population')) throw invalid(`${where} has no initial-population`);
    if (scoring === 'continuous-variable' && !populations.some((p) => p.code === 'measure-observation'))
      throw invalid(`${where} is continuous-variable but has no measure-observation`);
    const stratifiers = (group.stratifier ?? []).map((s, i): StratifierPlan => {
      const swhere = `${where} stratifier ${s.id ?? i + 1}`;
      if (s.component?.length) {
        return {
          id: s.id,
          code: s.code,
          component: true,
          parts: s.component.map((c) => ({ code: c.code, criteria: criterion(c.criteria, swhere) })),
        };
      }
      return {
        id: s.id,
        code: s.code,
        component: false,
        parts: [{ code: s.code, criteria: criterion(s.criteria, swhere) }],
      };
    });
    const basis = extension(group, 'cqfm-populationBasis')?.valueCode ?? measureBasis ?? 'boolean';
    return { id: group.id, code: group.code, scoring, basis, populations, stratifiers, aggregate };
  });
  if (groups.length === 0) throw invalid('it has no group');
  const supplemental = (measure.supplementalData ?? []).map((s, i) => ({
    id: s.id,
    code: s.code,
    criteria: criterion(s.criteria, `supplementalData ${s.id ?? i + 1}`),
  }));
  const library = measure.library?.[0];
  if (cqlNames.length > 0 && !library) throw invalid('its criteria are CQL but it names no library');
  return { measure, canonical, groups, supplemental, library: cqlNames.length > 0 ? library : undefined, cqlNames };
}

function extension(element: Element, name: string) {
  return element.extension?.find((e) => e.url === `${CQFM}${name}`);
}
