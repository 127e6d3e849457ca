import type { Group, MeasureReport, OperationOutcome, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends } from '../helpers/server-app';
import { skipWithout } from '../helpers/shared';
import {
  breastCancerScreeningMeasure,
  ECQM,
  countsFromName,
  countsOf,
  libraries,
  repaired,
  testCases,
  valueSets,
} from './ecqm';

/**
 * $evaluate-measure on a published eCQM (BreastCancerScreeningFHIR, EXM125): its Libraries and
 * ValueSets PUT as published, its test patients as published where R4 allows and minimally
 * repaired where it does not (every repair listed below), then each test case evaluated alone
 * and the four together. Loaded once per backend.
 */

const cases = ECQM.present ? testCases() : [];
const PERIOD = 'periodStart=2019-01-01&periodEnd=2019-12-31';
const EVALUATE = `/fhir/R4/Measure/${breastCancerScreeningMeasure.id}/$evaluate-measure`;

if (!ECQM.present) skipWithout(ECQM);
else
  onBothBackends((name, open) => {
    describe(`$evaluate-measure on the published Breast Cancer Screening eCQM (${name})`, () => {
      let server: ServerApp;
      let cleanup: () => Promise<void>;
      const repairs: string[] = [];
      const get = (url: string) => server.app.inject({ method: 'GET', url });

      async function put(resource: Resource): Promise<number> {
        const res = await server.app.inject({
          method: 'PUT',
          url: `/fhir/R4/${resource.resourceType}/${resource.id}`,
          headers: FHIR_JSON,
          payload: resource,
        });
        return res.statusCode;
      }

      beforeAll(async () => {
        ({ server, cleanup } = await open());
        for (const resource of [...libraries(), ...valueSets(), breastCancerScreeningMeasure as Resource]) {
          expect(await put(resource), `${resource.resourceType}/${resource.id} as published`).toBeLessThan(300);
        }
        for (const c of cases) {
          for (const resource of c.resources) {
            const status = await put(resource);
            if (status < 300) continue;
            expect(status).toBe(400);
            expect(
              await put(repaired(resource, repairs)),
              `${resource.resourceType}/${resource.id} repaired`,
            ).toBeLessThan(300);
          }
        }
      }, 120_000);
      afterAll(() => cleanup?.());

      test('the Libraries, ValueSets and Measure are taken as published; the patients need only these repairs', () => {
        expect(repairs).toEqual([
          "Encounter/denom-EXM125-1 Encounter.period.start: '2019-01-16T08:30:00' given the timezone -07:00",
          "Encounter/denom-EXM125-1 Encounter.period.end: '2019-01-20T08:30:00' given the timezone -07:00",
          "DiagnosticReport/denomexcl-EXM125-3 DiagnosticReport.effectivePeriod.start: '2019-01-17T12:30:00' given the timezone -07:00",
          "DiagnosticReport/denomexcl-EXM125-3 DiagnosticReport.effectivePeriod.end: '2019-01-17T12:30:00' given the timezone -07:00",
          "Encounter/denomexcl-EXM125-1 Encounter.period.start: '2019-01-16T08:30:00' given the timezone -07:00",
          "Encounter/denomexcl-EXM125-1 Encounter.period.end: '2019-01-20T08:30:00' given the timezone -07:00",
          'Encounter/denomexcl-EXM125-hospice Encounter.text: narrative without div dropped',
          "Encounter/denomexcl-EXM125-hospice Encounter.period.start: '2019-01-16T08:30:00' given the timezone -07:00",
          "Encounter/denomexcl-EXM125-hospice Encounter.period.end: '2019-01-20T08:30:00' given the timezone -07:00",
          "Encounter/neg-ip-EXM125-1 Encounter.period.start: '2018-01-16T08:30:00' given the timezone -07:00",
          "Encounter/neg-ip-EXM125-1 Encounter.period.end: '2018-01-20T08:30:00' given the timezone -07:00",
          "DiagnosticReport/numer-EXM125-3 DiagnosticReport.effectivePeriod.start: '2019-01-17T12:30:00' given the timezone -07:00",
          "DiagnosticReport/numer-EXM125-3 DiagnosticReport.effectivePeriod.end: '2019-01-17T12:30:00' given the timezone -07:00",
        ]);
      });

      test.each(cases.map((c) => [c.name, c] as const))(
        'case %s: the individual report has the expected population counts',
        async (_name, c) => {
          const res = await get(`${EVALUATE}?${PERIOD}&subject=Patient/${c.patient}`);
          expect(res.statusCode, res.body).toBe(200);
          const report = res.json() as MeasureReport;
          expect(report.resourceType).toBe('MeasureReport');
          expect(report.type).toBe('individual');
          expect(report.status).toBe('complete');
          expect(report.subject?.reference).toBe(`Patient/${c.patient}`);
          expect(report.measure).toBe('http://ecqi.healthit.gov/ecqms/Measure/BreastCancerScreeningFHIR|2.0.003');
          const expected = c.expected ? countsOf(c.expected) : countsFromName(c.name);
          expect(countsOf(report)).toEqual(expected);
          if (c.expected?.group?.[0]?.measureScore)
            expect(report.group?.[0]?.measureScore?.value).toBe(c.expected.group[0].measureScore.value);
          if (expected['initial-population'] === 1) {
            const evaluated = (report.evaluatedResource ?? []).map((r) => r.reference);
            expect(evaluated).toContain(`Patient/${c.patient}`);
            for (const ref of c.expected?.evaluatedResource ?? []) expect(evaluated).toContain(ref.reference);
          }
        },
      );

      test('the expected reports exist for two cases (the others are judged by their folder names)', () => {
        expect(cases.map((c) => [c.name, c.expected !== undefined])).toEqual([
          ['denom-EXM125', true],
          ['denomexcl-EXM125', false],
          ['neg-ip-EXM125', false],
          ['numer-EXM125', true],
        ]);
      });

      test('reportType=population over all patients, over a Group of the four, and POSTed at type level, each equals the sum of the cases', async () => {
        const sum: Record<string, number> = {};
        for (const c of cases)
          for (const [code, n] of Object.entries(c.expected ? countsOf(c.expected) : countsFromName(c.name)))
            sum[code] = (sum[code] ?? 0) + n;
        expect(sum).toEqual({ 'initial-population': 3, denominator: 3, 'denominator-exclusion': 1, numerator: 1 });
        const all = await get(`${EVALUATE}?${PERIOD}&reportType=population`);
        expect(all.statusCode, all.body).toBe(200);
        const report = all.json() as MeasureReport;
        expect(report.type).toBe('summary');
        expect(countsOf(report)).toEqual(sum);
        expect(report.group?.[0]?.measureScore?.value).toBe(0.5);

        const group: Group = {
          resourceType: 'Group',
          id: 'ecqm-cases',
          type: 'person',
          actual: true,
          member: cases.map((c) => ({ entity: { reference: `Patient/${c.patient}` } })),
        };
        expect(await put(group)).toBeLessThan(300);
        const byGroup = await get(`${EVALUATE}?${PERIOD}&subject=Group/ecqm-cases`);
        expect(byGroup.statusCode, byGroup.body).toBe(200);
        expect((byGroup.json() as MeasureReport).subject?.reference).toBe('Group/ecqm-cases');
        expect(countsOf(byGroup.json() as MeasureReport)).toEqual(sum);

        const posted = await server.app.inject({
          method: 'POST',
          url: '/fhir/R4/Measure/$evaluate-measure',
          headers: FHIR_JSON,
          payload: {
            resourceType: 'Parameters',
            parameter: [
              {
                name: 'measure',
                valueString: `${breastCancerScreeningMeasure.url}|${breastCancerScreeningMeasure.version}`,
              },
              { name: 'periodStart', valueDate: '2019-01-01' },
              { name: 'periodEnd', valueDate: '2019-12-31' },
              { name: 'reportType', valueCode: 'population' },
            ],
          },
        });
        expect(posted.statusCode, posted.body).toBe(200);
        expect(countsOf(posted.json() as MeasureReport)).toEqual(sum);
      });

      test('subject-list: each population lists its subjects in a contained List', async () => {
        const res = await get(`${EVALUATE}?${PERIOD}&reportType=subject-list`);
        expect(res.statusCode, res.body).toBe(200);
        const report = res.json() as MeasureReport;
        expect(report.type).toBe('subject-list');
        const numerator = report.group?.[0]?.population?.find((p) => p.code?.coding?.[0]?.code === 'numerator');
        const list = report.contained?.find((r) => `#${r.id}` === numerator?.subjectResults?.reference);
        expect(list?.resourceType).toBe('List');
        expect((list as { entry?: { item: { reference: string } }[] }).entry?.map((e) => e.item.reference)).toEqual([
          'Patient/numer-EXM125',
        ]);
      });

      test('an unknown subject is 200 with every population 0', async () => {
        const res = await get(`${EVALUATE}?${PERIOD}&subject=Patient/nobody-here`);
        expect(res.statusCode, res.body).toBe(200);
        expect(countsOf(res.json() as MeasureReport)).toEqual({
          'initial-population': 0,
          denominator: 0,
          'denominator-exclusion': 0,
          numerator: 0,
        });
      });

      test('a period in the wrong order, or missing, is 400; an unknown Measure 404', async () => {
        const reversed = await get(`${EVALUATE}?periodStart=2019-12-31&periodEnd=2019-01-01`);
        expect(reversed.statusCode).toBe(400);
        expect((reversed.json() as OperationOutcome).issue[0].details?.text).toMatch(/ends .* before it starts/);
        const missing = await get(`${EVALUATE}?periodStart=2019-01-01`);
        expect(missing.statusCode).toBe(400);
        expect((missing.json() as OperationOutcome).issue[0].details?.text).toContain("'periodEnd' is required");
        expect((await get(`/fhir/R4/Measure/no-such-measure/$evaluate-measure?${PERIOD}`)).statusCode).toBe(404);
        const byUrl = await get(
          `/fhir/R4/Measure/$evaluate-measure?${PERIOD}&measure=${encodeURIComponent('http://example.org/Measure/none')}`,
        );
        expect(byUrl.statusCode).toBe(404);
        expect((byUrl.json() as OperationOutcome).issue[0].details?.text).toContain('http://example.org/Measure/none');
      });
    });
  });
