import type { CodeSystem } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { valueSet } from '../fixtures/terminology';
import { issueTexts, outputs, param, postParameters, putResource, serverApp } from '../helpers/server-app';

/**
 * What a code system's `content` lets the server say about a code: only content it holds can
 * confirm one. A fragment may lack valid codes (unknown ones are a warning); complete and
 * example content that lacks a code refuses it; content the server does not hold (not-present,
 * like the bundled SNOMED CT stub) can confirm nothing.
 */

let app: FastifyInstance;
let close: () => Promise<void>;

const kinds = ['complete', 'fragment', 'example', 'not-present'] as const;
type Kind = (typeof kinds)[number];
const systemOf = (kind: Kind) => `http://example.org/fhir/CodeSystem/content-${kind}`;

function codeSystem(kind: Kind): CodeSystem {
  return {
    resourceType: 'CodeSystem',
    id: `content-${kind}`,
    url: systemOf(kind),
    version: '1',
    status: 'active',
    content: kind,
    concept: kind === 'not-present' ? undefined : [{ code: 'a', display: 'A' }],
  };
}

async function validate(kind: Kind, code: string) {
  const res = await postParameters(
    app,
    '/fhir/R4/ValueSet/$validate-code',
    param('url', `http://example.org/fhir/ValueSet/content-${kind}`),
    param('system', systemOf(kind)),
    param('code', code),
  );
  expect(res.statusCode, res.body).toBe(200);
  return { out: outputs(res.json()), texts: issueTexts(res.json()), body: res.json() };
}

async function validateInSystem(system: string, code: string) {
  const res = await postParameters(
    app,
    '/fhir/R4/CodeSystem/$validate-code',
    param('url', system),
    param('code', code),
  );
  expect(res.statusCode, res.body).toBe(200);
  return outputs(res.json());
}

beforeAll(async () => {
  ({ app, close } = await serverApp());
  for (const kind of kinds) {
    await putResource(app, codeSystem(kind));
    await putResource(app, valueSet(`content-${kind}`, { include: [{ system: systemOf(kind) }] }));
  }
});
afterAll(() => close());

describe('content modes', () => {
  test('complete: a listed code is valid, any other is an unknown code', async () => {
    expect((await validate('complete', 'a')).out.result).toBe(true);
    const other = await validate('complete', 'zz');
    expect(other.out.result).toBe(false);
    expect(other.texts).toContain(`Unknown code 'zz' in the CodeSystem '${systemOf('complete')}' version '1'`);
    expect((await validateInSystem(systemOf('complete'), 'zz')).result).toBe(false);
  });

  test('fragment: a listed code is valid; another may exist elsewhere, so it passes with a warning', async () => {
    expect((await validate('fragment', 'a')).out.result).toBe(true);
    const other = await validate('fragment', 'zz');
    expect(other.out.result).toBe(true);
    const issues = (other.out.issues as { issue: { severity: string; details: { text: string } }[] }).issue;
    expect(issues.map((i) => i.severity)).toEqual(['warning']);
    expect(issues[0].details.text).toContain('labeled as a fragment, so the code may be valid in some other fragment');
  });

  test('example: a listed code is valid with a warning; a code it does not list is refused', async () => {
    const listed = await validate('example', 'a');
    expect(listed.out.result).toBe(true);
    expect(String(listed.out.message)).toContain('did not contain enough information to properly validate the code');
    const other = await validate('example', 'zz');
    expect(other.out.result).toBe(false);
    expect(other.texts).toContain(`Unknown code 'zz' in the CodeSystem '${systemOf('example')}' version '1'`);
    expect((await validateInSystem(systemOf('example'), 'zz')).result).toBe(false);
  });

  test('not-present: no code is ever confirmed, and the answer says the content is not held', async () => {
    for (const code of ['a', 'zz']) {
      const { out, texts } = await validate('not-present', code);
      expect(out.result, code).toBe(false);
      expect(texts.join('\n')).toContain(
        `The CodeSystem '${systemOf('not-present')}|1' is known, but this server does not hold its content`,
      );
      expect(out['x-caused-by-unknown-system'] ?? out['x-unknown-system']).toBe(systemOf('not-present'));
      expect((await validateInSystem(systemOf('not-present'), code)).result).toBe(false);
    }
    const lookup = await postParameters(
      app,
      '/fhir/R4/CodeSystem/$lookup',
      param('system', systemOf('not-present')),
      param('code', 'a'),
    );
    expect(lookup.statusCode).toBe(404);
  });

  test('the bundled SNOMED CT stub (not-present) never validates a code, in a value set or on its own', async () => {
    const clinical = await postParameters(
      app,
      '/fhir/R4/ValueSet/$validate-code',
      param('url', 'http://hl7.org/fhir/ValueSet/clinical-findings'),
      param('coding', { system: 'http://snomed.info/sct', code: '404684003' }),
    );
    expect(clinical.statusCode).toBe(200);
    expect(outputs(clinical.json()).result).toBe(false);
    expect((await validateInSystem('http://snomed.info/sct', '404684003')).result).toBe(false);
  });

  test('LOINC, not bundled at all, is an unknown system: false, never true', async () => {
    const out = await validateInSystem('http://loinc.org', '8867-4');
    expect(out.result).toBe(false);
    expect(out['x-caused-by-unknown-system'] ?? out['x-unknown-system']).toBe('http://loinc.org');
  });
});
