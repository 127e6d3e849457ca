import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freshSchema, hasPostgres, type TestSchema } from '../helpers/postgres';
import { FHIR_JSON, putResource, serverApp } from '../helpers/server-app';
import { CHECKS_PATIENT_URL, checksPatient, checksPatientInstance, nicknameExtension } from './profiles-fixture';

/** POST [type]/$validate and [type]/[id]/$validate: inputs, modes, profiles, and when the answer is not 200. */

type Server = { app: FastifyInstance; close: () => Promise<void> };

const narrative = { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">x</div>' };

function post(app: FastifyInstance, url: string, payload: unknown) {
  return app.inject({ method: 'POST', url, headers: FHIR_JSON, payload: payload as object });
}

function params(resource: unknown, extra: Record<string, unknown>[] = []) {
  return { resourceType: 'Parameters', parameter: [...(resource ? [{ name: 'resource', resource }] : []), ...extra] };
}

function issuesOf(body: string): OperationOutcomeIssue[] {
  const outcome = JSON.parse(body) as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  return outcome.issue;
}

const errors = (issues: OperationOutcomeIssue[]) =>
  issues.filter((i) => i.severity === 'error').map((i) => `${i.expression?.[0]}: ${i.details?.text}`);

/** One embedded-storage server for the tests that do not depend on the backend. */
let server: Server;
beforeAll(async () => {
  server = await serverApp();
  await putResource(server.app, { resourceType: 'Patient', id: 'p1', text: narrative } as never);
  await putResource(server.app, { resourceType: 'Patient', id: 'lonely', text: narrative } as never);
  await putResource(server.app, {
    resourceType: 'Observation',
    id: 'o1',
    text: narrative,
    status: 'final',
    code: { text: 'x' },
    subject: { reference: 'Patient/p1' },
  } as never);
});
afterAll(async () => {
  await server?.close();
});

describe('inputs and answers', () => {
  test('an invalid resource is a 200 OperationOutcome listing its errors; a raw body and a Parameters body answer alike', async () => {
    const resource = { resourceType: 'Patient', text: narrative, birthDate: 'yesterday' };
    const raw = await post(server.app, '/fhir/R4/Patient/$validate', resource);
    expect(raw.statusCode).toBe(200);
    expect(raw.headers['content-type']).toMatch(/^application\/fhir\+json/);
    expect(errors(issuesOf(raw.body))).toEqual(["Patient.birthDate: 'yesterday' is not a valid date"]);
    const wrapped = await post(server.app, '/fhir/R4/Patient/$validate', params(resource));
    expect(wrapped.json()).toEqual(raw.json());
  });

  test('$validate is offered on every resource type, at type and instance level', async () => {
    for (const type of ['Bundle', 'Binary', 'Parameters', 'StructureDefinition', 'VisionPrescription']) {
      const res = await post(server.app, `/fhir/R4/${type}/$validate`, params({ resourceType: type }));
      expect(res.statusCode, `${type}: ${res.body}`).toBe(200);
    }
    const metadata = (await server.app.inject({ method: 'GET', url: '/fhir/R4/metadata' })).json();
    const patient = metadata.rest[0].resource.find((r: { type: string }) => r.type === 'Patient');
    expect(patient.operation).toContainEqual({
      name: 'validate',
      definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate',
    });
  });

  test('a type the server does not know answers an error issue, not a failure', async () => {
    const res = await post(
      server.app,
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient', contained: [{ resourceType: 'Spaceship', id: 's' }] }),
    );
    expect(res.statusCode).toBe(200);
    expect(errors(issuesOf(res.body))).toContain("Patient.contained[0]: 'Spaceship' is not a resource type of FHIR R4");
  });

  test.each([
    ['no resource', '/fhir/R4/Patient/$validate', params(undefined), 400, "Parameter 'resource' is required"],
    [
      'a resource of another type than the URL',
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Observation' }),
      400,
      'The body is a Observation but the URL is for Patient',
    ],
    [
      'an unknown mode',
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient' }, [{ name: 'mode', valueCode: 'destroy' }]),
      400,
      "'destroy' is not a valid mode",
    ],
    [
      'mode update at the type level',
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient', id: 'p1' }, [{ name: 'mode', valueCode: 'update' }]),
      400,
      'POST [type]/[id]/$validate',
    ],
    [
      'mode profile without a profile',
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient' }, [{ name: 'mode', valueCode: 'profile' }]),
      400,
      "Parameter 'profile' is required",
    ],
    [
      'a profile nobody knows',
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient' }, [{ name: 'profile', valueUri: 'http://example.org/nobody' }]),
      400,
      "The profile 'http://example.org/nobody' is not known",
    ],
    [
      'an instance that does not exist',
      '/fhir/R4/Patient/nobody/$validate',
      params({ resourceType: 'Patient', id: 'nobody' }),
      404,
      'Patient/nobody is not known',
    ],
  ])('%s is %s', async (_name, url, body, status, text) => {
    const res = await post(server.app, url, body);
    expect(res.statusCode).toBe(status);
    expect(issuesOf(res.body)[0].details?.text).toContain(text);
  });

  test('mode create ignores the id; mode update needs it, and the one in the URL', async () => {
    const withId = { resourceType: 'Patient', id: 'other', text: narrative };
    const create = await post(
      server.app,
      '/fhir/R4/Patient/$validate',
      params(withId, [{ name: 'mode', valueCode: 'create' }]),
    );
    expect(errors(issuesOf(create.body))).toEqual([]);
    const noId = await post(
      server.app,
      '/fhir/R4/Patient/p1/$validate',
      params({ resourceType: 'Patient', text: narrative }, [{ name: 'mode', valueCode: 'update' }]),
    );
    expect(errors(issuesOf(noId.body))).toEqual(['Patient.id: A resource to update must carry its id']);
    const otherId = await post(
      server.app,
      '/fhir/R4/Patient/p1/$validate',
      params(withId, [{ name: 'mode', valueCode: 'update' }]),
    );
    expect(errors(issuesOf(otherId.body))).toEqual([
      "Patient.id: The id 'other' is not the id of the resource in the URL ('p1')",
    ]);
    const same = await post(
      server.app,
      '/fhir/R4/Patient/p1/$validate',
      params({ ...withId, id: 'p1' }, [{ name: 'mode', valueCode: 'update' }]),
    );
    expect(errors(issuesOf(same.body))).toEqual([]);
  });

  test('mode delete warns about the resources that refer to the one to delete', async () => {
    const referred = await post(
      server.app,
      '/fhir/R4/Patient/p1/$validate',
      params(undefined, [{ name: 'mode', valueCode: 'delete' }]),
    );
    expect(referred.statusCode).toBe(200);
    expect(issuesOf(referred.body)).toEqual([
      {
        severity: 'warning',
        code: 'business-rule',
        details: { text: 'Patient/p1 is referred to by Observation/o1 (search parameters patient, subject)' },
        expression: ['Patient'],
      },
    ]);
    const lonely = await post(
      server.app,
      '/fhir/R4/Patient/lonely/$validate',
      params(undefined, [{ name: 'mode', valueCode: 'delete' }]),
    );
    expect(issuesOf(lonely.body)).toEqual([
      { severity: 'information', code: 'informational', details: { text: 'All OK' } },
    ]);
  });
});

/** Stored profiles: read through the repository, so on both backends. */
const backends: [string, boolean][] = [
  ['SQLite', false],
  ...(hasPostgres ? [['PostgreSQL', true] as [string, boolean]] : []),
];

describe.each(backends)('profiles users store (%s)', (_backend, postgres) => {
  let own: Server | undefined;
  let schema: TestSchema | undefined;
  // The embedded-storage run uses the shared server; PostgreSQL gets its own, on a fresh schema.
  const app = () => (own ?? server).app;
  beforeAll(async () => {
    if (postgres) {
      schema = await freshSchema();
      own = await serverApp({ databaseUrl: schema.url });
    }
    for (const sd of [nicknameExtension, checksPatient]) await putResource(app(), sd as never);
  });
  afterAll(async () => {
    await own?.close();
    await schema?.drop();
  });

  test('a differential-only profile is used by url, by url|version, in meta.profile and as the profile parameter', async () => {
    const bare = { resourceType: 'Patient', text: narrative };
    for (const profile of [CHECKS_PATIENT_URL, `${CHECKS_PATIENT_URL}|1.0.0`]) {
      const res = await post(
        app(),
        '/fhir/R4/Patient/$validate',
        params(bare, [{ name: 'profile', valueUri: profile }]),
      );
      expect(errors(issuesOf(res.body))).toContain(
        'Patient.identifier: Patient.identifier:mrn: minimum required = 1, but only found 0 (from http://example.org/fhir/StructureDefinition/checks-patient)',
      );
    }
    const byQuery = await post(
      app(),
      `/fhir/R4/Patient/$validate?profile=${encodeURIComponent(CHECKS_PATIENT_URL)}`,
      bare,
    );
    expect(errors(issuesOf(byQuery.body)).length).toBeGreaterThan(0);
    const claimed = await post(
      app(),
      '/fhir/R4/Patient/$validate',
      params({ ...bare, meta: { profile: [CHECKS_PATIENT_URL] } }),
    );
    expect(errors(issuesOf(claimed.body)).length).toBeGreaterThan(0);
    const conforming = await post(app(), '/fhir/R4/Patient/$validate', params(checksPatientInstance()));
    expect(errors(issuesOf(conforming.body))).toEqual([]);
  });

  test('mode profile validates against the profile asked for, not those the resource claims', async () => {
    const claimsUnknown = { ...checksPatientInstance(), meta: { profile: ['http://example.org/unknown-profile'] } };
    const normal = await post(app(), '/fhir/R4/Patient/$validate', params(claimsUnknown));
    expect(issuesOf(normal.body).map((i) => i.details?.text)).toContain(
      "Profile 'http://example.org/unknown-profile' is not known to this server; the resource was not checked against it",
    );
    const profileMode = await post(
      app(),
      '/fhir/R4/Patient/$validate',
      params(claimsUnknown, [
        { name: 'mode', valueCode: 'profile' },
        { name: 'profile', valueUri: CHECKS_PATIENT_URL },
      ]),
    );
    const texts = issuesOf(profileMode.body).map((i) => i.details?.text ?? '');
    expect(texts.some((t) => t.includes('unknown-profile'))).toBe(false);
    expect(errors(issuesOf(profileMode.body))).toEqual([]);
  });

  test('a profile that changes is used as it is now, never as it was', async () => {
    const url = 'http://example.org/fhir/StructureDefinition/changing';
    const profile = (min: number) => ({
      resourceType: 'StructureDefinition',
      id: 'changing',
      url,
      name: 'Changing',
      status: 'active',
      kind: 'resource',
      abstract: false,
      type: 'Patient',
      baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient',
      derivation: 'constraint',
      differential: {
        element: [
          { id: 'Patient', path: 'Patient' },
          { id: 'Patient.birthDate', path: 'Patient.birthDate', min },
        ],
      },
    });
    const check = async () =>
      errors(
        issuesOf(
          (
            await post(
              app(),
              '/fhir/R4/Patient/$validate',
              params({ resourceType: 'Patient', text: narrative }, [{ name: 'profile', valueUri: url }]),
            )
          ).body,
        ),
      );
    await putResource(app(), profile(1) as never);
    expect(await check()).toEqual(['Patient.birthDate: minimum required = 1, but only found 0 (Patient.birthDate)']);
    await putResource(app(), profile(0) as never);
    expect(await check()).toEqual([]);
    await putResource(app(), profile(1) as never);
    expect(await check()).toHaveLength(1);
  });
});

describe('what validation refuses, and the server answering after', () => {
  const stillAnswers = async () => {
    const res = await post(
      server.app,
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient', text: narrative }),
    );
    expect(res.statusCode).toBe(200);
  };

  test('a 20 MB resource is 413', async () => {
    const big = JSON.stringify({
      resourceType: 'Patient',
      text: narrative,
      name: [{ text: 'x'.repeat(20 * 1024 * 1024) }],
    });
    const res = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient/$validate',
      headers: FHIR_JSON,
      payload: big,
    });
    expect(res.statusCode).toBe(413);
    expect(issuesOf(res.body)[0].code).toBe('too-costly');
    await stillAnswers();
  });

  test('JSON nested 10,000 deep is 400', async () => {
    const deep = `{"resourceType":"Patient","extension":[${'{"url":"http://x","extension":['.repeat(10_000)}${']}'.repeat(10_000)}]}`;
    const res = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient/$validate',
      headers: FHIR_JSON,
      payload: deep,
    });
    expect(res.statusCode).toBe(400);
    expect(issuesOf(res.body)[0].details?.text).toBe('The request body is nested more than 64 levels deep');
    await stillAnswers();
  });

  test.each([
    [
      'base definitions in a cycle',
      [
        {
          id: 'cycle-a',
          url: 'http://example.org/cycle-a',
          baseDefinition: 'http://example.org/cycle-b',
          differential: { element: [{ id: 'Patient', path: 'Patient' }] },
        },
        {
          id: 'cycle-b',
          url: 'http://example.org/cycle-b',
          baseDefinition: 'http://example.org/cycle-a',
          differential: { element: [{ id: 'Patient', path: 'Patient' }] },
        },
      ],
      'http://example.org/cycle-a',
      'its base definitions form a cycle (http://example.org/cycle-a -> http://example.org/cycle-b -> http://example.org/cycle-a)',
    ],
    [
      'a snapshot whose content references loop',
      [
        {
          id: 'loop',
          url: 'http://example.org/loop',
          baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient',
          snapshot: {
            element: [
              { id: 'Patient', path: 'Patient', min: 0, max: '*' },
              { id: 'Patient.link', path: 'Patient.link', min: 0, max: '*', contentReference: '#Patient.contact' },
              { id: 'Patient.contact', path: 'Patient.contact', min: 0, max: '*', contentReference: '#Patient.link' },
            ],
          },
        },
      ],
      'http://example.org/loop',
      'the content reference of',
    ],
  ])('a profile with %s is 400, promptly', async (_name, definitions, url, text) => {
    for (const d of definitions) {
      await putResource(server.app, {
        resourceType: 'StructureDefinition',
        name: d.id,
        status: 'active',
        kind: 'resource',
        abstract: false,
        type: 'Patient',
        derivation: 'constraint',
        ...d,
      } as never);
    }
    const res = await post(
      server.app,
      '/fhir/R4/Patient/$validate',
      params({ resourceType: 'Patient' }, [{ name: 'profile', valueUri: url }]),
    );
    expect(res.statusCode).toBe(400);
    expect(issuesOf(res.body)[0].code).toBe('processing');
    expect(issuesOf(res.body)[0].details?.text).toContain(text);
    await stillAnswers();
  });
});
