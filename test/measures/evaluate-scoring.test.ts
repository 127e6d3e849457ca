import type { Library, Measure, MeasureReport, OperationOutcome, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends } from '../helpers/server-app';
import { countsOf } from './ecqm';
import {
  aggregate,
  basis,
  cql,
  elmLibrary,
  fhirpath,
  hypertensionValueSet,
  measure,
  ownData,
  ownElm,
  ownLibrary,
  pop,
  query,
} from './own-measures';

/**
 * $evaluate-measure scoring, population bases, strata, supplemental data and report types, with
 * small Measures of our own (test/measures/own-measures.ts) in CQL (as ELM), FHIRPath and FHIR
 * queries; and the clear 4xx answers for Measures and Libraries that cannot be evaluated.
 */

const LIB = ownLibrary.url as string;
const PERIOD = 'periodStart=2019-01-01&periodEnd=2019-12-31';

const measures: Measure[] = [
  measure('cql-proportion', {
    scoringCode: 'proportion',
    library: [LIB],
    group: [
      {
        id: 'main',
        population: [
          pop('initial-population', cql('Initial Population')),
          pop('denominator', cql('Denominator')),
          pop('numerator', cql('Numerator')),
        ],
        stratifier: [{ id: 'by-gender', code: { text: 'gender' }, criteria: cql('Gender') }],
      },
    ],
    supplementalData: [{ id: 'sde-sex', code: { text: 'sex' }, criteria: cql('Gender') }],
  }),
  measure('query-proportion', {
    scoringCode: 'proportion',
    group: [
      {
        population: [
          pop('initial-population', query('Encounter?status=finished')),
          pop('denominator', fhirpath('true')),
          pop('denominator-exclusion', fhirpath('Patient.birthDate < @1965-01-01')),
          pop('numerator', query(`Condition?code=http://snomed.info/sct|38341003`)),
        ],
        stratifier: [
          {
            id: 'gender-and-age',
            component: [
              { code: { text: 'gender' }, criteria: fhirpath('Patient.gender') },
              { code: { text: 'born before 1980' }, criteria: fhirpath('Patient.birthDate < @1980-01-01') },
            ],
          },
        ],
      },
    ],
  }),
  measure('ratio', {
    scoringCode: 'ratio',
    group: [
      {
        population: [
          pop('initial-population', fhirpath('true')),
          pop('denominator', query('Encounter?status=finished')),
          pop('numerator', query(`Condition?code=http://snomed.info/sct|38341003`)),
        ],
      },
    ],
  }),
  measure('cv-encounter-days', {
    scoringCode: 'continuous-variable',
    extension: [basis('Encounter')],
    group: [
      {
        population: [
          pop('initial-population', query('Encounter?status=finished')),
          pop('measure-population', query('Encounter')),
          pop('measure-observation', fhirpath('Encounter.length.value'), aggregate('sum')),
        ],
      },
    ],
  }),
  measure('cv-cql-average', {
    scoringCode: 'continuous-variable',
    extension: [basis('Encounter')],
    library: [LIB],
    group: [
      {
        population: [
          pop('initial-population', cql('Encounters')),
          pop('measure-population', cql('Encounters')),
          pop('measure-observation', cql('Encounter Days'), aggregate('average')),
        ],
      },
    ],
  }),
  measure('cohort', {
    scoringCode: 'cohort',
    group: [{ population: [pop('initial-population', fhirpath("Patient.gender = 'female'"))] }],
  }),
];

const broken: Resource[] = [
  {
    ...elmLibrary('cql-only', 'http://example.org/fhir/Library/CqlOnly', {}),
    content: [{ contentType: 'text/cql', data: Buffer.from('library CqlOnly').toString('base64') }],
  } as Library,
  {
    ...elmLibrary('not-json', 'http://example.org/fhir/Library/NotJson', {}),
    content: [{ contentType: 'application/elm+json', data: Buffer.from('{"library": ').toString('base64') }],
  } as Library,
  elmLibrary('no-identifier', 'http://example.org/fhir/Library/NoIdentifier', { library: { statements: { def: [] } } }),
  elmLibrary('bad-include', 'http://example.org/fhir/Library/BadInclude', {
    library: {
      ...ownElm.library,
      identifier: { id: 'BadInclude' },
      includes: { def: [{ localIdentifier: 'X', path: 'http://example.org/fhir/Missing', version: '9' }] },
    },
  }),
  elmLibrary('unknown-type', 'http://example.org/fhir/Library/UnknownType', {
    library: {
      ...ownElm.library,
      identifier: { id: 'UnknownType' },
      statements: { def: [{ name: 'Initial Population', context: 'Patient', expression: { type: 'NoSuchOperator' } }] },
    },
  }),
  ...['CqlOnly', 'NotJson', 'NoIdentifier', 'BadInclude', 'UnknownType', 'NotThere'].map((name) =>
    measure(`uses-${name.toLowerCase()}`, {
      scoringCode: 'cohort',
      library: [`http://example.org/fhir/Library/${name}`],
      group: [{ population: [pop('initial-population', cql('Initial Population'))] }],
    }),
  ),
  measure('undefined-name', {
    scoringCode: 'cohort',
    library: [LIB],
    group: [{ population: [pop('initial-population', cql('No Such Definition'))] }],
  }),
  measure('no-group', { scoringCode: 'cohort' }),
];

