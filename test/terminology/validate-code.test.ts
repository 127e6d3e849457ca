import type { CodeSystem, ValueSet } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, animalsV1, SYSTEM, valueSet } from '../fixtures/terminology';
import { issueTexts, outputs, param, postParameters, putResource, serverApp } from '../helpers/server-app';

let app: FastifyInstance;
let close: () => Promise<void>;

const put = (resource: CodeSystem | ValueSet) => putResource(app, resource);
const post = (url: string, ...parameter: Record<string, unknown>[]) => postParameters(app, url, ...parameter);
const vsUrl = (id: string) => `http://example.org/fhir/ValueSet/${id}`;

/** Validates a code of the animals system against a stored value set; answers the outputs. */
async function check(vsId: string, code: string, ...extra: Record<string, unknown>[]) {
  const res = await post(
    '/fhir/R4/ValueSet/$validate-code',
    param('url', vsUrl(vsId)),
    param('system', SYSTEM),
    param('code', code),
    ...extra,
  );
  expect(res.statusCode, res.body).toBe(200);
  return { out: outputs(res.json()), body: res.json() };
}

beforeAll(async () => {
  ({ app, close } = await serverApp());
  await put(animals);
  await put(animalsV1);
  await put(valueSet('all', { include: [{ system: SYSTEM }] }));
});
afterAll(() => close());

describe('input forms, GET and POST, type and instance level', () => {
  const forms = {
    'code+system': (code: string) => [param('system', SYSTEM), param('code', code)],
    coding: (code: string) => [param('coding', { system: SYSTEM, code })],
    codeableConcept: (code: string) => [param('codeableConcept', { coding: [{ system: SYSTEM, code }] })],
  };
  const cases = Object.keys(forms).flatMap((form) =>
    ['type', 'instance'].flatMap((level) =>
      ['POST', 'GET'].map((method) => ({ form: form as keyof typeof forms, level, method })),
    ),
  );

  test.each(cases)('$form by $method at $level level', async ({ form, level, method }) => {
    const path = level === 'type' ? '/fhir/R4/ValueSet/$validate-code' : '/fhir/R4/ValueSet/all/$validate-code';
    const urlParam = level === 'type' ? [param('url', vsUrl('all'))] : [];
    if (method === 'POST') {
      const res = await post(path, ...urlParam, ...forms[form]('dog'));
      expect(res.statusCode).toBe(200);
      const out = outputs(res.json());
      expect(out).toMatchObject({ result: true, code: 'dog', system: SYSTEM, display: 'Dog', version: '2.0.0' });
      if (form === 'codeableConcept')
        expect(out.codeableConcept).toEqual({ coding: [{ system: SYSTEM, code: 'dog' }] });
      const miss = await post(path, ...urlParam, ...forms[form]('unicorn'));
      expect(outputs(miss.json()).result).toBe(false);
      return;
    }
    const query = new URLSearchParams(level === 'type' ? { url: vsUrl('all') } : {});
    if (form === 'code+system') {
      query.set('system', SYSTEM);
      query.set('code', 'dog');
      const res = await app.inject({ method: 'GET', url: `${path}?${query}` });
      expect(res.statusCode).toBe(200);
      expect(outputs(res.json())).toMatchObject({ result: true, code: 'dog', display: 'Dog' });
    } else {
      // Complex types cannot travel in a query string (the seed rule): a clear 400.
      query.set(form, `${SYSTEM}|dog`);
      const res = await app.inject({ method: 'GET', url: `${path}?${query}` });
      expect(res.statusCode).toBe(400);
      expect(res.json().issue[0].details.text).toContain(`'${form}' is of type`);
    }
  });

  test('the bundled R4 content is there from the first request', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/$validate-code?url=http://hl7.org/fhir/ValueSet/administrative-gender&system=http://hl7.org/fhir/administrative-gender&code=female',
    });
    expect(outputs(res.json())).toMatchObject({ result: true, display: 'Female', version: '4.0.1' });
    const instance = await app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/administrative-gender/$validate-code?system=http://hl7.org/fhir/administrative-gender&code=banana',
    });
    expect(outputs(instance.json()).result).toBe(false);
  });
});

