import { describe, expect, test } from 'vitest';
import { fhirpathEngine } from '../../src/fhir/fhirpath/load';
import { withoutOptionalTail } from '../../src/validation/fhirpath-subset/parser';
import { compileSimple } from '../../src/validation/simple-fhirpath';
import { ResourceValidator } from '../../src/validation/validator';
import { clinicalExamples, readExample } from './corpus';

/**
 * The small invariant evaluator must answer as HL7's FHIRPath engine does (it stands in for it).
 * The engine is the oracle: a table of expressions over focuses chosen for their edges (empty
 * collections in the three-valued logic, primitives with only an extension, choice names), and the
 * invariants that real examples make it evaluate.
 */

const { fhirpath, model } = fhirpathEngine();

/** The engine's answer as an invariant reads it: undefined (empty), true or false. */
function engine(
  expression: string,
  base: string,
  focus: unknown,
  env: Record<string, unknown> = {},
): boolean | undefined {
  const result = fhirpath.evaluate(focus as never, { base, expression }, env as never, model) as unknown[];
  if (result.length === 0) return undefined;
  return result.length === 1 && typeof result[0] === 'boolean' ? result[0] : true;
}

function simple(expression: string, focus: unknown, env: Record<string, unknown> = {}): boolean | undefined | 'engine' {
  const compiled = compileSimple(expression);
  if (!compiled) throw new Error(`not in the subset: ${expression}`);
  return compiled(focus, env);
}

/** Its answer agrees with the engine's, or it left the question to the engine. */
function agrees(expression: string, base: string, focus: unknown, env?: Record<string, unknown>): boolean {
  const mine = simple(expression, focus, env);
  return mine === 'engine' || mine === engine(expression, base, focus, env);
}

/** Each resource (its own %resource) gets the engine's answer; the second is one the subset answers itself. */
function answersAsEngine(expression: string, base: string, focuses: Record<string, unknown>[]): void {
  for (const focus of focuses)
    expect(agrees(expression, base, focus, { resource: focus, rootResource: focus }), JSON.stringify(focus)).toBe(true);
  expect(simple(expression, focuses[1], { resource: focuses[1], rootResource: focuses[1] })).not.toBe('engine');
}

const PERIOD_FOCUSES = [
  {},
  { start: '2020' },
  { end: '2020' },
  { start: '2020', end: '2021' },
  { start: '2021-03-04', end: '2021-03-02' },
  { start: '2020-01-01T10:00:00Z', end: '2020-01-01T09:00:00Z' },
  { start: '2020-01-01T10:00:00+02:00', end: '2020-01-01T10:00:00+02:00' },
  { _start: { extension: [{ url: 'x', valueString: 'y' }] } },
];