onBothBackends((name, open) => {
  describe(`$evaluate-measure scoring and report types (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const evaluate = async (id: string, query = '') => {
      const res = await server.app.inject({
        method: 'GET',
        url: `/fhir/R4/Measure/${id}/$evaluate-measure?${PERIOD}${query}`,
      });
      return {
        status: res.statusCode,
        report: res.json() as MeasureReport,
        outcome: res.json() as OperationOutcome,
        body: res.body,
      };
    };
    const ok = async (id: string, query = '') => {
      const { status, report, body } = await evaluate(id, query);
      expect(status, body).toBe(200);
      return report;
    };

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      for (const resource of [...ownData, hypertensionValueSet, ownLibrary, ...measures, ...broken] as Resource[]) {
        const res = await server.app.inject({
          method: 'PUT',
          url: `/fhir/R4/${resource.resourceType}/${resource.id}`,
          headers: { ...FHIR_JSON, 'x-validate-on-write': 'true' },
          payload: resource,
        });
        expect(res.statusCode, `${resource.resourceType}/${resource.id}: ${res.body}`).toBeLessThan(300);
      }
    }, 60_000);
    afterAll(() => cleanup?.());

    test('a write never enforces an extensible binding as closed: Expression.language text/cql-identifier and text/cql.identifier are stored, validated on write too', async () => {
      for (const language of ['text/cql-identifier', 'text/cql.identifier', 'application/x-custom']) {
        const resource = measure('language-check', {
          scoringCode: 'cohort',
          extension: [
            { url: 'http://example.org/fhir/StructureDefinition/any', valueExpression: { language, expression: 'X' } },
          ],
          group: [{ population: [pop('initial-population', { language, expression: 'Initial Population' })] }],
        });
        for (const validate of ['false', 'true']) {
          const res = await server.app.inject({
            method: 'PUT',
            url: '/fhir/R4/Measure/language-check',
            headers: { ...FHIR_JSON, 'x-validate-on-write': validate },
            payload: resource,
          });
          expect(res.statusCode, `${language} (validate on write ${validate}): ${res.body}`).toBeLessThan(300);
        }
      }
    });

    test('proportion in CQL (ELM): counts, score, strata by gender and supplemental data as contained Observations', async () => {
      const report = await ok('cql-proportion');
      expect(countsOf(report)).toEqual({ 'initial-population': 2, denominator: 2, numerator: 1 });
      expect(report.group?.[0]?.measureScore?.value).toBe(0.5);
      const strata = report.group?.[0]?.stratifier?.[0];
      expect(strata?.id).toBe('by-gender');
      const byValue = Object.fromEntries(
        (strata?.stratum ?? []).map((s) => [
          s.value?.text,
          [
            Object.fromEntries((s.population ?? []).map((p) => [p.code?.coding?.[0]?.code, p.count])),
            s.measureScore?.value,
          ],
        ]),
      );
      expect(byValue).toEqual({
        female: [{ 'initial-population': 1, denominator: 1, numerator: 1 }, 1],
        male: [{ 'initial-population': 1, denominator: 1, numerator: 0 }, 0],
      });
      const sde = (report.contained ?? []).filter((r) => r.resourceType === 'Observation') as unknown as {
        id: string;
        valueCodeableConcept: { coding: { code: string }[] };
        component: { valueInteger: number }[];
      }[];
      expect(
        Object.fromEntries(sde.map((o) => [o.valueCodeableConcept.coding[0].code, o.component[0].valueInteger])),
      ).toEqual({ female: 2, male: 2 });
      for (const o of sde) expect(report.evaluatedResource?.map((r) => r.reference)).toContain(`#${o.id}`);
    });

    test('an individual CQL report names what the evaluation read in evaluatedResource', async () => {
      const report = await ok('cql-proportion', '&subject=Patient/alice');
      expect(report.type).toBe('individual');
      expect(countsOf(report)).toEqual({ 'initial-population': 1, denominator: 1, numerator: 1 });
      const evaluated = report.evaluatedResource?.map((r) => r.reference);
      for (const ref of ['Patient/alice', 'Encounter/alice-1', 'Encounter/alice-2', 'Condition/alice-htn'])
        expect(evaluated).toContain(ref);
      expect(evaluated).not.toContain('Encounter/bob-1');
    });

    test('proportion in FHIR queries and FHIRPath: exclusions leave the numerator, component strata', async () => {
      const report = await ok('query-proportion');
      expect(countsOf(report)).toEqual({
        'initial-population': 2,
        denominator: 2,
        'denominator-exclusion': 1,
        numerator: 0,
      });
      expect(report.group?.[0]?.measureScore?.value).toBe(0);
      const strata = report.group?.[0]?.stratifier?.[0]?.stratum ?? [];
      const byValue = Object.fromEntries(
        strata.map((s) => [
          s.component?.map((c) => `${c.code.text}=${c.value.text}`).join(' '),
          countsOf({ group: [s] } as MeasureReport),
        ]),
      );
      expect(byValue).toEqual({
        'gender=female born before 1980=true': {
          'initial-population': 1,
          denominator: 1,
          'denominator-exclusion': 1,
          numerator: 0,
        },
        'gender=male born before 1980=true': {
          'initial-population': 1,
          denominator: 1,
          'denominator-exclusion': 0,
          numerator: 0,
        },
      });
    });

    test('ratio: the numerator is within the initial population, not the denominator', async () => {
      const report = await ok('ratio');
      expect(countsOf(report)).toEqual({ 'initial-population': 4, denominator: 2, numerator: 2 });
      expect(report.group?.[0]?.measureScore?.value).toBe(1);
    });

    test('continuous variable with an Encounter basis: one observation per encounter, summed (FHIRPath) or averaged (a CQL function)', async () => {
      const summed = await ok('cv-encounter-days');
      expect(countsOf(summed)).toEqual({ 'initial-population': 3, 'measure-population': 3, 'measure-observation': 3 });
      expect(summed.group?.[0]?.measureScore?.value).toBe(6);
      const alice = await ok('cv-encounter-days', '&subject=Patient/alice');
      expect(alice.group?.[0]?.measureScore?.value).toBe(3);
      const averaged = await ok('cv-cql-average');
      expect(countsOf(averaged)).toEqual({
        'initial-population': 3,
        'measure-population': 3,
        'measure-observation': 3,
      });
      expect(averaged.group?.[0]?.measureScore?.value).toBe(2);
    });

    test('cohort: the initial population and no score; practitioner keeps its patients only', async () => {
      const report = await ok('cohort');
      expect(countsOf(report)).toEqual({ 'initial-population': 2 });
      expect(report.group?.[0]?.measureScore).toBeUndefined();
      expect(countsOf(await ok('cohort', '&practitioner=Practitioner/dr-who'))).toEqual({ 'initial-population': 1 });
      expect(countsOf(await ok('ratio', '&practitioner=Practitioner/dr-who'))).toEqual({
        'initial-population': 2,
        denominator: 2,
        numerator: 1,
      });
    });

    test('subject-list with a resource basis lists the encounters; a Group narrows the population to its members', async () => {
      const list = await ok('cv-encounter-days', '&reportType=subject-list');
      const ip = list.group?.[0]?.population?.[0];
      const contained = list.contained?.find((r) => `#${r.id}` === ip?.subjectResults?.reference) as unknown as {
        entry: { item: { reference: string } }[];
      };
      expect(contained.entry.map((e) => e.item.reference)).toEqual([
        'Encounter/alice-1',
        'Encounter/alice-2',
        'Encounter/bob-1',
      ]);
      const group = {
        resourceType: 'Group',
        id: 'two',
        type: 'person',
        actual: true,
        member: [{ entity: { reference: 'Patient/bob' } }, { entity: { reference: 'Patient/dave' } }],
      };
      await server.app.inject({ method: 'PUT', url: '/fhir/R4/Group/two', headers: FHIR_JSON, payload: group });
      const report = await ok('ratio', '&subject=Group/two');
      expect(report.type).toBe('summary');
      expect(countsOf(report)).toEqual({ 'initial-population': 2, denominator: 1, numerator: 1 });
    });

    test.each([
      ['uses-cqlonly', 422, 'has no application/elm+json content'],
      ['uses-notjson', 422, 'not JSON'],
      ['uses-noidentifier', 422, 'library.identifier.id'],
      ['uses-badinclude', 422, "The Library 'http://example.org/fhir/Library/Missing|9' that Library"],
      ['uses-unknowntype', 422, "'Initial Population' uses the operator 'NoSuchOperator'"],
      ['uses-notthere', 422, "The Library 'http://example.org/fhir/Library/NotThere' that Measure"],
      ['undefined-name', 422, "defines no 'No Such Definition'"],
      ['no-group', 422, 'it has no group'],
    ])('%s cannot be evaluated: %i saying so', async (id, status, text) => {
      const { status: got, outcome } = await evaluate(id);
      expect(got).toBe(status);
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0].details?.text).toContain(text);
    });

    test('reportType and subject are checked', async () => {
      expect((await evaluate('cohort', '&reportType=everything')).status).toBe(400);
      expect((await evaluate('cohort', '&reportType=subject')).status).toBe(400);
      expect((await evaluate('cohort', '&subject=Observation/x')).status).toBe(400);
    });
  });
});