/** An R5 filter operator written the R4 way: no `op`, the operator in an extension on it. */
function r5Filter(op: string, value: string) {
  const ext = {
    url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-ValueSet.compose.include.filter.op',
    valueCode: op,
  };
  return { property: 'concept', _op: { extension: [ext] }, value } as unknown as NonNullable<
    NonNullable<ValueSet['compose']>['include'][number]['filter']
  >[number];
}

describe('compose semantics', () => {
  const composes: [string, ValueSet['compose'], string[], string[]][] = [
    ['whole system', { include: [{ system: SYSTEM }] }, ['dog', 'rock', 'animal'], ['unicorn']],
    [
      'concept list',
      { include: [{ system: SYSTEM, concept: [{ code: 'dog' }, { code: 'owl' }] }] },
      ['dog', 'owl'],
      ['cat'],
    ],
    [
      'is-a',
      { include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }] },
      ['mammal', 'dog'],
      ['owl', 'animal'],
    ],
    [
      'descendent-of',
      { include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'descendent-of', value: 'mammal' }] }] },
      ['dog'],
      ['mammal'],
    ],
    [
      'is-not-a',
      { include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'is-not-a', value: 'mammal' }] }] },
      ['owl', 'rock'],
      ['dog'],
    ],
    [
      'generalizes',
      { include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'generalizes', value: 'dog' }] }] },
      ['dog', 'mammal', 'animal'],
      ['cat'],
    ],
    [
      'child-of (R5, as the R4 extension)',
      { include: [{ system: SYSTEM, filter: [r5Filter('child-of', 'animal')] }] },
      ['mammal', 'bird'],
      ['dog'],
    ],
    [
      'descendent-leaf (R5, as the R4 extension)',
      { include: [{ system: SYSTEM, filter: [r5Filter('descendent-leaf', 'animal')] }] },
      ['dog', 'owl'],
      ['mammal'],
    ],
    [
      '= on a property',
      { include: [{ system: SYSTEM, filter: [{ property: 'legs', op: '=', value: '4' }] }] },
      ['dog', 'cat'],
      ['owl'],
    ],
    ['in', { include: [{ system: SYSTEM, filter: [{ property: 'legs', op: 'in', value: '2,3' }] }] }, ['owl'], ['dog']],
    [
      'not-in',
      { include: [{ system: SYSTEM, filter: [{ property: 'legs', op: 'not-in', value: '4' }] }] },
      ['owl', 'rock'],
      ['cat'],
    ],
    [
      'exists',
      { include: [{ system: SYSTEM, filter: [{ property: 'legs', op: 'exists', value: 'true' }] }] },
      ['owl', 'cat'],
      ['rock'],
    ],
    [
      'regex on the code',
      { include: [{ system: SYSTEM, filter: [{ property: 'code', op: 'regex', value: '[a-z]{3}' }] }] },
      ['dog', 'cat', 'owl'],
      ['bird', 'mammal'],
    ],
    [
      'two filters (both must hold)',
      {
        include: [
          {
            system: SYSTEM,
            filter: [
              { property: 'concept', op: 'is-a', value: 'mammal' },
              { property: 'legs', op: '=', value: '4' },
            ],
          },
        ],
      },
      ['dog'],
      ['mammoth'],
    ],
    [
      'exclude',
      {
        include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }],
        exclude: [{ system: SYSTEM, concept: [{ code: 'cat' }] }],
      },
      ['dog'],
      ['cat'],
    ],
    [
      'import (intersection with a filter)',
      {
        include: [
          { valueSet: [vsUrl('all')], system: SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: 'bird' }] },
        ],
      },
      ['owl'],
      ['dog'],
    ],
    ['import only', { include: [{ valueSet: [vsUrl('all')] }] }, ['rock'], ['unicorn']],
    ['version on the include', { include: [{ system: SYSTEM, version: '1.0.0' }] }, ['dog'], ['cat']],
  ];

  test.each(composes)('%s', async (name, compose, members, nonMembers) => {
    const id = `c-${name.replace(/[^a-z]+/g, '-')}`.slice(0, 60);
    await put(valueSet(id, compose));
    for (const code of members) expect((await check(id, code)).out.result, `${code} in ${name}`).toBe(true);
    for (const code of nonMembers) {
      const { out } = await check(id, code);
      expect(out.result, `${code} not in ${name}`).toBe(false);
      expect(String(out.message)).toContain(`was not found in the value set '${vsUrl(id)}|1.0.0'`);
    }
  });

  test('a value set defined by its expansion only', async () => {
    await put({
      ...valueSet('expanded', undefined),
      expansion: { timestamp: '2024-01-01T00:00:00Z', contains: [{ system: SYSTEM, code: 'cat', display: 'Cat' }] },
    });
    expect((await check('expanded', 'cat')).out.result).toBe(true);
    expect((await check('expanded', 'dog')).out.result).toBe(false);
  });

  test('the implicit value set of a code system (CodeSystem.valueSet)', async () => {
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', animals.valueSet),
      param('system', SYSTEM),
      param('code', 'owl'),
    );
    expect(outputs(res.json()).result).toBe(true);
  });
});