describe('the small evaluator answers as the FHIRPath engine', () => {
  test.each([
    ['start.exists() or end.exists()', 'Period'],
    ['start.empty() and end.empty()', 'Period'],
    ['start.exists() xor end.exists()', 'Period'],
    ['start.exists() implies end.exists()', 'Period'],
    ['start.hasValue().not() or end.hasValue()', 'Period'],
    ['(start.exists() and end.exists()).not()', 'Period'],
    ["start = '2020' or end != '2021'", 'Period'],
    ["start.startsWith('20') and end.endsWith('1')", 'Period'],
    ["start.contains('02') implies end.matches('^20[0-9]{2}$')", 'Period'],
    ["start = 'x'", 'Period'],
    ['start.count() = 1', 'Period'],
    ['start.hasValue().not() or end.hasValue().not() or (start <= end)', 'Period'],
    ['start > end or start >= end or start < end', 'Period'],
  ])('%s', (expression, base) => {
    for (const focus of PERIOD_FOCUSES) expect(agrees(expression, base, focus), JSON.stringify(focus)).toBe(true);
  });

  test.each([
    ["name.where(use = 'official').exists()"],
    ['name.all(family.exists() or given.exists())'],
    ['name.exists(text.exists())'],
    ['name.given.count() = 2'],
    ['deceased.exists() and multipleBirth.empty()'],
    ["telecom.where(system = 'email').value.all($this.contains('@'))"],
  ])('%s', (expression) => {
    const focuses = [
      { resourceType: 'Patient' },
      { resourceType: 'Patient', name: [{ use: 'official', family: 'a' }, { given: ['b', 'c'] }] },
      { resourceType: 'Patient', name: [{ text: 'x' }], deceasedBoolean: true },
      {
        resourceType: 'Patient',
        telecom: [
          { system: 'email', value: 'a@b' },
          { system: 'email', value: 'ab' },
        ],
        multipleBirthInteger: 2,
      },
    ];
    answersAsEngine(expression, 'Patient', focuses);
  });

  test.each([
    ['[A-Z]([A-Za-z0-9_]){0,254}'],
    ['ab{0,3}'],
    ['a|b{0,5}'],
    ['(a|b){0,3}'],
    ['x[y}]{0,2}'],
    ['[A-Z]([a-z]){0,2}$'],
    ['a(b){1,2}'],
  ])('matches(%s), its optional tail dropped', (pattern) => {
    const focuses = ['Abc', 'abc', 'a', 'b', 'x', '123', 'ABCD', 'Abcd'].map((name) => ({
      resourceType: 'Library',
      name,
    }));
    answersAsEngine(`name.matches('${pattern}')`, 'Library', focuses);
  });

  test('an optional last atom is dropped from a pattern only where it can be', () => {
    expect(withoutOptionalTail('[A-Z]([A-Za-z0-9_]){0,254}')).toBe('[A-Z]');
    expect(withoutOptionalTail('a[b}]{0,2}')).toBe('a');
    for (const kept of ['[A-Z]([a-z]){0,2}$', 'ab{1,3}', 'x\\{0,2}', 'a*{0,2}', '(a{0,2}'])
      expect(withoutOptionalTail(kept)).toBe(kept);
  });

  test('expressions outside the subset are left to the engine', () => {
    const outside: [string, Record<string, unknown>][] = [
      ['%ucum.exists()', { name: 'x' }],
      ['start <= end', { start: '2020', end: '2021-01' }],
      ['start <= end', { start: '2020-01-01T10:00:00Z', end: '2020-01-01T11:00:00+01:00' }],
      ['start <= end', { start: '2020-01-01T10:00:00.5Z', end: '2020-01-01T10:00:00.7Z' }],
      ['start.select($this).allFalse()', { start: '2020' }],
      ["descendants().where(reference = '#').exists()", { name: 'x' }],
      ['Patient.name.exists()', { name: 'x' }],
      ['Patient.name.exists()', { resourceType: 'Person', name: 'x' }],
      ["name.matches('(?=a)b')", { name: 'x' }],
      ["name in ('a' | 'b')", { name: ['a', 'b'] }],
      ['a + b > 0', { a: 1.5, b: 1 }],
      ['a > b', { a: 1, b: '2' }],
      ['contained.first().is(DomainResource)', { contained: [{ resourceType: 'Patient' }] }],
      ['value.is(Quantity)', { valueQuantity: { value: 1 } }],
    ];
    for (const [expression, focus] of outside) {
      const compiled = compileSimple(expression);
      expect(compiled === undefined || compiled(focus, {}) === 'engine', expression).toBe(true);
    }
  });

  test.each([
    ["status in ('proposed' | 'cancelled' | 'waitlist')"],
    ["(start.exists() and end.exists()) or (status in ('proposed' | 'cancelled'))"],
    [
      "Appointment.cancelationReason.exists() implies (Appointment.status = 'noshow' or Appointment.status = 'cancelled')",
    ],
    ['(participant.count() + slot.count()) > 1'],
    ['minutesDuration >= 0 and priority < 10 and minutesDuration <= 15 and priority > 1'],
    ["participant.all(actor.exists() = (%resource.status = 'booked'))"],
    ['%rootResource.contained.first().is(Patient)'],
    ['contained.first().is(Patient) or contained.first().is(Practitioner).not()'],
    ["participant.select(status in ('accepted' | 'declined')).allFalse()"],
    ['participant.select(actor).count() = 1'],
    ["participant.select(status & type.text).isDistinct() and (status & '-x') = 'booked-x'"],
  ])('%s', (expression) => {
    const focuses = [
      { resourceType: 'Appointment' },
      {
        resourceType: 'Appointment',
        status: 'proposed',
        minutesDuration: 15,
        priority: 5,
        participant: [{ actor: { reference: 'x' } }],
      },
      {
        resourceType: 'Appointment',
        status: 'booked',
        start: '2020',
        end: '2021',
        cancelationReason: { text: 'x' },
        participant: [{ status: 'accepted' }, { actor: {} }],
        slot: [{}],
      },
      {
        resourceType: 'Appointment',
        status: 'noshow',
        cancelationReason: { text: 'x' },
        minutesDuration: -1,
        priority: 0,
        contained: [{ resourceType: 'Patient' }, { resourceType: 'Practitioner' }],
      },
      {
        resourceType: 'Appointment',
        _status: { extension: [{ url: 'x', valueString: 'y' }] },
        contained: [{ resourceType: 'Practitioner' }],
      },
      {
        resourceType: 'Appointment',
        status: 'booked',
        participant: [
          { status: 'accepted', type: [{ text: 'a' }] },
          { status: 'accepted' },
          { status: 'accepted', type: [{ text: 'a' }] },
        ],
      },
    ];
    answersAsEngine(expression, 'Appointment', focuses);
  });

  test('every invariant the examples make it evaluate, answered as the engine answers', async () => {
    const validator = new ResourceValidator();
    const seen: { expression: string; base: string; focus: unknown; env: Record<string, unknown> }[] = [];
    const original = validator.invariants.check.bind(validator.invariants);
    validator.invariants.check = (expression, focus, base, env) => {
      if (compileSimple(expression))
        seen.push({ expression, base, focus, env: { resource: env.resource, rootResource: env.rootResource } });
      return original(expression, focus, base, env);
    };
    // Every tenth example: enough for every shape of invariant, quick enough for the fast suite.
    const sample = clinicalExamples().filter((e, i) => e.size < 1_000_000 && i % 10 === 0);
    for (const { file } of sample)
      await validator.validate(readExample(file), { deadline: Date.now() + 60_000, project: 'default' });
    expect(new Set(seen.map((s) => s.expression)).size).toBeGreaterThan(40);
    const disagreements = seen.filter((s) => !agrees(s.expression, s.base, s.focus, s.env));
    expect(disagreements.map((d) => `${d.base}: ${d.expression}`)).toEqual([]);
  });
});
