import type { Bundle, Observation, Patient } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends, putResource } from '../helpers/server-app';

/** Conditional interactions, PATCH, history, delete, Prefer and formats (R4 http.html), on both backends. */

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`RESTful interactions (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const inject = (
      method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH',
      url: string,
      payload?: unknown,
      headers: Record<string, string> = {},
    ) =>
      server.app.inject({
        method,
        url: `/fhir/R4/${url}`,
        headers: { ...(payload !== undefined ? FHIR_JSON : {}), ...headers },
        payload: payload as object,
      });
    beforeAll(async () => {
      ({ server, cleanup } = await open());
    });
    afterAll(() => cleanup?.());

    test('conditional create: none -> 201, one -> 200 with it, several -> 412', async () => {
      const body = { resourceType: 'Patient', identifier: [{ system: 'http://x', value: 'c1' }] };
      const first = await inject('POST', 'Patient', body, { 'if-none-exist': 'identifier=http://x|c1' });
      expect(first.statusCode).toBe(201);
      const second = await inject('POST', 'Patient', body, { 'if-none-exist': 'identifier=http://x|c1' });
      expect(second.statusCode).toBe(200);
      expect(second.json().id).toBe(first.json().id);
      await inject('POST', 'Patient', body);
      expect((await inject('POST', 'Patient', body, { 'if-none-exist': 'identifier=http://x|c1' })).statusCode).toBe(
        412,
      );
      // A criterion the server does not know would make the match wrong: refused.
      expect((await inject('POST', 'Patient', body, { 'if-none-exist': 'colour=blue' })).statusCode).toBe(400);
    });

    test('conditional update: none -> create, one -> update it, several -> 412; an id in the body must agree', async () => {
      const made = await inject('PUT', 'Patient?identifier=http://x|u1', {
        resourceType: 'Patient',
        identifier: [{ system: 'http://x', value: 'u1' }],
      });
      expect(made.statusCode).toBe(201);
      const id = made.json().id;
      const updated = await inject('PUT', 'Patient?identifier=http://x|u1', {
        resourceType: 'Patient',
        identifier: [{ system: 'http://x', value: 'u1' }],
        active: true,
      });
      expect(updated.statusCode).toBe(200);
      expect(updated.json()).toMatchObject({ id, active: true, meta: { versionId: '2' } });
      expect(
        (await inject('PUT', 'Patient?identifier=http://x|u1', { resourceType: 'Patient', id: 'someone-else' }))
          .statusCode,
      ).toBe(400);
      expect((await inject('PUT', 'Patient?identifier=http://x|c1', { resourceType: 'Patient' })).statusCode).toBe(412);
    });

    test('conditional delete removes every match (within the limit); none is 204', async () => {
      for (let i = 0; i < 3; i++)
        await inject('POST', 'Patient', { resourceType: 'Patient', identifier: [{ system: 'http://x', value: 'd1' }] });
      expect((await inject('DELETE', 'Patient?identifier=http://x|d1')).statusCode).toBe(204);
      expect(((await inject('GET', 'Patient?identifier=http://x|d1')).json() as Bundle).entry).toBeUndefined();
      expect((await inject('DELETE', 'Patient?identifier=http://x|nobody')).statusCode).toBe(204);
    });

    test('delete: 410 afterwards, history shows it, re-create works; Prefer: handling=strict keeps a referenced one', async () => {
      await putResource(server.app, { resourceType: 'Patient', id: 'gone' } as Patient);
      expect((await inject('DELETE', 'Patient/gone')).statusCode).toBe(204);
      expect((await inject('GET', 'Patient/gone')).statusCode).toBe(410);
      const history = (await inject('GET', 'Patient/gone/_history')).json() as Bundle;
      // Created by PUT (at the client's id), so its first version's request is a PUT.
      expect(history.entry?.map((e) => e.request?.method)).toEqual(['DELETE', 'PUT']);
      expect(history.entry?.map((e) => e.request?.url)).toEqual(['Patient/gone', 'Patient/gone']);
      expect(history.entry?.[0].response?.status).toBe('204');
      const back = await inject('PUT', 'Patient/gone', { resourceType: 'Patient', id: 'gone' });
      expect(back.statusCode).toBe(201);
      expect(back.json().meta.versionId).toBe('3');
      // The re-create answered 201, and its history entry says so, whether or not the deletion before
      // it is on the same page.
      const recreated = (await inject('GET', 'Patient/gone/_history')).json() as Bundle;
      expect(recreated.entry?.map((e) => [e.request?.method, e.response?.status])).toEqual([
        ['PUT', '201'],
        ['DELETE', '204'],
        ['PUT', '201'],
      ]);
      const firstPage = (await inject('GET', 'Patient/gone/_history?_count=1')).json() as Bundle;
      expect(firstPage.entry?.map((e) => [e.request?.method, e.response?.status])).toEqual([['PUT', '201']]);
      await inject('PUT', 'Patient/gone', { resourceType: 'Patient', id: 'gone', active: true });
      const updatedAgain = (await inject('GET', 'Patient/gone/_history?_count=2')).json() as Bundle;
      expect(updatedAgain.entry?.map((e) => e.response?.status)).toEqual(['200', '201']);
      const posted = await inject('POST', 'Patient', { resourceType: 'Patient' });
      await inject('PUT', `Patient/${posted.json().id}`, {
        resourceType: 'Patient',
        id: posted.json().id,
        active: true,
      });
      const postedHistory = (await inject('GET', `Patient/${posted.json().id}/_history`)).json() as Bundle;
      expect(postedHistory.entry?.map((e) => [e.request?.method, e.request?.url, e.response?.status])).toEqual([
        ['PUT', `Patient/${posted.json().id}`, '200'],
        ['POST', 'Patient', '201'],
      ]);
      await putResource(server.app, {
        resourceType: 'Observation',
        id: 'points',
        status: 'final',
        code: { text: 'x' },
        subject: { reference: 'Patient/gone' },
      } as Observation);
      const strict = await inject('DELETE', 'Patient/gone', undefined, { prefer: 'handling=strict' });
      expect(strict.statusCode).toBe(409);
      expect(strict.json().issue[0].details.text).toContain('Observation/points');
      expect((await inject('DELETE', 'Patient/gone')).statusCode).toBe(204);
    });

    test('If-None-Match and If-Modified-Since answer 304', async () => {
      await putResource(server.app, { resourceType: 'Patient', id: 'cached' } as Patient);
      const read = await inject('GET', 'Patient/cached');
      expect(
        (await inject('GET', 'Patient/cached', undefined, { 'if-none-match': read.headers.etag as string })).statusCode,
      ).toBe(304);
      expect(
        (
          await inject('GET', 'Patient/cached', undefined, {
            'if-modified-since': new Date(Date.now() + 60_000).toUTCString(),
          })
        ).statusCode,
      ).toBe(304);
      expect(
        (await inject('GET', 'Patient/cached', undefined, { 'if-modified-since': 'Sat, 01 Jan 2000 00:00:00 GMT' }))
          .statusCode,
      ).toBe(200);
    });

    test('PATCH with JSON Patch and with FHIRPath Patch, with If-Match; a patch that breaks the resource is refused', async () => {
      await putResource(server.app, {
        resourceType: 'Patient',
        id: 'p',
        name: [{ family: 'Old', given: ['A', 'B'] }],
      } as Patient);
      const json = await inject(
        'PATCH',
        'Patient/p',
        [
          { op: 'replace', path: '/name/0/family', value: 'New' },
          { op: 'add', path: '/active', value: true },
        ],
        {
          'content-type': 'application/json-patch+json',
          'if-match': 'W/"1"',
        },
      );
      expect(json.statusCode, json.body).toBe(200);
      expect(json.json()).toMatchObject({ name: [{ family: 'New' }], active: true, meta: { versionId: '2' } });
      const stale = await inject('PATCH', 'Patient/p', [{ op: 'remove', path: '/active' }], {
        'content-type': 'application/json-patch+json',
        'if-match': 'W/"1"',
      });
      expect(stale.statusCode).toBe(412);
      const fhirpath = await inject('PATCH', 'Patient/p', {
        resourceType: 'Parameters',
        parameter: [
          {
            name: 'operation',
            part: [
              { name: 'type', valueCode: 'replace' },
              { name: 'path', valueString: 'Patient.name[0].given[1]' },
              { name: 'value', valueString: 'C' },
            ],
          },
          {
            name: 'operation',
            part: [
              { name: 'type', valueCode: 'add' },
              { name: 'path', valueString: 'Patient' },
              { name: 'name', valueString: 'birthDate' },
              { name: 'value', valueDate: '1970-01-01' },
            ],
          },
          {
            name: 'operation',
            part: [
              { name: 'type', valueCode: 'insert' },
              { name: 'path', valueString: 'Patient.name[0].given' },
              { name: 'index', valueInteger: 0 },
              { name: 'value', valueString: 'Z' },
            ],
          },
          {
            name: 'operation',
            part: [
              { name: 'type', valueCode: 'delete' },
              { name: 'path', valueString: 'Patient.active' },
            ],
          },
        ],
      });
      expect(fhirpath.statusCode, fhirpath.body).toBe(200);
      expect(fhirpath.json()).toMatchObject({
        name: [{ family: 'New', given: ['Z', 'A', 'C'] }],
        birthDate: '1970-01-01',
      });
      expect(fhirpath.json().active).toBeUndefined();
      const broken = await inject('PATCH', 'Patient/p', [{ op: 'add', path: '/birthDate', value: 'not-a-date' }], {
        'content-type': 'application/json-patch+json',
      });
      expect(broken.statusCode).toBe(400);
      const retyped = await inject('PATCH', 'Patient/p', [{ op: 'replace', path: '/resourceType', value: 'Group' }], {
        'content-type': 'application/json-patch+json',
      });
      expect(retyped.statusCode).toBe(422);
      expect((await inject('GET', 'Patient/p')).json().meta.versionId).toBe('3');
      const failedTest = await inject('PATCH', 'Patient/p', [{ op: 'test', path: '/birthDate', value: '2000-01-01' }], {
        'content-type': 'application/json-patch+json',
      });
      expect(failedTest.statusCode).toBe(422);
      expect(
        (
          await inject('PATCH', 'Patient?name=New', [{ op: 'add', path: '/active', value: false }], {
            'content-type': 'application/json-patch+json',
          })
        ).statusCode,
      ).toBe(200);
    });

    test('history at type and system level: newest first, _count pages, _since, _at', async () => {
      for (let i = 0; i < 5; i++)
        await putResource(server.app, { resourceType: 'Basic', id: `h${i}`, code: { text: `v1-${i}` } } as never);
      // An instant strictly between the two rounds of writes (milliseconds are the stored resolution).
      const tick = async () => {
        const at = Date.now();
        while (Date.now() === at) await Promise.resolve();
      };
      await tick();
      const middle = new Date().toISOString();
      await tick();
      for (let i = 0; i < 5; i++)
        await putResource(server.app, { resourceType: 'Basic', id: `h${i}`, code: { text: `v2-${i}` } } as never);
      const all: string[] = [];
      let next: string | undefined = '/fhir/R4/Basic/_history?_count=3';
      while (next) {
        const page = (await server.app.inject({ method: 'GET', url: next })).json() as Bundle;
        for (const e of page.entry ?? []) {
          // Each entry says how its version came to be (bdl-3): these were all PUT, the first ones creating.
          expect(e.request).toEqual({ method: 'PUT', url: `Basic/${e.resource?.id}` });
          expect(e.response?.status).toBe(e.resource?.meta?.versionId === '1' ? '201' : '200');
          all.push(`${e.resource?.id}@${e.resource?.meta?.versionId}`);
        }
        next = page.link?.find((l) => l.relation === 'next')?.url.replace(/^https?:\/\/[^/]+/, '');
      }
      expect(all).toHaveLength(10);
      expect(new Set(all).size).toBe(10);
      expect(all.slice(0, 5).every((v) => v.endsWith('@2'))).toBe(true);
      const since = (await inject('GET', `Basic/_history?_since=${encodeURIComponent(middle)}`)).json() as Bundle;
      expect(since.entry?.map((e) => e.resource?.meta?.versionId)).toEqual(['2', '2', '2', '2', '2']);
      const at = (await inject('GET', `Basic/_history?_at=${encodeURIComponent(middle)}`)).json() as Bundle;
      expect(at.entry?.map((e) => e.resource?.meta?.versionId)).toEqual(['1', '1', '1', '1', '1']);
      const system = (await inject('GET', '_history?_count=2')).json() as Bundle;
      expect(system.type).toBe('history');
      expect(system.entry).toHaveLength(2);
      expect((await inject('GET', 'Basic/_history?_since=yesterday')).statusCode).toBe(400);
    });

    test('Prefer: return=minimal | representation | OperationOutcome on create and update', async () => {
      const minimal = await inject('POST', 'Patient', { resourceType: 'Patient' }, { prefer: 'return=minimal' });
      expect(minimal.statusCode).toBe(201);
      expect(minimal.body).toBe('');
      expect(minimal.headers.location).toBeDefined();
      const outcome = await inject(
        'POST',
        'Patient',
        { resourceType: 'Patient' },
        { prefer: 'return=OperationOutcome' },
      );
      expect(outcome.json().resourceType).toBe('OperationOutcome');
      const full = await inject('POST', 'Patient', { resourceType: 'Patient' }, { prefer: 'return=representation' });
      expect(full.json().resourceType).toBe('Patient');
    });

    test('_format: JSON is answered, XML is 406; an XML body is 415', async () => {
      expect((await inject('GET', 'Patient?_format=json')).statusCode).toBe(200);
      expect((await inject('GET', 'Patient?_format=application/fhir%2Bjson')).statusCode).toBe(200);
      expect((await inject('GET', 'Patient?_format=xml')).statusCode).toBe(406);
      const xml = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/Patient',
        headers: { 'content-type': 'application/fhir+xml' },
        payload: '<Patient xmlns="http://hl7.org/fhir"/>',
      });
      expect(xml.statusCode).toBe(415);
      const pretty = await inject('GET', 'Patient/p?_pretty=true');
      expect(pretty.body).toContain('\n  "resourceType"');
    });
  });
}

onBothBackends(suite);
