import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FHIR, parameters, testApp, type TestApp } from '../helpers/app';

let t: TestApp;
beforeAll(async () => {
  t = await testApp();
  await t.app.inject({
    method: 'PUT',
    url: '/fhir/R4/Patient/p1',
    headers: FHIR,
    payload: { resourceType: 'Patient', id: 'p1' },
  });
});
afterAll(() => t.close());

const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url, headers: { ...FHIR, ...headers }, payload: payload as object });
const get = (url: string, headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url, headers });

function issue(body: string) {
  const outcome = JSON.parse(body);
  expect(outcome.resourceType).toBe('OperationOutcome');
  return outcome.issue[0] as { severity: string; code: string; details: { text: string } };
}

describe('routes come from the registry, at the levels each definition allows', () => {
  test.each([
    ['system', '/fhir/R4/$echo', undefined],
    ['type', '/fhir/R4/Patient/$echo', undefined],
    ['instance', '/fhir/R4/Patient/p1/$echo', 'Patient/p1'],
  ])('$echo at %s level answers with POST and GET', async (level, url, target) => {
    const byPost = await post(url, parameters({ name: 'text', valueString: 'hi' }));
    expect(byPost.statusCode).toBe(200);
    expect(byPost.headers['content-type']).toMatch(/^application\/fhir\+json/);
    const body = byPost.json();
    expect(body.parameter).toContainEqual({ name: 'level', valueCode: level });
    expect(body.parameter).toContainEqual({ name: 'text', valueString: 'hi' });
    if (target) expect(body.parameter).toContainEqual({ name: 'target', valueString: target });
    const byGet = await get(`${url}?text=hi`);
    expect(byGet.statusCode).toBe(200);
    expect(byGet.json()).toEqual(body);
  });

  test('%24 works like $', async () => {
    const res = await get('/fhir/R4/Patient/%24echo?text=x');
    expect(res.statusCode).toBe(200);
    expect(res.json().parameter).toContainEqual({ name: 'level', valueCode: 'type' });
  });

  test('an operation invoked at a level its definition does not allow is refused', async () => {
    const res = await post('/fhir/R4/$make-patient', parameters({ name: 'family', valueString: 'X' }));
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toMatch(/cannot be invoked at the system level/);
    const instance = await post('/fhir/R4/Patient/p1/$make-patient', parameters({ name: 'family', valueString: 'X' }));
    expect(instance.statusCode).toBe(400);
    expect(issue(instance.body).details.text).toMatch(/instance level/);
  });

  test('an operation on a type its definition does not name is unknown there', async () => {
    const res = await post('/fhir/R4/Observation/$echo', parameters());
    expect(res.statusCode).toBe(404);
    expect(issue(res.body).details.text).toMatch(/\$echo is not known for Observation/);
  });

  test.each(['/fhir/R4/$nope', '/fhir/R4/Patient/$nope', '/fhir/R4/Patient/p1/$nope'])(
    'unknown operation %s is 404',
    async (url) => {
      const res = await post(url, parameters());
      expect(res.statusCode).toBe(404);
      const found = issue(res.body);
      expect(found.code).toBe('not-supported');
      expect(found.details.text).toMatch(/Operation \$nope is not known/);
    },
  );

  test('an instance-level call on a missing resource is 404', async () => {
    const res = await post('/fhir/R4/Patient/missing/$echo', parameters());
    expect(res.statusCode).toBe(404);
    expect(issue(res.body).details.text).toBe('Patient/missing is not known');
  });
});

