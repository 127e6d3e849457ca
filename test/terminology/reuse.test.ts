import type { CodeSystem, ValueSet } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { FHIR_JSON, outputs, param, postParameters, putResource, serverApp } from '../helpers/server-app';

/**
 * Answers and expansions are reused while the terminology content is unchanged: these tests
 * make sure reuse never serves an answer the current content or the request would not give.
 */

let app: FastifyInstance;
let close: () => Promise<void>;
const VS = 'http://example.org/fhir/ValueSet/reuse';
const validateUrl = (code: string, display?: string) =>
  `/fhir/R4/ValueSet/$validate-code?${new URLSearchParams({ url: VS, system: SYSTEM, code, ...(display ? { display } : {}) })}`;
const validate = async (code: string, headers: Record<string, string> = {}, display?: string) => {
  const res = await app.inject({ method: 'GET', url: validateUrl(code, display), headers });
  expect(res.statusCode, res.body).toBe(200);
  return outputs(res.json());
};

beforeAll(async () => {
  ({ app, close } = await serverApp());
  await putResource(app, animals);
  await putResource(app, valueSet('reuse', { include: [{ system: SYSTEM, concept: [{ code: 'dog' }] }] }));
});
afterAll(() => close());

describe('reused answers', () => {
  test('an identical request gets the same answer, until the content changes', async () => {
    expect((await validate('cat')).result).toBe(false);
    expect((await validate('cat')).result).toBe(false);
    await putResource(
      app,
      valueSet('reuse', { include: [{ system: SYSTEM, concept: [{ code: 'dog' }, { code: 'cat' }] }] }),
    );
    expect((await validate('cat')).result).toBe(true);
    // A change to a code system the value set uses counts too.
    const renamed: CodeSystem = JSON.parse(JSON.stringify(animals));
    renamed.concept?.[0].concept?.[0].concept?.splice(1, 1, { code: 'cat', display: 'House cat' });
    await putResource(app, renamed);
    expect((await validate('cat')).display).toBe('House cat');
    await putResource(app, animals);
  });

  test('the headers an operation honours are part of what makes two requests the same', async () => {
    expect((await validate('dog')).display).toBe('Dog');
    expect((await validate('dog', { 'accept-language': 'de' })).display).toBe('Hund');
    expect((await validate('dog')).display).toBe('Dog');
  });

  test('the body is part of it: the same URL with other tx-resources gets its own answer', async () => {
    const inline = (code: string): ValueSet =>
      valueSet('inline', { include: [{ system: SYSTEM, concept: [{ code }] }] });
    const ask = (vsCode: string) =>
      postParameters(
        app,
        '/fhir/R4/ValueSet/$validate-code',
        param('url', 'http://example.org/fhir/ValueSet/inline'),
        param('system', SYSTEM),
        param('code', 'owl'),
        param('tx-resource', inline(vsCode)),
      );
    expect(outputs((await ask('owl')).json()).result).toBe(true);
    expect(outputs((await ask('dog')).json()).result).toBe(false);
    expect(outputs((await ask('owl')).json()).result).toBe(true);
  });

  test('errors are never reused as answers', async () => {
    const missing = await app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/$validate-code?url=http://example.org/fhir/ValueSet/later&system=x&code=y',
    });
    expect(missing.statusCode).toBe(400);
    await putResource(app, valueSet('later', { include: [{ system: SYSTEM }] }));
    const found = await app.inject({
      method: 'GET',
      url: `/fhir/R4/ValueSet/$validate-code?url=http://example.org/fhir/ValueSet/later&system=${encodeURIComponent(SYSTEM)}&code=owl`,
    });
    expect(found.statusCode).toBe(200);
  });
});

describe('reused expansions', () => {
  test('pages of one expansion agree with each other and follow a content change', async () => {
    await putResource(app, valueSet('all-animals', { include: [{ system: SYSTEM }] }));
    const page = async (offset: number) => {
      const res = await app.inject({
        method: 'GET',
        url: `/fhir/R4/ValueSet/all-animals/$expand?count=4&offset=${offset}`,
      });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as ValueSet).expansion;
    };
    const byUrl = async (offset: number) => {
      const res = await postParameters(
        app,
        '/fhir/R4/ValueSet/$expand',
        param('url', 'http://example.org/fhir/ValueSet/all-animals'),
        { name: 'count', valueInteger: 4 },
        { name: 'offset', valueInteger: offset },
      );
      return (res.json() as ValueSet).expansion;
    };
    const first = await byUrl(0);
    const second = await byUrl(4);
    expect(first?.total).toBe(8);
    const codes = [...(first?.contains ?? []), ...(second?.contains ?? [])].map((c) => c.code);
    expect(new Set(codes).size).toBe(8);
    expect((await page(4))?.contains?.map((c) => c.code)).toEqual(second?.contains?.map((c) => c.code));

    const bigger: CodeSystem = JSON.parse(JSON.stringify(animals));
    bigger.concept?.push({ code: 'tree', display: 'Tree' });
    await putResource(app, bigger);
    expect((await byUrl(0))?.total).toBe(9);
    expect((await byUrl(8))?.contains?.map((c) => c.code)).toEqual(['tree']);
    await putResource(app, animals);
  });

  test('options that change the members are part of what is reused', async () => {
    const expand = async (...extra: Record<string, unknown>[]) =>
      (
        await postParameters(
          app,
          '/fhir/R4/ValueSet/$expand',
          param('url', 'http://example.org/fhir/ValueSet/all-animals'),
          ...extra,
        )
      ).json() as ValueSet;
    expect((await expand()).expansion?.total).toBe(8);
    expect((await expand(param('activeOnly', true))).expansion?.total).toBe(7);
    expect((await expand(param('filter', 'owl'))).expansion?.total).toBe(1);
    expect((await expand()).expansion?.total).toBe(8);
    const res = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$expand',
      headers: FHIR_JSON,
      payload: {
        resourceType: 'Parameters',
        parameter: [param('url', 'http://example.org/fhir/ValueSet/all-animals')],
      },
    });
    expect((res.json() as ValueSet).expansion?.total).toBe(8);
  });
});
