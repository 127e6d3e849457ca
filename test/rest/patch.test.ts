import type { Bundle, Patient } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends, putResource } from '../helpers/server-app';

/**
 * PATCH under hostile input (hardening round three), on both backends: a patch cannot grow a
 * resource past the size limit, cannot reach the whole resource or an object's prototype, and
 * concurrent patches without If-Match all land. Each refusal is a 4xx OperationOutcome and changes
 * nothing.
 */

const JSON_PATCH = { 'content-type': 'application/json-patch+json' };
const PROTOTYPE_NAMES = ['toString', 'constructor', 'valueOf', 'hasOwnProperty', '__proto__', 'prototype'];

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';

function fhirPathOp(type: string, path: string, more: Record<string, unknown>[] = []) {
  return { name: 'operation', part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...more] };
}

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`PATCH hardening (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const inject = (method: Method, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
      server.app.inject({
        method,
        url: `/fhir/R4/${url}`,
        headers: { ...(payload !== undefined ? FHIR_JSON : {}), ...headers },
        payload: payload === undefined ? undefined : JSON.stringify(payload),
      });
    const versionOf = async (url: string) => (await inject('GET', url)).json().meta.versionId as string;
    /** A 4xx OperationOutcome that says what is wrong, and the resource still at its version. */
    const refused = async (
      res: { statusCode: number; json: () => { resourceType: string; issue: { details: { text: string } }[] } },
      url: string,
      version: string,
    ) => {
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.json().resourceType).toBe('OperationOutcome');
      expect(res.json().issue[0].details.text.length).toBeGreaterThan(0);
      expect(await versionOf(url)).toBe(version);
    };
    beforeAll(async () => {
      ({ server, cleanup } = await open());
    });
    afterAll(() => cleanup?.());

    test('copy /extension into itself again and again: refused before the resource outgrows the limit, nothing written', async () => {
      const extension = Array.from({ length: 8 }, (_, i) => ({
        url: 'http://example.org/x',
        valueString: `${i}`.padEnd(100, 'x'),
      }));
      await putResource(server.app, { resourceType: 'Patient', id: 'grow', extension } as Patient);
      const patch = Array.from({ length: 40 }, () => ({ op: 'copy', from: '/extension', path: '/extension/-' }));
      const res = await inject('PATCH', 'Patient/grow', patch, JSON_PATCH);
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().issue[0].code).toBe('too-costly');
      expect(res.json().issue[0].details.text).toMatch(
        /operation 1\d \(numbered from 0\) would make the resource larger than 10485760 bytes/,
      );
      await refused(res, 'Patient/grow', '1');
    });

    test('more operations than the limit: 400 before any is applied', async () => {
      await putResource(server.app, { resourceType: 'Patient', id: 'many' } as Patient);
      const patch = Array.from({ length: 1001 }, () => ({ op: 'test', path: '/id', value: 'many' }));
      const res = await inject('PATCH', 'Patient/many', patch, JSON_PATCH);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().issue[0].details.text).toContain('1001 operations; at most 1000');
      const fhirpath = await inject('PATCH', 'Patient/many', {
        resourceType: 'Parameters',
        parameter: Array.from({ length: 1001 }, () => fhirPathOp('delete', 'Patient.active')),
      });
      expect(fhirpath.statusCode, fhirpath.body).toBe(400);
      await refused(fhirpath, 'Patient/many', '1');
    });

    test('FHIRPath Patch values that would outgrow the limit: refused, nothing written', async () => {
      // Its values come from the body, so a body-sized patch of a large resource is what can outgrow the limit.
      const big = 'x'.repeat(1024 * 1024);
      await putResource(server.app, {
        resourceType: 'Patient',
        id: 'fp-grow',
        name: Array.from({ length: 6 }, () => ({ text: big })),
      } as Patient);
      const parameter = Array.from({ length: 5 }, () =>
        fhirPathOp('add', 'Patient', [
          { name: 'name', valueString: 'name' },
          { name: 'value', valueHumanName: { text: big } },
        ]),
      );
      const res = await inject('PATCH', 'Patient/fp-grow', { resourceType: 'Parameters', parameter });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
      expect(res.json().issue[0].code).toBe('too-costly');
      await refused(res, 'Patient/fp-grow', '1');
    });

    test.each([
      ['remove of the whole resource', 422, [{ op: 'remove', path: '' }]],
      ['replace of the whole resource with null', 422, [{ op: 'replace', path: '', value: null }]],
      ['move of the resource into a member', 422, [{ op: 'move', from: '', path: '/contained' }]],
      ['add under __proto__', 400, [{ op: 'add', path: '/__proto__/polluted', value: true }]],
      ['add of __proto__', 400, [{ op: 'add', path: '/__proto__', value: { polluted: true } }]],
      ['add under constructor/prototype', 400, [{ op: 'add', path: '/constructor/prototype/polluted', value: true }]],
      ['copy from __proto__', 400, [{ op: 'copy', from: '/__proto__', path: '/active' }]],
      ['copy from constructor', 400, [{ op: 'copy', from: '/constructor', path: '/active' }]],
      ['remove of an inherited member', 422, [{ op: 'remove', path: '/hasOwnProperty' }]],
      ['test of an inherited member', 422, [{ op: 'test', path: '/toString', value: {} }]],
      ['move of an object into its own member', 422, [{ op: 'move', from: '/name', path: '/name/0/given' }]],
      ['move of an object into itself, deeper', 422, [{ op: 'move', from: '/name/0', path: '/name/0/period/start' }]],
      [
        'copy of an object into its own member (the copy is no element)',
        400,
        [{ op: 'copy', from: '/name/0', path: '/name/0/x' }],
      ],
      ['an operation that is not an object', 400, [null]],
      ['a path that is not a pointer', 400, [{ op: 'add', path: 'active', value: true }]],
      ['an index past the end', 422, [{ op: 'add', path: '/name/5', value: { family: 'X' } }]],
    ])('JSON Patch: %s -> %i', async (_what, status, patch) => {
      await putResource(server.app, {
        resourceType: 'Patient',
        id: 'target',
        name: [{ family: 'Doe', given: ['Jane'] }],
      } as Patient);
      const before = await versionOf('Patient/target');
      const res = await inject('PATCH', 'Patient/target', patch, JSON_PATCH);
      expect(res.statusCode, res.body).toBe(status);
      await refused(res, 'Patient/target', before);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    test.each([
      [
        'a replace past the end of a list, third in the patch',
        [
          { op: 'test', path: '/name/0/family', value: 'Doe' },
          { op: 'add', path: '/active', value: true },
          { op: 'replace', path: '/name/5/family', value: 'X' },
        ],
        "operation 2 (numbered from 0: replace /name/5/family): the path does not exist: /name has 1 item, and no item '5'",
      ],
      [
        'a remove of an absent member',
        [{ op: 'remove', path: '/gender' }],
        "operation 0 (numbered from 0: remove /gender): the path does not exist: the resource has no member 'gender'",
      ],
      [
        'a copy from an absent member',
        [
          { op: 'add', path: '/active', value: true },
          { op: 'copy', from: '/telecom/0', path: '/telecom/-' },
        ],
        "operation 1 (numbered from 0: copy /telecom/- from /telecom/0): 'from' does not exist: the resource has no member 'telecom'",
      ],
      [
        'a path through a string',
        [{ op: 'replace', path: '/name/0/family/x', value: 'X' }],
        'operation 0 (numbered from 0: replace /name/0/family/x): the path does not exist: /name/0/family is a string, with no members',
      ],
      [
        'an add past the end of a list',
        [{ op: 'add', path: '/name/3', value: {} }],
        'operation 0 (numbered from 0: add /name/3): the path does not exist: /name has 1 item, so an item is added at 0 to 1, or at -',
      ],
      [
        'a failed test',
        [
          { op: 'add', path: '/active', value: true },
          { op: 'test', path: '/name/0/family', value: 'Roe' },
        ],
        'operation 1 (numbered from 0: test /name/0/family): the value at the path is not the one the test names',
      ],
    ])(
      'JSON Patch that does not fit the resource says which operation and why in a sentence: %s',
      async (_what, patch, text) => {
        await putResource(server.app, {
          resourceType: 'Patient',
          id: 'says-why',
          name: [{ family: 'Doe' }],
        } as Patient);
        const res = await inject('PATCH', 'Patient/says-why', patch, JSON_PATCH);
        expect(res.statusCode, res.body).toBe(422);
        expect(res.json().issue[0].details.text).toBe(`The patch cannot be applied: ${text}`);
      },
    );

    test('a malformed JSON Patch operation is named from 0 too', async () => {
      await putResource(server.app, { resourceType: 'Patient', id: 'says-why' } as Patient);
      const res = await inject(
        'PATCH',
        'Patient/says-why',
        [
          { op: 'add', path: '/active', value: true },
          { op: 'replace', path: '/gender' },
        ],
        JSON_PATCH,
      );
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().issue[0].details.text).toBe(
        "The patch cannot be applied: operation 1 (numbered from 0) has op 'replace' but no value",
      );
    });

    test.each([
      ['delete of the whole resource', 422, [fhirPathOp('delete', 'Patient')]],
      ['replace of the whole resource', 422, [fhirPathOp('replace', 'Patient', [{ name: 'value', valueString: 'x' }])]],
      [
        'add of a member named __proto__',
        400,
        [
          fhirPathOp('add', 'Patient', [
            { name: 'name', valueString: '__proto__' },
            { name: 'value', valueString: 'x' },
          ]),
        ],
      ],
      [
        'add of a member named constructor',
        400,
        [
          fhirPathOp('add', 'Patient', [
            { name: 'name', valueString: 'constructor' },
            { name: 'value', valueString: 'x' },
          ]),
        ],
      ],
      [
        'a path through constructor (an element the structure check does not know)',
        400,
        [fhirPathOp('replace', 'Patient.constructor', [{ name: 'value', valueString: 'x' }])],
      ],
      [
        'a path through toString',
        422,
        [
          fhirPathOp('add', 'Patient.toString', [
            { name: 'name', valueString: 'a' },
            { name: 'value', valueString: 'x' },
          ]),
        ],
      ],
      ['parts that are not objects', 400, [{ name: 'operation', part: ['type'] }]],
      [
        'a path that is not a string',
        400,
        [
          {
            name: 'operation',
            part: [
              { name: 'type', valueCode: 'delete' },
              { name: 'path', valueInteger: 3 },
            ],
          },
        ],
      ],
    ])('FHIRPath Patch: %s -> %i', async (_what, status, parameter) => {
      await putResource(server.app, { resourceType: 'Patient', id: 'fp-target', active: true } as Patient);
      const before = await versionOf('Patient/fp-target');
      const res = await inject('PATCH', 'Patient/fp-target', { resourceType: 'Parameters', parameter });
      expect(res.statusCode, res.body).toBe(status);
      await refused(res, 'Patient/fp-target', before);
    });

    test.each(PROTOTYPE_NAMES)(
      'conditional create, update, delete and patch whose criteria are named %s: 400, nothing written',
      async (param) => {
        await putResource(server.app, {
          resourceType: 'Patient',
          id: `cond-${PROTOTYPE_NAMES.indexOf(param)}`,
          active: true,
        } as Patient);
        const criteria = `${encodeURIComponent(param)}=x`;
        const count = async () => (await inject('GET', 'Patient?_summary=count')).json().total as number;
        const total = await count();
        const requests: [Method, string, unknown, Record<string, string>][] = [
          ['POST', 'Patient', { resourceType: 'Patient' }, { 'if-none-exist': criteria }],
          ['PUT', `Patient?${criteria}`, { resourceType: 'Patient' }, {}],
          ['PATCH', `Patient?${criteria}`, [{ op: 'add', path: '/gender', value: 'other' }], JSON_PATCH],
          ['DELETE', `Patient?${criteria}`, undefined, {}],
        ];
        for (const [method, url, payload, headers] of requests) {
          const res = await inject(method, url, payload, headers);
          expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(400);
          expect(res.json().issue[0].details.text).toContain(`Search parameter '${param}' is not known`);
        }
        expect(await count()).toBe(total);
        expect(await versionOf(`Patient/cond-${PROTOTYPE_NAMES.indexOf(param)}`)).toBe('1');
      },
    );

    test('20 concurrent FHIRPath Patches without If-Match: all 200, every change kept, version 21; a stale If-Match stays 412', async () => {
      await putResource(server.app, { resourceType: 'Patient', id: 'race' } as Patient);
      const fhirpath = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          inject('PATCH', 'Patient/race', {
            resourceType: 'Parameters',
            parameter: [
              fhirPathOp('add', 'Patient', [
                { name: 'name', valueString: 'identifier' },
                { name: 'value', valueIdentifier: { system: 'http://example.org/race', value: `v${i}` } },
              ]),
            ],
          }),
        ),
      );
      expect(fhirpath.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
      const after = (await inject('GET', 'Patient/race')).json();
      expect(after.meta.versionId).toBe('21');
      expect(after.identifier.map((i: { value: string }) => i.value).sort()).toEqual(
        Array.from({ length: 20 }, (_, i) => `v${i}`).sort(),
      );
      const stale = await inject('PATCH', 'Patient/race', [{ op: 'add', path: '/active', value: true }], {
        ...JSON_PATCH,
        'if-match': 'W/"20"',
      });
      expect(stale.statusCode).toBe(412);
      expect(await versionOf('Patient/race')).toBe('21');
    });

    test('history says PATCH for a version a PATCH made: JSON Patch, FHIRPath Patch, and a PATCH entry of a transaction', async () => {
      await putResource(server.app, { resourceType: 'Patient', id: 'patched-history' } as Patient);
      expect(
        (await inject('PATCH', 'Patient/patched-history', [{ op: 'add', path: '/active', value: true }], JSON_PATCH))
          .statusCode,
      ).toBe(200);
      const fhirPath = {
        resourceType: 'Parameters',
        parameter: [
          fhirPathOp('add', 'Patient', [
            { name: 'name', valueString: 'gender' },
            { name: 'value', valueCode: 'other' },
          ]),
        ],
      };
      expect((await inject('PATCH', 'Patient/patched-history', fhirPath)).statusCode).toBe(200);
      const binary = {
        resourceType: 'Binary',
        contentType: 'application/json-patch+json',
        data: Buffer.from(JSON.stringify([{ op: 'add', path: '/birthDate', value: '2000-01-01' }])).toString('base64'),
      };
      const tx = await inject('POST', '', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ resource: binary, request: { method: 'PATCH', url: 'Patient/patched-history' } }],
      });
      expect(tx.statusCode, tx.body).toBe(200);
      await inject('PUT', 'Patient/patched-history', { resourceType: 'Patient', id: 'patched-history' });
      const history = (await inject('GET', 'Patient/patched-history/_history')).json() as Bundle;
      expect(history.entry?.map((e) => [e.request?.method, e.request?.url, e.response?.status])).toEqual([
        ['PUT', 'Patient/patched-history', '200'],
        ['PATCH', 'Patient/patched-history', '200'],
        ['PATCH', 'Patient/patched-history', '200'],
        ['PATCH', 'Patient/patched-history', '200'],
        ['PUT', 'Patient/patched-history', '201'],
      ]);
    });

    test('20 concurrent JSON Patches without If-Match, each adding one element to a list: all 200, version 21', async () => {
      await putResource(server.app, {
        resourceType: 'Patient',
        id: 'race-json',
        identifier: [{ system: 'http://example.org/race', value: 'start' }],
      } as Patient);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          inject(
            'PATCH',
            'Patient/race-json',
            [{ op: 'add', path: '/identifier/-', value: { system: 'http://example.org/race', value: `v${i}` } }],
            JSON_PATCH,
          ),
        ),
      );
      expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
      const after = (await inject('GET', 'Patient/race-json')).json();
      expect(after.meta.versionId).toBe('21');
      expect(after.identifier).toHaveLength(21);
    });
  });
}

onBothBackends(suite);
