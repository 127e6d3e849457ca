import type { CodeSystem, ValueSet, ValueSetExpansionContains } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { FHIR_JSON, param, postParameters, putResource, serverApp } from '../helpers/server-app';

let app: FastifyInstance;
let close: () => Promise<void>;

const put = (resource: CodeSystem | ValueSet) => putResource(app, resource);
const post = (url: string, ...parameter: Record<string, unknown>[]) => postParameters(app, url, ...parameter);
const vsUrl = (id: string) => `http://example.org/fhir/ValueSet/${id}`;
const int = (name: string, value: number) => ({ name, valueInteger: value });

const codes = (contains: ValueSetExpansionContains[] | undefined): string[] =>
  (contains ?? []).flatMap((c) => [c.code ?? '', ...codes(c.contains)]);

async function expand(...parameter: Record<string, unknown>[]): Promise<ValueSet> {
  const res = await post('/fhir/R4/ValueSet/$expand', ...parameter);
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toContain('application/fhir+json');
  return res.json() as ValueSet;
}

const ALL_ANIMALS = ['animal', 'mammal', 'dog', 'cat', 'mammoth', 'bird', 'owl', 'rock'];

beforeAll(async () => {
  ({ app, close } = await serverApp({ expansionLimit: 50 }));
  await put(animals);
  await put(valueSet('all', { include: [{ system: SYSTEM }] }));
  await put(
    valueSet('mammals', {
      include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }],
    }),
  );
});
afterAll(() => close());

describe('input forms, GET and POST, type and instance level', () => {
  test('url at type level by POST returns the ValueSet itself (return convention)', async () => {
    const vs = await expand(param('url', vsUrl('all')));
    expect(vs.resourceType).toBe('ValueSet');
    expect(vs.url).toBe(vsUrl('all'));
    expect(vs.expansion?.total).toBe(8);
    expect(codes(vs.expansion?.contains).sort()).toEqual([...ALL_ANIMALS].sort());
    expect(vs.expansion?.parameter).toContainEqual({ name: 'used-codesystem', valueUri: `${SYSTEM}|2.0.0` });
  });

  test('url by GET at type level', async () => {
    const res = await app.inject({
      method: 'GET',
      url: `/fhir/R4/ValueSet/$expand?url=${encodeURIComponent(vsUrl('mammals'))}`,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(codes((res.json() as ValueSet).expansion?.contains).sort()).toEqual(['cat', 'dog', 'mammal', 'mammoth']);
  });

  test('instance level by GET and POST', async () => {
    const get = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/mammals/$expand?count=2' });
    expect(get.statusCode, get.body).toBe(200);
    expect((get.json() as ValueSet).expansion?.contains).toHaveLength(2);
    const viaPost = await post('/fhir/R4/ValueSet/mammals/$expand', int('count', 2));
    expect(viaPost.statusCode).toBe(200);
    expect((viaPost.json() as ValueSet).expansion?.total).toBe(4);
  });

  test('valueSet given inline, never stored', async () => {
    const inline = valueSet('inline', {
      include: [{ system: SYSTEM, concept: [{ code: 'dog' }, { code: 'owl', display: 'Eule' }] }],
    });
    const vs = await expand(param('valueSet', inline));
    expect(vs.expansion?.contains).toEqual([
      { system: SYSTEM, code: 'dog', display: 'Dog' },
      { system: SYSTEM, code: 'owl', display: 'Eule' },
    ]);
    const stored = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/inline' });
    expect(stored.statusCode).toBe(404);
  });

  test('hierarchical where the code system allows it, flat when asked', async () => {
    const nested = await expand(param('url', vsUrl('all')));
    const animal = nested.expansion?.contains?.find((c) => c.code === 'animal');
    expect(animal?.contains?.map((c) => c.code)).toEqual(['mammal', 'bird']);
    const flat = await expand(param('url', vsUrl('all')), param('excludeNested', true));
    expect(flat.expansion?.contains?.every((c) => c.contains === undefined)).toBe(true);
    expect(flat.expansion?.contains).toHaveLength(8);
  });

  test('text filter, activeOnly, designations and properties', async () => {
    const filtered = await expand(param('url', vsUrl('all')), param('filter', 'ow'));
    expect(codes(filtered.expansion?.contains)).toEqual(['owl']);
    const active = await expand(param('url', vsUrl('all')), param('activeOnly', true));
    expect(codes(active.expansion?.contains)).not.toContain('mammoth');
    const withDesignations = await expand(
      param('url', vsUrl('mammals')),
      param('includeDesignations', true),
      param('excludeNested', true),
    );
    const dog = withDesignations.expansion?.contains?.find((c) => c.code === 'dog');
    expect(dog?.designation).toEqual([{ language: 'de', value: 'Hund' }]);
    const german = await expand(
      param('url', vsUrl('mammals')),
      { name: 'displayLanguage', valueCode: 'de' },
      param('excludeNested', true),
    );
    expect(german.expansion?.contains?.find((c) => c.code === 'dog')?.display).toBe('Hund');
  });

  test('each requested property is written as its own entry, and declared once', async () => {
    const vs = await expand(param('url', vsUrl('mammals')), param('property', 'legs'), param('excludeNested', true));
    const dog = vs.expansion?.contains?.find((c) => c.code === 'dog');
    const props = (dog?.extension ?? []).filter((e) =>
      e.url.endsWith('extension-ValueSet.expansion.contains.property'),
    );
    expect(props).toEqual([
      {
        url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-ValueSet.expansion.contains.property',
        extension: [
          { url: 'code', valueCode: 'legs' },
          { url: 'value', valueInteger: 4 },
        ],
      },
    ]);
    const declared = (vs.expansion?.extension ?? []).filter((e) =>
      e.url.endsWith('extension-ValueSet.expansion.property'),
    );
    const declaredCodes = declared.map((e) => e.extension?.find((x) => x.url === 'code')?.valueCode);
    // legs as asked; status because mammoth is retired, which an expansion always shows.
    expect(declaredCodes.sort()).toEqual(['legs', 'status']);
  });
});

describe('paging', () => {
  test('pages are stable and cover the expansion once', async () => {
    const seen: string[] = [];
    for (let offset = 0; offset < 8; offset += 3) {
      const page = await expand(param('url', vsUrl('all')), int('offset', offset), int('count', 3));
      expect(page.expansion?.total).toBe(8);
      expect(page.expansion?.offset).toBe(offset);
      seen.push(...codes(page.expansion?.contains));
    }
    expect(seen).toHaveLength(8);
    expect([...seen].sort()).toEqual([...ALL_ANIMALS].sort());
    const again = await expand(param('url', vsUrl('all')), int('offset', 3), int('count', 3));
    expect(codes(again.expansion?.contains)).toEqual(seen.slice(3, 6));
  });

  test('offset past the end answers no entries but the total', async () => {
    const vs = await expand(param('url', vsUrl('all')), int('offset', 100), int('count', 10));
    expect(vs.expansion?.total).toBe(8);
    expect(vs.expansion?.contains).toBeUndefined();
  });

  test('count 0 answers only the total', async () => {
    const vs = await expand(param('url', vsUrl('all')), int('count', 0));
    expect(vs.expansion?.total).toBe(8);
    expect(vs.expansion?.contains).toBeUndefined();
  });

  test('a count that is not an integer is refused before the engine runs', async () => {
    const res = await app.inject({ method: 'GET', url: `/fhir/R4/ValueSet/all/$expand?count=abc` });
    expect(res.statusCode).toBe(400);
    expect(res.json().resourceType).toBe('OperationOutcome');
  });
});

describe('too costly', () => {
  const big: CodeSystem = {
    resourceType: 'CodeSystem',
    id: 'big',
    url: 'http://example.org/fhir/CodeSystem/big',
    status: 'active',
    content: 'complete',
    concept: Array.from({ length: 60 }, (_, i) => ({ code: `c${i}`, display: `Code ${i}` })),
  };

  test('an expansion beyond the configured limit answers too-costly', async () => {
    await put(big);
    await put(valueSet('big', { include: [{ system: big.url }] }));
    const res = await post('/fhir/R4/ValueSet/$expand', param('url', vsUrl('big')));
    expect(res.statusCode).toBe(422);
    const outcome = res.json();
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0].code).toBe('too-costly');
  });

  test('paging within the limit is allowed; the header lowers the limit', async () => {
    const paged = await expand(param('url', vsUrl('big')), int('count', 10));
    expect(paged.expansion?.total).toBe(60);
    expect(paged.expansion?.contains).toHaveLength(10);
    const res = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$expand',
      headers: { ...FHIR_JSON, 'x-too-costly-threshold': '5' },
      payload: { resourceType: 'Parameters', parameter: [param('url', vsUrl('all'))] },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0].code).toBe('too-costly');
  });
});