describe('display, abstract, inactive and versions', () => {
  test('a wrong display is an error naming the valid ones; lenient-display-validation makes it a warning', async () => {
    const wrong = await check('all', 'dog', param('display', 'Doggo'));
    expect(wrong.out.result).toBe(false);
    expect(wrong.out.message).toBe(
      `Wrong Display Name 'Doggo' for ${SYSTEM}#dog. Valid display is one of 2 choices: 'Dog' or 'Hund' (de) (for the language(s) '--')`,
    );
    const lenient = await check('all', 'dog', param('display', 'Doggo'), param('lenient-display-validation', true));
    expect(lenient.out.result).toBe(true);
    expect((lenient.out.issues as { issue: { severity: string }[] }).issue[0].severity).toBe('warning');
    expect((await check('all', 'dog', param('display', 'dog'))).out.result).toBe(true);
  });

  test("issues say where they apply with `expression` only, never R4's deprecated `location`", async () => {
    const wrong = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('all')),
      param('coding', { system: SYSTEM, code: 'unicorn', display: 'x' }),
    );
    const issues = (outputs(wrong.json()).issues as { issue: Record<string, unknown>[] }).issue;
    expect(issues.length).toBeGreaterThan(0);
    for (const issue of issues) {
      expect(issue).not.toHaveProperty('location');
      expect(issue.expression).toEqual([expect.stringMatching(/^Coding\./)]);
    }
  });

  test('displayLanguage chooses the display returned and the displays accepted', async () => {
    const de = await check('all', 'dog', { name: 'displayLanguage', valueCode: 'de' });
    expect(de.out.display).toBe('Hund');
    const hund = await check('all', 'dog', param('display', 'Hund'), { name: 'displayLanguage', valueCode: 'de' });
    expect(hund.out.result).toBe(true);
    const bad = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('all')),
      param('system', SYSTEM),
      param('code', 'dog'),
      { name: 'displayLanguage', valueCode: '-' },
    );
    expect(bad.statusCode).toBe(400);
  });

  test('abstract codes are valid unless abstract=false', async () => {
    expect((await check('all', 'animal')).out.result).toBe(true);
    const refused = await check('all', 'animal', param('abstract', false));
    expect(refused.out.result).toBe(false);
    expect(issueTexts(refused.body)).toContain(`Code '${SYSTEM}#animal' is abstract, and not allowed in this context`);
  });

  test('an inactive code is valid with a warning, and refused with activeOnly or compose.inactive=false', async () => {
    const plain = await check('all', 'mammoth');
    expect(plain.out).toMatchObject({ result: true, inactive: true, status: 'retired' });
    expect(plain.out.message).toBe(
      "The concept 'mammoth' has a status of retired and inactive and its use should be reviewed",
    );
    expect((await check('all', 'mammoth', param('activeOnly', true))).out.result).toBe(false);
    await put(valueSet('active-only', { inactive: false, include: [{ system: SYSTEM }] }));
    expect((await check('active-only', 'mammoth')).out.result).toBe(false);
    expect((await check('active-only', 'dog')).out.result).toBe(true);
  });

  test('versions: the include pins one, a coding may name one, system-version supplies one', async () => {
    await put(valueSet('v1', { include: [{ system: SYSTEM, version: '1.0.0' }] }));
    expect((await check('v1', 'dog')).out).toMatchObject({ result: true, display: 'Dog (old)', version: '1.0.0' });
    const mismatch = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('v1')),
      param('coding', { system: SYSTEM, version: '2.0.0', code: 'dog' }),
    );
    expect(outputs(mismatch.json()).result).toBe(false);
    expect(issueTexts(mismatch.json())).toContain(
      `The code system '${SYSTEM}' version '1.0.0' in the ValueSet include is different to the one in the value ('2.0.0')`,
    );
    const defaulted = await check('all', 'dog', { name: 'system-version', valueCanonical: `${SYSTEM}|1.0.0` });
    expect(defaulted.out).toMatchObject({ result: true, version: '1.0.0' });
    const unknown = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('all')),
      param('coding', { system: SYSTEM, version: '9.9.9', code: 'dog' }),
    );
    expect(issueTexts(unknown.json()).join('\n')).toContain(
      `version '9.9.9' could not be found, so the code cannot be validated. Valid versions: 1.0.0 or 2.0.0`,
    );
  });
});

