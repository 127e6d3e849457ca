import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Bundle, BundleEntry, CodeSystem, Patient, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { freshSchema, hasPostgres, type TestSchema } from '../helpers/postgres';
import { FHIR_JSON, putResource, serverApp } from '../helpers/server-app';
import { SYNTHEA, syntheaFiles } from '../helpers/synthea';

/** Transactions and batches (R4 http.html#transaction), on both backends. */

// The Synthea test below skips without ../shared; say why once.
if (!SYNTHEA.present) console.warn(SYNTHEA.skipReason);

const require = createRequire(import.meta.url);
const example = (name: string) =>
  JSON.parse(readFileSync(require.resolve(`hl7.fhir.r4.examples/${name}`), 'utf8')) as Bundle;

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`transactions and batches (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      server.app.inject({
        method: 'POST',
        url: '/fhir/R4',
        headers: { ...FHIR_JSON, ...headers },
        payload: body as object,
      });
    const count = async (type: string) =>
      ((await server.app.inject({ method: 'GET', url: `/fhir/R4/${type}?_summary=count` })).json() as Bundle)
        .total as number;
    const countAll = async () =>
      ((await server.app.inject({ method: 'GET', url: '/fhir/R4?_summary=count' })).json() as Bundle).total as number;

    beforeAll(async () => {
      ({ server, cleanup } = await open());
    });
    afterAll(() => cleanup?.());

    test("the R4 example transaction: every entry's status is the official response's", async () => {
      // The state the example presumes: the resources its updates, deletes and reads name.
      const patient = (id: string, extra: Partial<Patient> = {}): Patient => ({
        resourceType: 'Patient',
        id,
        ...extra,
      });
      await putResource(
        server.app,
        patient('existing-234234', { identifier: [{ system: 'http:/example.org/fhir/ids', value: '234234' }] }),
      );
      await putResource(server.app, patient('123'));
      await putResource(server.app, patient('123a'));
      await putResource(server.app, patient('123a', { active: true }));
      await putResource(server.app, patient('234'));
      await putResource(server.app, patient('id-123456', { identifier: [{ value: '123456' }] }));
      for (let v = 0; v < 4; v++) await putResource(server.app, patient('12334', { active: v % 2 === 0 }));
      await putResource(server.app, patient('peter', { name: [{ given: ['Peter'] }] }));
      // R4 defines $lookup on CodeSystem (the example's ValueSet/$lookup is an error in the example), and
      // LOINC is not bundled: the code the entry looks up is given a small CodeSystem.
      await putResource(server.app, {
        resourceType: 'CodeSystem',
        id: 'loinc-part',
        url: 'http://loinc.org',
        name: 'LOINC',
        status: 'active',
        content: 'fragment',
        concept: [{ code: '1963-8', display: 'Bicarbonate' }],
      } as CodeSystem);
      const bundle = example('Bundle-bundle-transaction.json');
      const lookup = bundle.entry?.find((e) => e.request?.url === 'ValueSet/$lookup');
      if (lookup?.request) lookup.request.url = 'CodeSystem/$lookup';
      const res = await post(bundle);
      expect(res.statusCode, res.body).toBe(200);
      const answer = res.json() as Bundle;
      expect(answer.type).toBe('transaction-response');
      const official = example('Bundle-bundle-response.json');
      const statuses = answer.entry?.map((e) => Number(e.response?.status.split(' ')[0]));
      const expected = official.entry?.map((e, i) => {
        const code = Number(e.response?.status.split(' ')[0]);
        // Deletes: R4 allows 200, 202 or 204; the example says "202 Accepted" and, for the conditional one, "DELETE".
        return bundle.entry?.[i].request?.method === 'DELETE' ? 204 : code;
      });
      expect(statuses).toEqual(expected);
      // The created one's location is Patient/<new id>/_history/1, and its resource is returned.
      expect(answer.entry?.[0].response?.location).toMatch(/^Patient\/[A-Za-z0-9-]+\/_history\/1$/);
      expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient/234' })).statusCode).toBe(410);
      expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient/id-123456' })).statusCode).toBe(410);
    });

    test.skipIf(!SYNTHEA.present)(
      'Synthea patient bundles load as transactions: urn:uuid references resolved, none dangling, counts as sent',
      async () => {
        const { patients, shared } = syntheaFiles();
        const bundles = [...shared, ...patients.slice(0, 3)];
        const before = await countAll();
        const expected: Record<string, number> = {};
        for (const bundle of bundles) {
          for (const e of bundle.entry ?? [])
            expected[e.resource?.resourceType as string] = (expected[e.resource?.resourceType as string] ?? 0) + 1;
          const res = await post(bundle);
          expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
          const answer = res.json() as Bundle;
          expect(answer.entry).toHaveLength(bundle.entry?.length ?? 0);
          expect(answer.entry?.every((e) => e.response?.status === '201 Created')).toBe(true);
        }
        for (const [type, n] of Object.entries(expected)) expect(await count(type), type).toBeGreaterThanOrEqual(n);
        expect((await countAll()) - before).toBe(Object.values(expected).reduce((a, b) => a + b, 0));
        // Every reference of every stored resource points at a stored resource.
        const dangling = await server.core.repository.store.query<{ n: number | string }>(
          `SELECT COUNT(*) AS n FROM search_reference x WHERE x.target_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.type = x.target_type AND r.id = x.target_id AND r.deleted = FALSE)`,
          [],
        );
        expect(Number(dangling[0].n)).toBe(0);
        const urns = await server.core.repository.store.query<{ n: number | string }>(
          `SELECT COUNT(*) AS n FROM search_reference WHERE url LIKE 'urn:uuid:%'`,
          [],
        );
        expect(Number(urns[0].n)).toBe(0);
      },
      120_000,
    );

    test('a transaction whose 50th entry is invalid leaves storage exactly as it was', async () => {
      const before = await countAll();
      const entry = (i: number): BundleEntry => ({
        fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        resource: (i === 49
          ? { resourceType: 'Patient', birthDate: 'not-a-date' }
          : { resourceType: 'Patient', gender: 'female' }) as Patient,
        request: { method: 'POST', url: 'Patient' },
      });
      const res = await post({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: Array.from({ length: 60 }, (_, i) => entry(i)),
      });
      expect(res.statusCode).toBe(400);
      const outcome = res.json();
      expect(outcome.issue[0].details.text).toContain('Bundle.entry[49]');
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[49]']);
      expect(await countAll()).toBe(before);
    });

    test('20 clients racing the same conditional create end with exactly one resource', async () => {
      const identifier = { system: 'http://example.org/race', value: `r-${name}` };
      const create = () =>
        server.app.inject({
          method: 'POST',
          url: '/fhir/R4/Patient',
          headers: { ...FHIR_JSON, 'if-none-exist': `identifier=${identifier.system}|${identifier.value}` },
          payload: { resourceType: 'Patient', identifier: [identifier] },
        });
      const results = await Promise.all(Array.from({ length: 20 }, create));
      const statuses = results.map((r) => r.statusCode).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 200)).toHaveLength(19);
      const found = (
        await server.app.inject({
          method: 'GET',
          url: `/fhir/R4/Patient?identifier=${identifier.system}|${identifier.value}`,
        })
      ).json() as Bundle;
      expect(found.entry).toHaveLength(1);
      const inTransactions = await Promise.all(
        Array.from({ length: 20 }, () =>
          post({
            resourceType: 'Bundle',
            type: 'transaction',
            entry: [
              {
                fullUrl: 'urn:uuid:11111111-1111-4111-8111-111111111111',
                resource: { resourceType: 'Patient', identifier: [{ ...identifier, value: `${identifier.value}-tx` }] },
                request: {
                  method: 'POST',
                  url: 'Patient',
                  ifNoneExist: `identifier=${identifier.system}|${identifier.value}-tx`,
                },
              },
            ],
          }),
        ),
      );
      expect(inTransactions.every((r) => r.statusCode === 200)).toBe(true);
      const inTx = (
        await server.app.inject({
          method: 'GET',
          url: `/fhir/R4/Patient?identifier=${identifier.system}|${identifier.value}-tx`,
        })
      ).json() as Bundle;
      expect(inTx.entry).toHaveLength(1);
    }, 60_000);

    test.each([
      ['a Bundle of another type', { resourceType: 'Bundle', type: 'collection', entry: [] }, 'transaction or batch'],
      [
        'an entry without a request',
        { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient' } }] },
        'Bundle.entry[0]',
      ],
      [
        'an entry with a bad method',
        {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'MERGE', url: 'Patient' } }],
        },
        'Bundle.entry[0]',
      ],
      [
        'a urn:uuid that no entry defines',
        {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [
            {
              fullUrl: 'urn:uuid:22222222-2222-4222-8222-222222222222',
              resource: {
                resourceType: 'Observation',
                status: 'final',
                code: { text: 'x' },
                subject: { reference: 'urn:uuid:99999999-9999-4999-8999-999999999999' },
              },
              request: { method: 'POST', url: 'Observation' },
            },
          ],
        },
        'Bundle.entry[0]',
      ],
      [
        'conditions that depend on each other in a circle',
        {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [
            {
              fullUrl: 'urn:uuid:33333333-3333-4333-8333-333333333333',
              resource: { resourceType: 'Patient' },
              request: {
                method: 'POST',
                url: 'Patient',
                ifNoneExist: 'link=urn:uuid:44444444-4444-4444-8444-444444444444',
              },
            },
            {
              fullUrl: 'urn:uuid:44444444-4444-4444-8444-444444444444',
              resource: { resourceType: 'Patient' },
              request: {
                method: 'POST',
                url: 'Patient',
                ifNoneExist: 'link=urn:uuid:33333333-3333-4333-8333-333333333333',
              },
            },
          ],
        },
        'circle',
      ],
      [
        'a resource of another type than its URL',
        {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Observation' } }],
        },
        'Bundle.entry[0]',
      ],
    ])('%s is 400 naming the problem, and nothing is stored', async (_what, body, text) => {
      const before = await countAll();
      const res = await post(body);
      expect(res.statusCode).toBe(400);
      expect(res.json().issue[0].details.text).toContain(text);
      expect(await countAll()).toBe(before);
    });

    test('a batch answers each entry on its own; one failure does not stop the others', async () => {
      const res = await post({
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { resource: { resourceType: 'Patient', id: 'batch-a' }, request: { method: 'PUT', url: 'Patient/batch-a' } },
          {
            resource: { resourceType: 'Patient', birthDate: 'not-a-date' },
            request: { method: 'POST', url: 'Patient' },
          },
          { request: { method: 'GET', url: 'Patient/batch-a' } },
          { request: { method: 'GET', url: 'Patient/nobody-here' } },
        ],
      });
      expect(res.statusCode).toBe(200);
      const answer = res.json() as Bundle;
      expect(answer.type).toBe('batch-response');
      expect(answer.entry?.map((e) => e.response?.status.split(' ')[0])).toEqual(['201', '400', '200', '404']);
      expect(answer.entry?.[1].response?.outcome?.resourceType).toBe('OperationOutcome');
      expect((answer.entry?.[2].resource as Resource).id).toBe('batch-a');
    });

    test.each(['transaction', 'batch'])(
      'a %s-response names the version every write made: location, etag and lastModified',
      async (type) => {
        const id = `where-${type}`;
        await putResource(server.app, { resourceType: 'Patient', id });
        await putResource(server.app, { resourceType: 'Patient', id: `${id}-patched` });
        await putResource(server.app, { resourceType: 'Patient', id: `${id}-gone` });
        const patch = {
          resourceType: 'Binary',
          contentType: 'application/json-patch+json',
          data: Buffer.from(JSON.stringify([{ op: 'add', path: '/active', value: true }])).toString('base64'),
        };
        const res = await post(
          {
            resourceType: 'Bundle',
            type,
            entry: [
              { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
              {
                resource: { resourceType: 'Patient', id, gender: 'other' },
                request: { method: 'PUT', url: `Patient/${id}` },
              },
              {
                resource: { resourceType: 'Patient', id: `${id}-new` },
                request: { method: 'PUT', url: `Patient/${id}-new` },
              },
              { resource: patch, request: { method: 'PATCH', url: `Patient/${id}-patched` } },
              { request: { method: 'DELETE', url: `Patient/${id}-gone` } },
            ],
          },
          { prefer: 'return=minimal' },
        );
        expect(res.statusCode, res.body).toBe(200);
        const responses = (res.json() as Bundle).entry?.map((e) => e.response);
        expect(responses?.map((r) => r?.status.split(' ')[0])).toEqual(['201', '200', '201', '200', '204']);
        // As R4's transaction-response example answers an update: "Patient/123/_history/4".
        expect(responses?.[0]?.location).toMatch(/^Patient\/[A-Za-z0-9-]+\/_history\/1$/);
        expect(responses?.[1]?.location).toBe(`Patient/${id}/_history/2`);
        expect(responses?.[2]?.location).toBe(`Patient/${id}-new/_history/1`);
        expect(responses?.[3]?.location).toBe(`Patient/${id}-patched/_history/2`);
        expect(responses?.[4]?.location).toBeUndefined();
        expect(responses?.map((r) => r?.etag)).toEqual(['W/"1"', 'W/"2"', 'W/"1"', 'W/"2"', 'W/"2"']);
        for (const r of responses ?? [])
          expect(Date.parse(r?.lastModified ?? ''), JSON.stringify(r)).toBeGreaterThan(Date.now() - 60_000);
      },
    );

    test('Prefer: return=minimal leaves the resources out of a transaction-response', async () => {
      const res = await post(
        {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }],
        },
        { prefer: 'return=minimal' },
      );
      const entry = (res.json() as Bundle).entry?.[0];
      expect(entry?.resource).toBeUndefined();
      expect(entry?.response?.location).toMatch(/^Patient\//);
      expect(entry?.response?.etag).toBe('W/"1"');
    });
  });
}

suite('SQLite', async () => {
  const server = await serverApp();
  return { server, cleanup: () => server.close() };
});

if (hasPostgres) {
  suite('PostgreSQL', async () => {
    const schema: TestSchema = await freshSchema();
    const server = await serverApp({ databaseUrl: schema.url });
    return {
      server,
      cleanup: async () => {
        await server.close();
        await schema.drop();
      },
    };
  });
}