describe('GET follows the seed rule', () => {
  test('GET of an operation that affects state is 405 and changes nothing', async () => {
    const before = t.services.resets;
    const res = await get('/fhir/R4/$reset');
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(issue(res.body).details.text).toMatch(/changes state and must be invoked with POST/);
    expect(t.services.resets).toBe(before);
    const byPost = await post('/fhir/R4/$reset', parameters());
    expect(byPost.statusCode).toBe(200);
    expect(t.services.resets).toBe(before + 1);
  });

  test('GET with a complex-typed parameter is refused, naming it', async () => {
    const res = await get('/fhir/R4/$echo?coding=x');
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toMatch(/'coding' is of type Coding and cannot be given in a GET/);
  });

  test('GET with a parameter made of parts is refused', async () => {
    const res = await get('/fhir/R4/$echo?pair=x');
    expect(res.statusCode).toBe(400);
  });

  test('query values are converted by their declared type', async () => {
    const res = await get(
      '/fhir/R4/$echo?count=42&ratio=0.5&flag=true&when=2024-02-29&system=http://x.org&tag=a&tag=b',
    );
    expect(res.statusCode).toBe(200);
    const p = res.json().parameter;
    expect(p).toContainEqual({ name: 'count', valueInteger: 42 });
    expect(p).toContainEqual({ name: 'ratio', valueDecimal: 0.5 });
    expect(p).toContainEqual({ name: 'flag', valueBoolean: true });
    expect(p).toContainEqual({ name: 'when', valueDate: '2024-02-29' });
    expect(p).toContainEqual({ name: 'system', valueUri: 'http://x.org' });
    expect(p.filter((x: { name: string }) => x.name === 'tag')).toEqual([
      { name: 'tag', valueCode: 'a' },
      { name: 'tag', valueCode: 'b' },
    ]);
  });

  test.each([
    ['count', 'many', 'integer'],
    ['count', '1.5', 'integer'],
    ['ratio', 'x', 'decimal'],
    ['flag', 'yes', 'boolean'],
    ['when', '2024-13-01', 'date'],
    ['system', 'has space', 'uri'],
  ])('a query value that does not parse (%s=%s) is 400', async (name, value, type) => {
    const res = await get(`/fhir/R4/$echo?${name}=${encodeURIComponent(value)}`);
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toBe(`Parameter '${name}' value '${value}' is not a valid ${type}`);
  });

  test('repeating a single-valued query parameter is 400', async () => {
    const res = await get('/fhir/R4/$echo?text=a&text=b');
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toMatch(/'text' may occur at most 1/);
  });
});