describe('equivalent requests answer alike', () => {
  const actCode = 'http://terminology.hl7.org/CodeSystem/v3-ActCode';
  const draftNote = `Reference to draft CodeSystem ${actCode}|2018-08-12`;
  const against = async (compose: ValueSet['compose'], extra: Partial<ValueSet> = {}) => {
    const vs = {
      resourceType: 'ValueSet',
      url: 'http://example.org/fhir/ValueSet/act',
      status: 'active',
      compose,
      ...extra,
    } satisfies ValueSet;
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('valueSet', vs),
      param('system', actCode),
      param('code', 'CASH'),
    );
    return { status: res.statusCode, out: outputs(res.json()), texts: issueTexts(res.json()) };
  };

  test('a draft code system is noted alike from a whole-system and an is-a value set, and from neither when the value set is draft', async () => {
    const whole = await against({ include: [{ system: actCode }] });
    const isA = await against({
      include: [{ system: actCode, filter: [{ property: 'concept', op: 'is-a', value: '_ActAccountCode' }] }],
    });
    expect(whole.out.result).toBe(true);
    expect(isA.out.result).toBe(true);
    expect(whole.texts).toEqual([draftNote]);
    expect(isA.texts).toEqual([draftNote]);
    // The bundled v3-ActCode value set is itself draft (standards-status): nothing to note.
    const bundled = await app.inject({
      method: 'GET',
      url: `/fhir/R4/ValueSet/$validate-code?url=http://terminology.hl7.org/ValueSet/v3-ActCode&system=${actCode}&code=CASH`,
    });
    expect(issueTexts(bundled.json())).toEqual([]);
    const draft = await against({ include: [{ system: actCode }] }, { status: 'draft' });
    expect(draft.texts).toEqual([]);
  });

  test('a filter the code system declares only in words (example-filter) is answered, never refused', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/$validate-code?url=http://hl7.org/fhir/ValueSet/example-filter&system=http://hl7.org/fhir/CodeSystem/example&code=chol-mmol',
    });
    expect(res.statusCode).toBe(200);
    expect(outputs(res.json()).result).toBe(false);
    const expanded = await app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/$expand?url=http://hl7.org/fhir/ValueSet/example-filter',
    });
    expect(expanded.statusCode).toBe(200);
    expect(expanded.json().expansion.total).toBe(0);
    // A filter the code system does not declare at all is still not understood: 400.
    const unknown = await against({
      include: [{ system: actCode, filter: [{ property: 'no-such-filter', op: '=', value: 'x' }] }],
    });
    expect(unknown.status).toBe(400);
  });
});

