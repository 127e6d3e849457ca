import type { OperationOutcome, StructureDefinition } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends, putResource } from '../helpers/server-app';
import { crossProduct, largePatient } from '../helpers/costly-fhirpath';

/**
 * An invariant of a stored profile is a user's program run by `$validate` and by validated writes.
 * One that costs a minute on a 150 KB resource ends that validation with too-costly (422) after
 * FHIRPATH_TIMEOUT_MS, while every other request is answered; the bundled R4 invariants and the
 * profile's cheap ones are evaluated as before.
 */

const PROFILE_URL = 'http://example.org/fhir/StructureDefinition/costly-patient';

const costlyProfile = {
  resourceType: 'StructureDefinition',
  id: 'costly-patient',
  url: PROFILE_URL,
  name: 'CostlyPatient',
  status: 'active',
  kind: 'resource',
  abstract: false,
  type: 'Patient',
  baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient',
  derivation: 'constraint',
  differential: {
    element: [
      {
        id: 'Patient',
        path: 'Patient',
        constraint: [
          {
            key: 'cost-1',
            severity: 'error',
            human: 'a cross product of names and given names',
            expression: crossProduct('resource'),
          },
          { key: 'cost-2', severity: 'error', human: 'has a gender', expression: 'gender.exists()' },
        ],
      },
    ],
  },
} satisfies StructureDefinition;

onBothBackends(
  (name, open) => {
    describe(`stored profiles' invariants under a time limit (${name})`, () => {
      let server: ServerApp;
      let cleanup: () => Promise<void>;

      beforeAll(async () => {
        ({ server, cleanup } = await open());
        await putResource(server.app, costlyProfile);
      });
      afterAll(async () => {
        await cleanup?.();
      });

      /** Runs `work` while probing /metadata and a read; answers its response and the probes' statuses. */
      const whileProbing = async (work: Promise<{ statusCode: number; body: string }>) => {
        let working = true;
        const done = work.finally(() => (working = false));
        const answered: number[] = [];
        while (working) {
          const [metadata, search] = await Promise.all([
            server.app.inject({ method: 'GET', url: '/fhir/R4/metadata' }),
            server.app.inject({ method: 'GET', url: '/fhir/R4/Patient?_count=1' }),
          ]);
          answered.push(metadata.statusCode, search.statusCode);
          // Injected requests settle without I/O: pace the probes so that the work's I/O gets its turns.
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return { res: await done, answered };
      };

      const validate = (resource: object) =>
        server.app.inject({
          method: 'POST',
          url: '/fhir/R4/Patient/$validate',
          headers: FHIR_JSON,
          payload: {
            resourceType: 'Parameters',
            parameter: [
              { name: 'resource', resource },
              { name: 'profile', valueUri: PROFILE_URL },
            ],
          },
        });

      test('$validate against a profile whose invariant is too costly answers 422 too-costly, naming it; other requests are answered meanwhile', async () => {
        const { res, answered } = await whileProbing(validate(largePatient()));
        expect(res.statusCode, res.body.slice(0, 500)).toBe(422);
        const outcome = JSON.parse(res.body) as OperationOutcome;
        expect(outcome.issue[0].code).toBe('too-costly');
        expect(outcome.issue[0].details?.text).toContain('cost-1');
        expect(outcome.issue[0].details?.text).toContain('did not finish within 500 ms');
        expect(answered.length).toBeGreaterThanOrEqual(10);
        expect(answered.every((s) => s === 200)).toBe(true);
      });

      test('on a small resource the same profile is evaluated: its cheap invariant fails, its costly one passes', async () => {
        const res = await validate({ resourceType: 'Patient', name: [{ family: 'Small', given: ['One'] }] });
        expect(res.statusCode).toBe(200);
        const texts = (JSON.parse(res.body) as OperationOutcome).issue.map((i) => i.details?.text ?? '');
        expect(texts).toContain("Constraint failed: cost-2: 'has a gender'");
        expect(texts.some((t) => t.includes('cost-1'))).toBe(false);
      });

      test('a validated write claiming the profile is refused with 422 too-costly, and nothing is stored', async () => {
        const write = server.app.inject({
          method: 'PUT',
          url: '/fhir/R4/Patient/costly',
          headers: FHIR_JSON,
          payload: { ...largePatient(), id: 'costly', meta: { profile: [PROFILE_URL] } },
        });
        const { res, answered } = await whileProbing(write);
        expect(res.statusCode, res.body.slice(0, 500)).toBe(422);
        expect((JSON.parse(res.body) as OperationOutcome).issue[0].code).toBe('too-costly');
        expect(answered.every((s) => s === 200)).toBe(true);
        expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient/costly' })).statusCode).toBe(404);
      });
    });
  },
  { fhirpathTimeoutMs: 500, validateOnWrite: true },
);