describe('errors', () => {
  test('an unknown value set is a clear OperationOutcome', async () => {
    const res = await post('/fhir/R4/ValueSet/$expand', param('url', vsUrl('nope')));
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.json().resourceType).toBe('OperationOutcome');
    expect(res.json().issue[0].details.text).toContain(vsUrl('nope'));
  });

  test('no value set at all is 400, and the message names $expand', async () => {
    const res = await post('/fhir/R4/ValueSet/$expand', int('count', 10));
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0].details.text).toBe(
      '$expand needs a value set: give url or valueSet, or invoke it on ValueSet/<id>',
    );
  });

  test('an unknown instance is 404', async () => {
    const res = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/nope/$expand' });
    expect(res.statusCode).toBe(404);
    expect(res.json().resourceType).toBe('OperationOutcome');
  });

  test('an unknown code system in the compose is reported', async () => {
    const res = await post(
      '/fhir/R4/ValueSet/$expand',
      param('valueSet', valueSet('x', { include: [{ system: 'http://example.org/unknown' }] })),
    );
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0].details.text).toContain('http://example.org/unknown');
  });

  test('a circular import is refused', async () => {
    const a = valueSet('loop-a', { include: [{ valueSet: [vsUrl('loop-b')] }] });
    const b = valueSet('loop-b', { include: [{ valueSet: [vsUrl('loop-a')] }] });
    await put(a);
    await put(b);
    const res = await post('/fhir/R4/ValueSet/$expand', param('url', vsUrl('loop-a')));
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0].details.text).toMatch(/circular/i);
  });
});
