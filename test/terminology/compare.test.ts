import type { ValueSet } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { outputs, param, postParameters, putResource, serverApp } from '../helpers/server-app';

/**
 * ValueSet/$compare over the animals code system:
 * animal > (mammal > dog, cat, mammoth), (bird > owl); rock.
 */

let app: FastifyInstance;
let close: () => Promise<void>;

const isA = (code: string) => ({ system: SYSTEM, filter: [{ property: 'concept', op: 'is-a' as const, value: code }] });
const list = (...codes: string[]) => ({ system: SYSTEM, concept: codes.map((code) => ({ code })) });
const vs = (id: string, compose: ValueSet['compose']) => valueSet(id, compose);

async function compare(a: ValueSet, b: ValueSet) {
  const res = await postParameters(
    app,
    '/fhir/R4/ValueSet/$compare',
    param('thisValueSet', a),
    param('otherValueSet', b),
  );
  expect(res.statusCode, res.body).toBe(200);
  return outputs(res.json());
}

beforeAll(async () => {
  ({ app, close } = await serverApp());
  await putResource(app, animals);
  await putResource(app, vs('mammals', { include: [isA('mammal')] }));
});
afterAll(() => close());

describe('ValueSet/$compare from the definitions', () => {
  test('identical definitions are the same, filters in any order', async () => {
    const a = vs('a', {
      include: [{ ...isA('mammal'), filter: [...isA('mammal').filter, { property: 'legs', op: '=', value: '4' }] }],
    });
    const b = vs('b', {
      include: [{ ...isA('mammal'), filter: [{ property: 'legs', op: '=', value: '4' }, ...isA('mammal').filter] }],
    });
    expect(await compare(a, b)).toEqual({
      result: 'same',
      message:
        'The value sets http://example.org/fhir/ValueSet/a|1.0.0 and http://example.org/fhir/ValueSet/b|1.0.0 contain the same codes',
      'performed-expansion': false,
    });
  });

  test('lists of codes are compared as sets, and the codes are named', async () => {
    const out = await compare(
      vs('a', { include: [list('dog', 'cat', 'owl')] }),
      vs('b', { include: [list('owl', 'rock', 'dog')] }),
    );
    expect(out).toMatchObject({
      result: 'overlapping',
      'performed-expansion': false,
      'common-codes': 'dog,owl',
      'extra-codes': 'rock',
      'missing-codes': 'cat',
    });
  });

  test('one branch under the other is a subset, the other way a superset, unrelated branches are disjoint', async () => {
    expect(await compare(vs('a', { include: [isA('mammal')] }), vs('b', { include: [isA('animal')] }))).toMatchObject({
      result: 'subset',
      'performed-expansion': false,
    });
    expect(await compare(vs('a', { include: [isA('animal')] }), vs('b', { include: [isA('mammal')] }))).toMatchObject({
      result: 'superset',
      'performed-expansion': false,
    });
    const disjoint = await compare(vs('a', { include: [isA('mammal')] }), vs('b', { include: [isA('bird')] }));
    expect(disjoint).toMatchObject({
      result: 'disjoint',
      message: expect.stringMatching(/^No shared codes between the value sets/),
    });
  });

  test('whole code systems: the same systems are the same, a system only one side has makes it larger', async () => {
    const other = 'http://hl7.org/fhir/administrative-gender';
    expect(
      await compare(vs('a', { include: [{ system: SYSTEM }] }), vs('b', { include: [{ system: SYSTEM }] })),
    ).toMatchObject({ result: 'same' });
    expect(
      await compare(
        vs('a', { include: [{ system: SYSTEM }, { system: other }] }),
        vs('b', { include: [{ system: SYSTEM }] }),
      ),
    ).toMatchObject({ result: 'superset' });
    expect(
      await compare(vs('a', { include: [{ system: other }] }), vs('b', { include: [{ system: SYSTEM }] })),
    ).toMatchObject({ result: 'disjoint' });
  });
});

describe('ValueSet/$compare by expansion', () => {
  test('a filter against a list is decided by the members, in this value set order', async () => {
    const same = await compare(
      vs('a', { include: [isA('mammal')] }),
      vs('b', { include: [list('cat', 'mammal', 'mammoth', 'dog')] }),
    );
    expect(same).toEqual({ result: 'same', message: expect.any(String), 'performed-expansion': true });
    const subset = await compare(vs('a', { include: [list('dog')] }), vs('b', { include: [isA('mammal')] }));
    expect(subset).toMatchObject({
      result: 'subset',
      'performed-expansion': true,
      'common-codes': 'dog',
      'extra-codes': 'mammal,cat,mammoth',
    });
  });

  test('excludes and imports are expanded', async () => {
    const a = vs('a', { include: [{ system: SYSTEM }], exclude: [list('rock'), isA('bird')] });
    const b = vs('b', { include: [{ valueSet: ['http://example.org/fhir/ValueSet/mammals'] }, list('animal')] });
    expect(await compare(a, b)).toMatchObject({ result: 'same', 'performed-expansion': true });
  });

  test('two empty value sets are empty', async () => {
    const out = await compare(
      vs('a', { include: [list('nope')] }),
      vs('b', {
        include: [
          { ...isA('mammal'), filter: [...isA('mammal').filter, { property: 'code', op: 'regex', value: 'x+' }] },
        ],
      }),
    );
    expect(out).toMatchObject({
      result: 'empty',
      message:
        'Both the value sets http://example.org/fhir/ValueSet/a|1.0.0 and http://example.org/fhir/ValueSet/b|1.0.0 are empty',
    });
  });

  test('an expansion that cannot be done makes the answer indeterminate, not an error', async () => {
    const out = await compare(
      vs('a', {
        include: [
          { system: 'http://snomed.info/sct', filter: [{ property: 'concept', op: 'is-a', value: '404684003' }] },
        ],
      }),
      vs('b', { include: [{ system: 'http://snomed.info/sct', concept: [{ code: '73211009' }] }] }),
    );
    expect(out.result).toBe('indeterminate');
    expect(String(out.message)).toMatch(/^Unable to compare .* This expansion failed: /);
  });

  test('value sets named by url; an unknown one is an error', async () => {
    const res = await postParameters(
      app,
      '/fhir/R4/ValueSet/$compare',
      param('thisUrl', 'http://example.org/fhir/ValueSet/mammals'),
      param('otherUrl', 'http://example.org/fhir/ValueSet/mammals'),
    );
    expect(outputs(res.json())).toMatchObject({ result: 'same', 'performed-expansion': false });
    const unknown = await postParameters(
      app,
      '/fhir/R4/ValueSet/$compare',
      param('thisUrl', 'http://example.org/nope'),
      param('otherUrl', 'http://example.org/fhir/ValueSet/mammals'),
    );
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().resourceType).toBe('OperationOutcome');
  });
});
