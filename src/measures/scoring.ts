/**
 * Measure scoring as R4 defines it (measure.html "Measure scoring", and the CQF measures IG's
 * population rules): which members each population keeps once the others are known, and the
 * measure score. Members are keys: the subject (`Patient/x`) for a boolean population basis, the
 * resource (`Encounter/y`) for a resource-based one. Pure functions, no FHIR I/O.
 */

export type Scoring = 'proportion' | 'ratio' | 'continuous-variable' | 'cohort';

export const POPULATION_CODES = [
  'initial-population',
  'numerator',
  'numerator-exclusion',
  'denominator',
  'denominator-exclusion',
  'denominator-exception',
  'measure-population',
  'measure-population-exclusion',
  'measure-observation',
] as const;
export type PopulationCode = (typeof POPULATION_CODES)[number];

export type Members = Map<PopulationCode, Set<string>>;

export const AGGREGATE_METHODS = ['sum', 'average', 'median', 'minimum', 'maximum', 'count'] as const;
export type AggregateMethod = (typeof AGGREGATE_METHODS)[number];

function inter(a: Set<string>, b: Set<string>): Set<string> {
  return new Set([...a].filter((x) => b.has(x)));
}

function minus(a: Set<string>, ...others: Set<string>[]): Set<string> {
  return new Set([...a].filter((x) => !others.some((o) => o.has(x))));
}

/**
 * One subject's raw criteria results, narrowed by the population rules: the denominator is
 * within the initial population, the numerator within what the denominator keeps after its
 * exclusions (proportion) or within the initial population (ratio), exceptions only for those
 * neither excluded nor in the numerator, the measure population within the initial population.
 * A population the group does not define stays absent.
 */
export function applyRules(scoring: Scoring, raw: Members): Members {
  const get = (code: PopulationCode) => raw.get(code) ?? new Set<string>();
  const out: Members = new Map();
  const put = (code: PopulationCode, members: Set<string>) => {
    if (raw.has(code)) out.set(code, members);
  };
  const ip = get('initial-population');
  out.set('initial-population', ip);
  if (scoring === 'proportion' || scoring === 'ratio') {
    const den = raw.has('denominator') ? inter(get('denominator'), ip) : ip;
    const denex = inter(get('denominator-exclusion'), den);
    const num = scoring === 'proportion' ? inter(get('numerator'), minus(den, denex)) : inter(get('numerator'), ip);
    const numex = inter(get('numerator-exclusion'), num);
    put('denominator', den);
    put('denominator-exclusion', denex);
    put('numerator', num);
    put('numerator-exclusion', numex);
    if (scoring === 'proportion')
      put('denominator-exception', inter(get('denominator-exception'), minus(den, denex, num)));
  } else if (scoring === 'continuous-variable') {
    const mp = raw.has('measure-population') ? inter(get('measure-population'), ip) : ip;
    put('measure-population', mp);
    put('measure-population-exclusion', inter(get('measure-population-exclusion'), mp));
  }
  return out;
}

/** The members whose observation counts: the measure population less its exclusions. */
export function observed(members: Members): Set<string> {
  return minus(
    members.get('measure-population') ?? members.get('initial-population') ?? new Set(),
    members.get('measure-population-exclusion') ?? new Set(),
  );
}

/** Adds one subject's members into the running totals (member keys are unique across subjects). */
export function addInto(total: Members, one: Members): void {
  for (const [code, set] of one) {
    let into = total.get(code);
    if (!into) total.set(code, (into = new Set()));
    for (const m of set) into.add(m);
  }
}

/** The measure score, or undefined where there is none (a cohort, an empty denominator, no observation). */
export function score(
  scoring: Scoring,
  members: Members,
  observations: number[],
  aggregate: AggregateMethod,
): number | undefined {
  const n = (code: PopulationCode) => members.get(code)?.size ?? 0;
  if (scoring === 'proportion') {
    const denominator = n('denominator') - n('denominator-exclusion') - n('denominator-exception');
    return denominator > 0 ? (n('numerator') - n('numerator-exclusion')) / denominator : undefined;
  }
  if (scoring === 'ratio') {
    const denominator = n('denominator') - n('denominator-exclusion');
    return denominator > 0 ? (n('numerator') - n('numerator-exclusion')) / denominator : undefined;
  }
  if (scoring === 'continuous-variable') return aggregateOf(aggregate, observations);
  return undefined;
}

function aggregateOf(method: AggregateMethod, values: number[]): number | undefined {
  if (method === 'count') return values.length;
  if (values.length === 0) return undefined;
  switch (method) {
    case 'sum':
      return values.reduce((a, b) => a + b, 0);
    case 'average':
      return values.reduce((a, b) => a + b, 0) / values.length;
    case 'minimum':
      return Math.min(...values);
    case 'maximum':
      return Math.max(...values);
    case 'median': {
      const sorted = [...values].sort((a, b) => a - b);
      const mid = Math.floor(sorted.length / 2);
      return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    }
  }
}