describe('tx-resource, updates and errors', () => {
  test('tx-resource resources are used for that request alone', async () => {
    const cs = {
      ...animals,
      id: 'temp',
      url: 'http://example.org/fhir/CodeSystem/temp',
      valueSet: undefined,
      concept: [{ code: 'x', display: 'X' }],
    } satisfies CodeSystem;
    const vs = { ...valueSet('temp', { include: [{ system: cs.url }] }) };
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vs.url),
      param('system', cs.url),
      param('code', 'x'),
      param('tx-resource', cs),
      param('tx-resource', vs),
    );
    expect(outputs(res.json())).toMatchObject({ result: true, display: 'X' });
    const after = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vs.url),
      param('system', cs.url),
      param('code', 'x'),
    );
    expect(after.statusCode).toBe(400);
  });

  test('an update to a stored value set takes effect on the next request', async () => {
    await put(valueSet('evolving', { include: [{ system: SYSTEM, concept: [{ code: 'dog' }] }] }));
    expect((await check('evolving', 'cat')).out.result).toBe(false);
    await put(valueSet('evolving', { include: [{ system: SYSTEM, concept: [{ code: 'dog' }, { code: 'cat' }] }] }));
    expect((await check('evolving', 'cat')).out.result).toBe(true);
    await app.inject({ method: 'DELETE', url: '/fhir/R4/ValueSet/evolving' });
    const gone = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('evolving')),
      param('system', SYSTEM),
      param('code', 'cat'),
    );
    expect(gone.statusCode).toBe(400);
  });

  test('an update to a code system takes effect on the next request', async () => {
    await put({
      ...animals,
      id: 'plants',
      url: 'http://example.org/fhir/CodeSystem/plants',
      valueSet: undefined,
      concept: [{ code: 'fern', display: 'Fern' }],
    });
    await put(valueSet('plants', { include: [{ system: 'http://example.org/fhir/CodeSystem/plants' }] }));
    const ask = () =>
      post(
        '/fhir/R4/ValueSet/$validate-code',
        param('url', vsUrl('plants')),
        param('system', 'http://example.org/fhir/CodeSystem/plants'),
        param('code', 'moss'),
      );
    expect(outputs((await ask()).json()).result).toBe(false);
    await put({
      ...animals,
      id: 'plants',
      url: 'http://example.org/fhir/CodeSystem/plants',
      valueSet: undefined,
      concept: [
        { code: 'fern', display: 'Fern' },
        { code: 'moss', display: 'Moss' },
      ],
    });
    expect(outputs((await ask()).json()).result).toBe(true);
  });

  test('a ValueSet url nobody knows is 400 invalid, naming the url', async () => {
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('nope')),
      param('system', SYSTEM),
      param('code', 'dog'),
    );
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0]).toMatchObject({ severity: 'error', code: 'invalid' });
    expect(res.json().issue[0].details.text).toBe(
      `A definition for the value Set '${vsUrl('nope')}' could not be found`,
    );
  });

  test('a known url at an unknown version is 404 not-found', async () => {
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('all')),
      param('valueSetVersion', '7.0.0'),
      param('system', SYSTEM),
      param('code', 'dog'),
    );
    expect(res.statusCode).toBe(404);
    expect(res.json().issue[0]).toMatchObject({
      code: 'not-found',
      details: { text: `A definition for the value Set '${vsUrl('all')}|7.0.0' could not be found` },
    });
  });

  test('an explicitly requested version that does not exist is 404, even where a code system stands for the url', async () => {
    const gender = 'http://hl7.org/fhir/ValueSet/administrative-gender';
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', `${gender}|9.9`),
      param('system', 'http://hl7.org/fhir/administrative-gender'),
      param('code', 'female'),
    );
    expect(res.statusCode).toBe(404);
    expect(res.json().issue[0]).toMatchObject({
      code: 'not-found',
      details: { text: `A definition for the value Set '${gender}|9.9' could not be found` },
    });
    // The implicit value set of a stored code system, at a version it does not have.
    const implicit = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', `${animals.valueSet}|7.7.7`),
      param('system', SYSTEM),
      param('code', 'dog'),
    );
    expect(implicit.statusCode).toBe(404);
    const known = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', `${animals.valueSet}|2.0.0`),
      param('system', SYSTEM),
      param('code', 'dog'),
    );
    expect(outputs(known.json()).result).toBe(true);
  });

  test('a codeableConcept with text only is no input form: 400, like nothing to validate', async () => {
    const textOnly = await post('/fhir/R4/ValueSet/$validate-code', param('url', vsUrl('all')), {
      name: 'codeableConcept',
      valueCodeableConcept: { text: 'a dog' },
    });
    expect(textOnly.statusCode).toBe(400);
    expect(textOnly.json().issue[0].details.text).toContain('Unable to find code to validate');
    // An empty coding list is not even a valid CodeableConcept (R4 JSON has no empty arrays).
    const empty = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('all')),
      param('codeableConcept', { text: 'a dog', coding: [] }),
    );
    expect(empty.statusCode).toBe(400);
    const inSystem = await post('/fhir/R4/CodeSystem/$validate-code', param('url', SYSTEM), {
      name: 'codeableConcept',
      valueCodeableConcept: { text: 'a dog' },
    });
    expect(inSystem.statusCode).toBe(400);
  });

  test('nothing to validate is 400; no value set outside the instance level is 400; an unknown instance is 404', async () => {
    const nothing = await post('/fhir/R4/ValueSet/$validate-code', param('url', vsUrl('all')));
    expect(nothing.statusCode).toBe(400);
    const codeOnly = await post('/fhir/R4/ValueSet/$validate-code', param('url', vsUrl('all')), param('code', 'dog'));
    expect(codeOnly.statusCode).toBe(400);
    const noVs = await post('/fhir/R4/ValueSet/$validate-code', param('system', SYSTEM), param('code', 'dog'));
    expect(noVs.statusCode).toBe(400);
    const missing = await post(
      '/fhir/R4/ValueSet/does-not-exist/$validate-code',
      param('system', SYSTEM),
      param('code', 'dog'),
    );
    expect(missing.statusCode).toBe(404);
  });

  test('an unknown code system makes the answer false and names the system', async () => {
    const { out } = await (async () => {
      const res = await post(
        '/fhir/R4/ValueSet/$validate-code',
        param('url', vsUrl('all')),
        param('system', 'http://example.org/unknown'),
        param('code', 'dog'),
      );
      return { out: outputs(res.json()) };
    })();
    expect(out.result).toBe(false);
    expect(out['x-unknown-system']).toBe('http://example.org/unknown');
  });

  test('a hostile regex in a stored value set answers promptly (RE2 semantics, no backtracking)', async () => {
    const long = 'a'.repeat(5000);
    await put({
      ...animals,
      id: 'regexy',
      url: 'http://example.org/fhir/CodeSystem/regexy',
      valueSet: undefined,
      concept: [
        { code: `${long}!`, display: 'Evil' },
        { code: long, display: 'Fine' },
      ],
    });
    await put(
      valueSet('hostile', {
        include: [
          {
            system: 'http://example.org/fhir/CodeSystem/regexy',
            filter: [{ property: 'code', op: 'regex', value: '(a+)+$' }],
          },
        ],
      }),
    );
    // A backtracking engine needs longer than the age of the universe here (the test's timeout
    // ends it); RE2 needs milliseconds.
    const res = await post(
      '/fhir/R4/ValueSet/$validate-code',
      param('url', vsUrl('hostile')),
      param('system', 'http://example.org/fhir/CodeSystem/regexy'),
      param('code', `${long}!`),
    );
    expect(outputs(res.json()).result).toBe(false);
  });
});
