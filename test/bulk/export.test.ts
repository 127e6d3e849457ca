import type { Bundle, CapabilityStatement, Group, OperationOutcome, Patient, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, onTestFinished, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { EXPORT_JOB, type ExportManifest } from '../../src/bulk/export';
import type { JobView } from '../../src/jobs/queue';
import { SUPPORTING_TYPES } from '../../src/fhir/patient-record';
import { inPatientCompartment } from '../helpers/compartment-oracle';
import { FHIR_JSON, onBothBackends, storeAll } from '../helpers/server-app';
import { skipWithout } from '../helpers/shared';
import { SYNTHEA, syntheaResources } from '../helpers/synthea';

/**
 * Bulk Data 2.0.0 $export over three Synthea patients (with the hospitals, practitioners and the
 * shared Group), on both backends: the checks of HL7's Bulk Data certification kit at system,
 * Patient and Group level, line counts per type against what was loaded, Patient and Group
 * exports against the compartments worked out from HL7's CompartmentDefinition, and the
 * snapshot (writes after the kick-off do not leak in). Waits are on the job's state.
 */

const OPERATOR = 'bulk-operator-token-0123456789';
const resources = SYNTHEA.present ? syntheaResources({ patients: 3 }) : [];
const patients = resources.filter((r): r is Patient => r.resourceType === 'Patient');
const group = resources.find((r): r is Group => r.resourceType === 'Group') as Group;
const ASYNC = { prefer: 'respond-async' };

function countsOf(list: Resource[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of list) counts[r.resourceType] = (counts[r.resourceType] ?? 0) + 1;
  return counts;
}

/** Every resource in the compartment of one of `ids`, and those patients. */
function recordsOf(ids: string[]): Resource[] {
  return resources.filter((r) =>
    r.resourceType === 'Patient' ? ids.includes(r.id as string) : ids.some((id) => inPatientCompartment(r, id)),
  );
}

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`Bulk Data $export (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const inject = (
      method: 'GET' | 'POST' | 'PUT' | 'DELETE',
      url: string,
      options: { token?: string | null; headers?: Record<string, string>; payload?: object } = {},
    ) =>
      server.app.inject({
        method,
        url: url.replace(/^https?:\/\/[^/]+/, ''),
        headers: {
          ...(options.token === null ? {} : { authorization: `Bearer ${options.token ?? OPERATOR}` }),
          ...(options.payload ? FHIR_JSON : {}),
          ...options.headers,
        },
        payload: options.payload,
      });

    async function kickOff(
      url: string,
      options: { payload?: object; headers?: Record<string, string> } = {},
    ): Promise<string> {
      const res = await inject(options.payload ? 'POST' : 'GET', url, {
        payload: options.payload,
        headers: { ...ASYNC, ...options.headers },
      });
      expect(res.statusCode, res.body).toBe(202);
      const location = res.headers['content-location'] as string;
      expect(location).toMatch(/^http:\/\/[^/]+\/fhir\/R4\/bulk\/status\/[\w-]+$/);
      return location;
    }

    async function finished(location: string, token = OPERATOR): Promise<ExportManifest> {
      const id = location.slice(location.lastIndexOf('/') + 1);
      for (;;) {
        const job: JobView | undefined = await server.jobs.get(id);
        if (job?.state === 'done' || job?.state === 'dead') break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const res = await inject('GET', location, { token });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      return res.json() as ExportManifest;
    }

    /** Downloads every output file: the resources by type, each line checked to be of its file's type. */
    async function download(manifest: ExportManifest): Promise<Record<string, Resource[]>> {
      const byType: Record<string, Resource[]> = {};
      for (const output of manifest.output) {
        expect(output.url).toMatch(/^http:\/\/[^/]+\/fhir\/R4\/bulk\/files\//);
        const res = await inject('GET', output.url);
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers['content-type']).toMatch(/^application\/fhir\+ndjson/);
        const lines = res.body.split('\n').filter((l) => l !== '');
        expect(lines.length).toBe(output.count);
        for (const line of lines) {
          const resource = JSON.parse(line) as Resource;
          expect(resource.resourceType).toBe(output.type);
          (byType[output.type] ??= []).push(resource);
        }
      }
      return byType;
    }

    const countsIn = (byType: Record<string, Resource[]>) =>
      Object.fromEntries(Object.entries(byType).map(([type, list]) => [type, list.length]));

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      await storeAll(server, resources);
    }, 180_000);
    afterAll(() => cleanup?.());

    test('metadata instantiates the Bulk Data CapabilityStatement and declares export at three levels', async () => {
      const statement = (await inject('GET', '/fhir/R4/metadata')).json() as CapabilityStatement;
      expect(statement.instantiates).toContain('http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data');
      const rest = statement.rest?.[0];
      expect(rest?.operation).toContainEqual({
        name: 'export',
        definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export',
      });
      expect(rest?.resource?.find((r) => r.type === 'Patient')?.operation).toContainEqual({
        name: 'export',
        definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export',
      });
      expect(rest?.resource?.find((r) => r.type === 'Group')?.operation).toContainEqual({
        name: 'export',
        definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export',
      });
    });

    test('a system export has, per type, exactly the resources loaded', async () => {
      const manifest = await finished(await kickOff('/fhir/R4/$export'));
      expect(manifest.requiresAccessToken).toBe(true);
      expect(manifest.request).toMatch(/^http:\/\/[^/]+\/fhir\/R4\/\$export$/);
      expect(Date.parse(manifest.transactionTime)).not.toBeNaN();
      expect(manifest.error).toEqual([]);
      const byType = await download(manifest);
      expect(countsIn(byType)).toEqual(countsOf(resources));
      const sample = byType.Patient.find((p) => p.id === patients[0].id);
      expect(sample).toMatchObject({ ...patients[0], meta: { versionId: '1' } });
    });

    test.each(['system', 'Patient', 'Group'])('the kit checks at %s level', async (level) => {
      const url =
        level === 'system'
          ? '/fhir/R4/$export'
          : level === 'Patient'
            ? '/fhir/R4/Patient/$export'
            : `/fhir/R4/Group/${group.id}/$export`;
      expect((await inject('GET', url, { token: null, headers: ASYNC })).statusCode).toBe(401);
      const sync = await inject('GET', url);
      expect(sync.statusCode).toBe(400);
      expect((sync.json() as OperationOutcome).issue[0].details?.text).toContain('respond-async');
      for (const format of ['application/fhir+ndjson', 'application/ndjson', 'ndjson']) {
        const manifest = await finished(
          await kickOff(`${url}?_outputFormat=${encodeURIComponent(format)}&_type=Patient`),
        );
        expect(manifest.output.map((o) => o.type)).toEqual(['Patient']);
      }
      expect((await inject('GET', `${url}?_outputFormat=text/csv`, { headers: ASYNC })).statusCode).toBe(400);
      const location = await kickOff(`${url}?_since=2000-01-01T00:00:00Z&_type=Patient,Encounter`);
      const manifest = await finished(location);
      expect(manifest.output.length).toBe(2);
      const file = manifest.output[0].url;
      expect((await inject('GET', file, { token: null })).statusCode).toBe(401);
      expect((await inject('DELETE', location)).statusCode).toBe(202);
      expect((await inject('GET', location)).statusCode).toBe(404);
      expect((await inject('DELETE', location)).statusCode).toBe(404);
      expect((await inject('GET', file)).statusCode).toBe(404);
    });

    /** The union of the patients' `$everything`, every page followed, as sorted `Type/id` keys. */
    async function everythingOf(ids: string[]): Promise<string[]> {
      const keys = new Set<string>();
      for (const id of ids) {
        let url: string | undefined = `/fhir/R4/Patient/${id}/$everything?_count=500`;
        while (url) {
          const res = await inject('GET', url);
          expect(res.statusCode, res.body).toBe(200);
          const bundle = res.json() as Bundle;
          for (const e of bundle.entry ?? []) keys.add(`${e.resource?.resourceType}/${e.resource?.id}`);
          url = bundle.link?.find((l) => l.relation === 'next')?.url;
        }
      }
      return [...keys].sort();
    }
    const keysOf = (byType: Record<string, Resource[]>) =>
      Object.values(byType)
        .flat()
        .map((r) => `${r.resourceType}/${r.id}`)
        .sort();
    /** The counts of the compartment's own types (every other type exported must be a supporting one). */
    const compartmentPart = (byType: Record<string, Resource[]>, expected: Record<string, number>) => {
      const counts = countsIn(byType);
      expect(Object.keys(counts).filter((type) => !(type in expected) && !SUPPORTING_TYPES.includes(type))).toEqual([]);
      return Object.fromEntries(Object.entries(counts).filter(([type]) => type in expected));
    };

    test("Patient export: every patient with its compartment and what it refers to; Group export: the union of its members' $everything", async () => {
      const all = await download(await finished(await kickOff('/fhir/R4/Patient/$export')));
      const records = countsOf(recordsOf(patients.map((p) => p.id as string)));
      expect(compartmentPart(all, records)).toEqual(records);
      expect(all.Organization?.length).toBeGreaterThan(0);
      expect(keysOf(all)).toEqual(await everythingOf(patients.map((p) => p.id as string)));
      const members = (group.member ?? []).map((m) => (m.entity.reference as string).slice('Patient/'.length));
      expect(members.length).toBeGreaterThan(0);
      const ofGroup = await download(
        await finished(
          await kickOff(`/fhir/R4/Group/${group.id}/$export`, {
            payload: { resourceType: 'Parameters', parameter: [{ name: '_outputFormat', valueString: 'ndjson' }] },
          }),
        ),
      );
      const ofMembers = countsOf(recordsOf(members));
      expect(compartmentPart(ofGroup, ofMembers)).toEqual(ofMembers);
      expect(keysOf(ofGroup)).toEqual(await everythingOf(members));
    });

    test("_typeFilter: a type's resources matching any of its queries; the others whole; one that cannot be applied is 400", async () => {
      const filter = encodeURIComponent('Patient?gender=male');
      const other = encodeURIComponent('Patient?gender=female&birthdate=lt1900');
      const manifest = await finished(
        await kickOff(`/fhir/R4/$export?_type=Patient,Group&_typeFilter=${filter}&_typeFilter=${other}`),
      );
      const byType = await download(manifest);
      const expected = patients.filter(
        (p) => p.gender === 'male' || (p.gender === 'female' && (p.birthDate ?? '9999') < '1900'),
      );
      expect(byType.Patient.map((p) => p.id).sort()).toEqual(expected.map((p) => p.id).sort());
      expect(byType.Patient.length).toBeLessThan(patients.length);
      expect(byType.Group).toHaveLength(1);
      for (const bad of ['Patient?general-practitioner.name=x', 'Patient?nope=1', 'Nope?x=1', 'Patient']) {
        const res = await inject('GET', `/fhir/R4/$export?_typeFilter=${encodeURIComponent(bad)}`, { headers: ASYNC });
        expect(res.statusCode, bad).toBe(400);
      }
    });

    test('an unsupported parameter is 400, or with handling=lenient listed in the error file', async () => {
      expect(
        (await inject('GET', '/fhir/R4/$export?includeAssociatedData=LatestProvenanceResources', { headers: ASYNC }))
          .statusCode,
      ).toBe(400);
      const manifest = await finished(
        await kickOff('/fhir/R4/$export?_type=Group&includeAssociatedData=LatestProvenanceResources', {
          headers: { prefer: 'respond-async, handling=lenient' },
        }),
      );
      expect(manifest.error).toHaveLength(1);
      const errors = await inject('GET', manifest.error[0].url);
      expect((JSON.parse(errors.body.trim()) as OperationOutcome).issue[0].details?.text).toContain(
        'includeAssociatedData',
      );
    });

    test('_elements: the named root elements (bare for every type, Type.name for one) and the mandatory ones, marked SUBSETTED', async () => {
      const manifest = await finished(
        await kickOff('/fhir/R4/$export?_type=Patient,Observation&_elements=Patient.gender,subject,value[x]'),
      );
      const byType = await download(manifest);
      const subsetted = (r: Resource) => r.meta?.tag?.some((t) => t.code === 'SUBSETTED') === true;
      expect(byType.Patient).toHaveLength(patients.length);
      for (const p of byType.Patient) {
        expect(Object.keys(p).sort()).toEqual(
          ['gender', 'id', 'meta', 'resourceType'].filter((k) => k !== 'gender' || (p as Patient).gender !== undefined),
        );
        expect(subsetted(p)).toBe(true);
      }
      const observations = resources.filter((r) => r.resourceType === 'Observation');
      expect(byType.Observation).toHaveLength(observations.length);
      for (const o of byType.Observation) {
        // status and code are mandatory (1..1) in R4 Observation; subject and value[x] were asked for.
        const allowed = new Set(['resourceType', 'id', 'meta', 'status', 'code', 'subject']);
        expect(Object.keys(o).filter((k) => !allowed.has(k) && !k.startsWith('value'))).toEqual([]);
        expect(Object.keys(o)).toContain('code');
        expect(subsetted(o)).toBe(true);
      }
      expect(byType.Observation.some((o) => Object.keys(o).some((k) => k.startsWith('value')))).toBe(true);
      for (const bad of ['Patient.name.given', 'Nope.id', '1x']) {
        const res = await inject('GET', `/fhir/R4/$export?_elements=${encodeURIComponent(bad)}`, { headers: ASYNC });
        expect(res.statusCode, bad).toBe(400);
      }
    });

    test('only the project and client that kicked an export off may see it', async () => {
      const location = await kickOff('/fhir/R4/$export?_type=Group');
      const manifest = await finished(location);
      const init = await inject('POST', '/fhir/R4/Project/$init', {
        payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: 'bulk-other' }] },
      });
      expect(init.statusCode, init.body).toBe(201);
      const other = { 'x-project': (init.json() as Resource).id as string };
      expect((await inject('GET', location, { headers: other })).statusCode).toBe(404);
      expect((await inject('GET', manifest.output[0].url, { headers: other })).statusCode).toBe(404);
      expect((await inject('DELETE', location, { headers: other })).statusCode).toBe(404);
      expect((await inject('GET', location)).statusCode).toBe(200);
    });

    test("a Backend Services client exports its own project's data, within its scopes", async () => {
      const init = await inject('POST', '/fhir/R4/Project/$init', {
        payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: 'bulk-client' }] },
      });
      const project = { 'x-project': (init.json() as Resource).id as string };
      const own: Patient = { resourceType: 'Patient', id: 'own-patient', name: [{ family: 'OwnProject' }] };
      expect((await inject('PUT', '/fhir/R4/Patient/own-patient', { payload: own, headers: project })).statusCode).toBe(
        201,
      );
      expect(
        (
          await inject('POST', '/fhir/R4/Observation', {
            payload: { resourceType: 'Observation', status: 'final', code: { text: 'x' } },
            headers: project,
          })
        ).statusCode,
      ).toBe(201);
      const clients = (await inject('GET', '/fhir/R4/ClientApplication', { headers: project })).json() as {
        entry: { resource: Resource & { secret: string } }[];
      };
      const client = clients.entry[0].resource;
      const token = async (scope: string) => {
        const res = await server.app.inject({
          method: 'POST',
          url: '/oauth2/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({
            grant_type: 'client_credentials',
            client_id: client.id as string,
            client_secret: client.secret,
            scope,
          }).toString(),
        });
        expect(res.statusCode, res.body).toBe(200);
        return res.json().access_token as string;
      };
      const patientsOnly = await token('system/Patient.rs');
      const kick = await inject('GET', '/fhir/R4/$export', { token: patientsOnly, headers: ASYNC });
      expect(kick.statusCode, kick.body).toBe(202);
      const location = kick.headers['content-location'] as string;
      const manifest = await finished(location, patientsOnly);
      expect(manifest.output.map((o) => [o.type, o.count])).toEqual([['Patient', 1]]);
      const file = await inject('GET', manifest.output[0].url, { token: patientsOnly });
      expect(JSON.parse(file.body.trim())).toMatchObject({ id: 'own-patient' });
      // The operator (another principal, even in that project) does not see the client's export.
      expect((await inject('GET', location, { headers: project })).statusCode).toBe(404);
      expect(
        (await inject('GET', '/fhir/R4/$export?_type=Observation', { token: patientsOnly, headers: ASYNC })).statusCode,
      ).toBe(403);
      const everything = await token('system/*.rs');
      const all = await inject('GET', '/fhir/R4/$export', { token: everything, headers: ASYNC });
      expect(all.statusCode).toBe(202);
      // Another token of the same client follows the export.
      const types = (await finished(all.headers['content-location'] as string, patientsOnly)).output.map((o) => o.type);
      expect(types).toContain('Observation');
      expect(types).not.toContain('ClientApplication');
      // The administrators' jobs view: the project's two exports, who asked, done; nobody else's.
      const view = await inject('GET', '/admin/jobs', { headers: project });
      expect(view.statusCode, view.body).toBe(200);
      const jobs = (view.json() as { jobs: { id: string; kind: string; state: string; requestedBy: string }[] }).jobs;
      expect(jobs.map((j) => [j.kind, j.state, j.requestedBy])).toEqual([
        ['bulk-export', 'done', `ClientApplication/${client.id}`],
        ['bulk-export', 'done', `ClientApplication/${client.id}`],
      ]);
      const ids = jobs.map((j) => j.id);
      expect(ids).toContain(location.slice(location.lastIndexOf('/') + 1));
      const elsewhere = (await inject('GET', '/admin/jobs')).json() as { jobs: { id: string }[] };
      expect(elsewhere.jobs.filter((j) => ids.includes(j.id))).toEqual([]);
      expect((await inject('GET', '/admin/jobs', { token: everything })).statusCode).toBe(403);
      expect((await inject('GET', '/admin/jobs?_count=0', { headers: project })).statusCode).toBe(400);
    });

    test('a burst of kick-offs into room for some: exactly that many are accepted', async () => {
      await server.jobs.stop();
      onTestFinished(() => server.jobs.start(1));
      const burst = await Promise.all(
        Array.from({ length: 12 }, () => inject('GET', '/fhir/R4/$export?_type=Group', { headers: ASYNC })),
      );
      const accepted = burst.filter((r) => r.statusCode === 202).map((r) => r.headers['content-location'] as string);
      expect(accepted.length).toBe(2);
      expect(burst.filter((r) => r.statusCode === 429).length).toBe(10);
      for (const location of accepted) expect((await inject('DELETE', location)).statusCode).toBe(202);
    });

    test('a project has at most 2 exports queued or running: the next kick-off is 429 with Retry-After until one ends or is deleted', async () => {
      await server.jobs.stop();
      // Workers back whatever happens here: the tests after this one wait on exports finishing.
      onTestFinished(() => server.jobs.start(1));
      const first = await kickOff('/fhir/R4/$export?_type=Patient');
      const second = await kickOff('/fhir/R4/$export?_type=Organization');
      const refused = await inject('GET', '/fhir/R4/$export?_type=Patient', { headers: ASYNC });
      expect(refused.statusCode, refused.body).toBe(429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect((refused.json() as OperationOutcome).issue[0].code).toBe('throttled');
      // Another project is not held up by this one's exports.
      const init = await inject('POST', '/fhir/R4/Project/$init', {
        payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: 'bulk-limit-other' }] },
      });
      expect(init.statusCode, init.body).toBe(201);
      expect(
        (
          await inject('GET', '/fhir/R4/$export', {
            headers: { ...ASYNC, 'x-project': (init.json() as Resource).id as string },
          })
        ).statusCode,
      ).toBe(202);
      // A burst (the defect: 30 in a second were all accepted) is refused the same way.
      const burst = await Promise.all(
        Array.from({ length: 10 }, () => inject('GET', '/fhir/R4/$export?_type=Patient', { headers: ASYNC })),
      );
      expect(burst.map((r) => r.statusCode)).toEqual(Array.from({ length: 10 }, () => 429));
      // DELETE of one makes room.
      expect((await inject('DELETE', first)).statusCode).toBe(202);
      const third = await kickOff('/fhir/R4/$export?_type=Group');
      expect((await inject('GET', '/fhir/R4/$export?_type=Patient', { headers: ASYNC })).statusCode).toBe(429);
      server.jobs.start(1);
      await finished(second);
      await finished(third);
    });

    test('DELETE of a finished export deletes its files: the parts stored are gone, the status and file URLs 404', async () => {
      const location = await kickOff('/fhir/R4/$export?_type=Patient,Observation');
      const manifest = await finished(location);
      const id = location.slice(location.lastIndexOf('/') + 1);
      const files = manifest.output.map((o) => o.url.slice(o.url.lastIndexOf('/') + 1));
      const partsOf = async () =>
        (await Promise.all(files.map((file) => server.store.bulk.parts(id, file, 0, 1_000_000)))).flat().length;
      expect(await partsOf()).toBeGreaterThan(0);
      expect((await inject('DELETE', location)).statusCode).toBe(202);
      expect(await partsOf()).toBe(0);
      expect((await inject('GET', location)).statusCode).toBe(404);
      expect((await inject('GET', manifest.output[0].url)).statusCode).toBe(404);
    });

    test('a part is stored only while its export exists: one cancelled while another process runs it leaves none', async () => {
      const part = { part: 1, count: 1, content: '{"resourceType":"Patient"}\n' };
      expect(await server.store.bulk.putPart('cancelled-export', 'Patient.ndjson', part)).toBe(false);
      expect(await server.store.bulk.parts('cancelled-export', 'Patient.ndjson', 0, 10)).toEqual([]);
    });

    test('a finished export is kept for BULK_EXPORT_EXPIRY_HOURS (the manifest says until when: Expires); expired, its files go with it', async () => {
      const location = await kickOff('/fhir/R4/$export?_type=Group');
      const manifest = await finished(location);
      const res = await inject('GET', location);
      const expires = Date.parse(res.headers.expires as string);
      expect(expires).toBeGreaterThan(Date.now() + 23 * 3_600_000);
      expect(expires).toBeLessThan(Date.now() + 25 * 3_600_000);
      // What the queue's purge does once that time has passed (bulk export's done jobs: keepDoneMs).
      const id = location.slice(location.lastIndexOf('/') + 1);
      const file = manifest.output[0].url.slice(manifest.output[0].url.lastIndexOf('/') + 1);
      expect((await server.store.bulk.parts(id, file, 0, 1_000_000)).length).toBeGreaterThan(0);
      expect(await server.store.jobs.purgeDone(EXPORT_JOB, Date.now() + 1)).toBeGreaterThan(0);
      expect(await server.store.bulk.parts(id, file, 0, 1_000_000)).toEqual([]);
      expect((await inject('GET', location)).statusCode).toBe(404);
    });

    test('while queued: 202 with X-Progress and Retry-After; writes after the kick-off do not leak in', async () => {
      await server.jobs.stop();
      const location = await kickOff('/fhir/R4/$export?_type=Patient,Observation');
      const firstPoll = Date.now();
      const waiting = await inject('GET', location);
      expect(waiting.statusCode).toBe(202);
      expect(waiting.headers['x-progress']).toBeTruthy();
      expect(Number(waiting.headers['retry-after'])).toBeGreaterThan(0);
      // Polled again at once (sooner than Retry-After): 429 with Retry-After, unless the machine took that long.
      const again = await inject('GET', location);
      if (Date.now() - firstPoll < 1000) {
        expect(again.statusCode).toBe(429);
        expect(again.headers['retry-after']).toBe('1');
        expect((again.json() as OperationOutcome).issue[0].code).toBe('throttled');
      }
      const mark = new Date(Date.now() - 1).toISOString();
      // After the kick-off: a patient renamed, observations deleted, a new patient.
      const changed = { ...patients[0], name: [{ family: 'Changed-After-Kick-Off' }] };
      expect((await inject('PUT', `/fhir/R4/Patient/${changed.id}`, { payload: changed })).statusCode).toBe(200);
      const observations = resources.filter((r) => r.resourceType === 'Observation').slice(0, 20);
      for (const o of observations)
        expect((await inject('DELETE', `/fhir/R4/Observation/${o.id}`)).statusCode).toBe(204);
      expect(
        (
          await inject('POST', '/fhir/R4/Patient', {
            payload: { resourceType: 'Patient', name: [{ family: 'Newcomer' }] },
          })
        ).statusCode,
      ).toBe(201);
      server.jobs.start(1);
      const byType = await download(await finished(location));
      expect(countsIn(byType)).toEqual({ Patient: patients.length, Observation: countsOf(resources).Observation });
      expect(JSON.stringify(byType.Patient)).not.toContain('Changed-After-Kick-Off');
      expect(JSON.stringify(byType.Patient)).not.toContain('Newcomer');
      // A later export with _since lists the deletions.
      const since = await finished(
        await kickOff(`/fhir/R4/$export?_type=Observation,Patient&_since=${encodeURIComponent(mark)}`),
      );
      expect(since.deleted[0]?.count).toBe(observations.length);
      expect(since.output.map((o) => [o.type, o.count])).toEqual([['Patient', 2]]);
    });
  });
}

if (!SYNTHEA.present) skipWithout(SYNTHEA);
else onBothBackends(suite, { authTokens: [OPERATOR] });
