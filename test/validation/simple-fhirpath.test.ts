import { createRequire } from 'node:module';
import { describe, expect, test } from 'vitest';
import type * as FhirPath from 'fhirpath';
import { compileSimple } from '../../src/validation/simple-fhirpath';
import { ResourceValidator } from '../../src/validation/validator';
import { clinicalExamples, readExample } from './corpus';

/**
 * The small invariant evaluator must answer as HL7's FHIRPath engine does (it stands in for it).
 * The engine is the oracle: a table of expressions over focuses chosen for their edges (empty
 * collections in the three-valued logic, primitives with only an extension, choice names), and the
 * invariants that real examples make it evaluate.
 */

const require = createRequire(import.meta.url);
const fhirpath = require('fhirpath') as typeof FhirPath;
const model = require('fhirpath/fhir-context/r4') as FhirPath.Model;

/** The engine's answer as an invariant reads it: undefined (empty), true or false. */
function engine(expression: string, base: string, focus: unknown, env: Record<string, unknown> = {}): boolean | undefined {
  const result = fhirpath.evaluate(focus as never, { base, expression }, env as never, model) as unknown[];
  if (result.length === 0) return undefined;
  return result.length === 1 && typeof result[0] === 'boolean' ? result[0] : true;
}

function simple(expression: string, focus: unknown): boolean | undefined | 'engine' {
  const compiled = compileSimple(expression);
  if (!compiled) throw new Error(`not in the subset: ${expression}`);
  return compiled(focus);
}

/** Its answer agrees with the engine's, or it left the question to the engine. */
function agrees(expression: string, base: string, focus: unknown, env?: Record<string, unknown>): boolean {
  const mine = simple(expression, focus);
  return mine === 'engine' || mine === engine(expression, base, focus, env);
}

const PERIOD_FOCUSES = [{}, { start: '2020' }, { end: '2020' }, { start: '2020', end: '2021' }, { _start: { extension: [{ url: 'x', valueString: 'y' }] } }];

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
  ])('%s', (expression, base) => {
    for (const focus of PERIOD_FOCUSES) expect(agrees(expression, base, focus), JSON.stringify(focus)).toBe(true);
  });

  test.each([
    ["name.where(use = 'official').exists()"],
    ["name.all(family.exists() or given.exists())"],
    ["name.exists(text.exists())"],
    ['name.given.count() = 2'],
    ['deceased.exists() and multipleBirth.empty()'],
    ["telecom.where(system = 'email').value.all($this.contains('@'))"],
  ])('%s', (expression) => {
    const focuses = [
      { resourceType: 'Patient' },
      { resourceType: 'Patient', name: [{ use: 'official', family: 'a' }, { given: ['b', 'c'] }] },
      { resourceType: 'Patient', name: [{ text: 'x' }], deceasedBoolean: true },
      { resourceType: 'Patient', telecom: [{ system: 'email', value: 'a@b' }, { system: 'email', value: 'ab' }], multipleBirthInteger: 2 },
    ];
    for (const focus of focuses) expect(agrees(expression, 'Patient', focus), JSON.stringify(focus)).toBe(true);
    // These shapes are the subset's own: it answers them itself.
    expect(simple(expression, focuses[1])).not.toBe('engine');
  });

  test('expressions outside the subset are left to the engine', () => {
    for (const expression of ["%resource.id.exists()", 'start <= end', "descendants().where(reference = '#').exists()", 'Patient.name.exists()', "name.matches('(?=a)b')"]) {
      const compiled = compileSimple(expression);
      expect(compiled === undefined || compiled({ name: 'x' }) === 'engine', expression).toBe(true);
    }
  });

  test('every invariant the examples make it evaluate, answered as the engine answers', async () => {
    const validator = new ResourceValidator();
    const seen: { expression: string; base: string; focus: unknown; env: Record<string, unknown> }[] = [];
    const original = validator.invariants.check.bind(validator.invariants);
    validator.invariants.check = (expression, focus, base, env) => {
      if (compileSimple(expression)) seen.push({ expression, base, focus, env: { resource: env.resource, rootResource: env.rootResource } });
      return original(expression, focus, base, env);
    };
    // Every tenth example: enough for every shape of invariant, quick enough for the fast suite.
    const sample = clinicalExamples().filter((e, i) => e.size < 1_000_000 && i % 10 === 0);
    for (const { file } of sample) await validator.validate(readExample(file), { deadline: Date.now() + 60_000, project: 'default' });
    expect(new Set(seen.map((s) => s.expression)).size).toBeGreaterThan(40);
    const disagreements = seen.filter((s) => !agrees(s.expression, s.base, s.focus, s.env));
    expect(disagreements.map((d) => `${d.base}: ${d.expression}`)).toEqual([]);
  });
});