describe('POST bodies are checked against the definition', () => {
  test('a missing required parameter is named', async () => {
    const res = await post('/fhir/R4/Patient/$make-patient', parameters());
    expect(res.statusCode).toBe(400);
    const found = issue(res.body);
    expect(found.code).toBe('required');
    expect(found.details.text).toBe("Parameter 'family' is required");
  });

  test('more values than max is 400', async () => {
    const res = await post(
      '/fhir/R4/Patient/$make-patient',
      parameters(
        { name: 'family', valueString: 'F' },
        ...['a', 'b', 'c', 'd'].map((g) => ({ name: 'given', valueString: g })),
      ),
    );
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toBe("Parameter 'given' may occur at most 3 time(s), not 4");
  });

  test('a value[x] of another type is 400 naming both types', async () => {
    const res = await post('/fhir/R4/$echo', parameters({ name: 'count', valueString: '3' }));
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toBe("Parameter 'count' must be of type integer, not string");
    const coding = await post('/fhir/R4/$echo', parameters({ name: 'coding', valueCodeableConcept: {} }));
    expect(issue(coding.body).details.text).toBe("Parameter 'coding' must be of type Coding, not CodeableConcept");
  });

  test('a derived primitive type stands for its base (canonical for uri, code for string)', async () => {
    const res = await post(
      '/fhir/R4/$echo',
      parameters({ name: 'system', valueCanonical: 'http://x.org/cs' }, { name: 'text', valueCode: 'abc' }),
    );
    expect(res.statusCode).toBe(200);
    expect(res.json().parameter).toContainEqual({ name: 'system', valueUri: 'http://x.org/cs' });
  });

  test('a primitive whose JSON value breaks its type is 400', async () => {
    const res = await post('/fhir/R4/$echo', parameters({ name: 'count', valueInteger: 1.5 }));
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toMatch(/'count' value '1.5' is not a valid integer/);
  });

  test('resource parameters take a resource of the declared type', async () => {
    const basic = { resourceType: 'Basic', code: { text: 'note' } };
    const ok = await post('/fhir/R4/$echo', parameters({ name: 'attachment', resource: basic }));
    expect(ok.statusCode).toBe(200);
    expect(ok.json().parameter).toContainEqual({ name: 'attachment', resource: basic });
    // A resource parameter is checked against the R4 definitions for shape; a missing required element is
    // allowed (operations take partial resources: a tx-resource ValueSet without status, for example).
    const partial = await post(
      '/fhir/R4/$echo',
      parameters({ name: 'attachment', resource: { resourceType: 'Basic' } }),
    );
    expect(partial.statusCode).toBe(200);
    const invalid = await post(
      '/fhir/R4/$echo',
      parameters({ name: 'attachment', resource: { resourceType: 'Basic', code: 'note' } }),
    );
    expect(invalid.statusCode).toBe(400);
    expect(issue(invalid.body).details.text).toMatch(/Basic\.code/);
    const wrong = await post('/fhir/R4/$echo', parameters({ name: 'patient', resource: { resourceType: 'Basic' } }));
    expect(wrong.statusCode).toBe(400);
    expect(issue(wrong.body).details.text).toBe("Parameter 'patient' must be of type Patient, not Basic");
    const value = await post('/fhir/R4/$echo', parameters({ name: 'patient', valueString: 'x' }));
    expect(issue(value.body).details.text).toBe("Parameter 'patient' must be of type Patient, not string");
  });

  test('parts are read and checked recursively, and written back as parts', async () => {
    const res = await post(
      '/fhir/R4/$echo',
      parameters(
        {
          name: 'pair',
          part: [
            { name: 'key', valueString: 'a' },
            { name: 'weight', valueInteger: 2 },
          ],
        },
        { name: 'pair', part: [{ name: 'key', valueString: 'b' }] },
      ),
    );
    expect(res.statusCode).toBe(200);
    const pairs = res.json().parameter.filter((p: { name: string }) => p.name === 'pair');
    expect(pairs).toEqual([
      {
        name: 'pair',
        part: [
          { name: 'key', valueString: 'a' },
          { name: 'weight', valueInteger: 2 },
        ],
      },
      { name: 'pair', part: [{ name: 'key', valueString: 'b' }] },
    ]);
    const missing = await post(
      '/fhir/R4/$echo',
      parameters({ name: 'pair', part: [{ name: 'weight', valueInteger: 2 }] }),
    );
    expect(missing.statusCode).toBe(400);
    expect(issue(missing.body).details.text).toBe("Parameter 'pair.key' is required");
    const flat = await post('/fhir/R4/$echo', parameters({ name: 'pair', valueString: 'x' }));
    expect(issue(flat.body).details.text).toBe("Parameter 'pair' must be of type parts, not string");
  });

  test('a parameter with two values or none is 400', async () => {
    const two = await post('/fhir/R4/$echo', parameters({ name: 'text', valueString: 'a', valueCode: 'b' }));
    expect(two.statusCode).toBe(400);
    const none = await post('/fhir/R4/$echo', parameters({ name: 'text' }));
    expect(none.statusCode).toBe(400);
    expect(issue(none.body).details.text).toBe("Parameter 'text': has no value, resource or part");
  });

  test('unknown names are ignored, unless the client asks for strict handling', async () => {
    const body = parameters({ name: 'nonsense', valueString: 'x' });
    expect((await post('/fhir/R4/$echo', body)).statusCode).toBe(200);
    const strict = await post('/fhir/R4/$echo', body, { prefer: 'handling=strict' });
    expect(strict.statusCode).toBe(400);
    expect(issue(strict.body).details.text).toMatch(/'nonsense' is not defined for \$echo/);
    const strictGet = await get('/fhir/R4/$echo?nonsense=1', { prefer: 'handling=strict' });
    expect(strictGet.statusCode).toBe(400);
  });

  test('a body that is not Parameters is refused', async () => {
    const res = await post('/fhir/R4/$echo', { resourceType: 'Patient' });
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).details.text).toBe(
      'An operation invoked with POST takes a Parameters resource, not Patient',
    );
  });

  test('application/json is accepted like application/fhir+json', async () => {
    const res = await post('/fhir/R4/$echo', parameters({ name: 'text', valueString: 'j' }), {
      'content-type': 'application/json',
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('outputs', () => {
  test('several values of one name are several entries, never an array in one value', async () => {
    const res = await post(
      '/fhir/R4/$echo',
      parameters({ name: 'tag', valueCode: 'x' }, { name: 'tag', valueCode: 'y' }),
    );
    const tags = res.json().parameter.filter((p: { name: string }) => p.name === 'tag');
    expect(tags).toEqual([
      { name: 'tag', valueCode: 'x' },
      { name: 'tag', valueCode: 'y' },
    ]);
  });

  test('a single required `return` output is the body itself', async () => {
    const res = await post('/fhir/R4/Patient/$make-patient', parameters({ name: 'family', valueString: 'Chalmers' }));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ resourceType: 'Patient', name: [{ family: 'Chalmers' }] });
  });

  test.each(['missing-required', 'wrong-type', 'undeclared', 'list-for-single'])(
    'a handler output that breaks its definition (%s) is a 500 with a logged reason',
    async (how) => {
      const res = await post('/fhir/R4/$misbehave', parameters({ name: 'how', valueCode: how }));
      expect(res.statusCode).toBe(500);
      const found = issue(res.body);
      expect(found.code).toBe('exception');
      expect(found.details.text).toBe('Operation $misbehave produced an answer that breaks its definition');
    },
  );

  test('an exception in a handler is a 500 without internals', async () => {
    const res = await post('/fhir/R4/$misbehave', parameters({ name: 'how', valueCode: 'throw' }));
    expect(res.statusCode).toBe(500);
    expect(res.body).not.toMatch(/secret|handler\.ts|\/srv/);
    expect(issue(res.body).details.text).toBe('An unexpected error occurred; it has been logged');
  });
});
