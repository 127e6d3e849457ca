import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MeasureReport, Resource, ValueSet } from 'fhir/r4';
import { createServerApp } from '../src/bootstrap';
import { loadConfig } from '../src/config';
import { syntheaResources } from '../test/helpers/synthea';
import { breastCancerScreeningMeasure, libraries, valueSets } from '../test/measures/ecqm';
import { cql, hypertensionValueSet, measure, ownLibrary, pop } from '../test/measures/own-measures';

/**
 * `npm run bench:measure`: the Synthea set (100 patients, 38,970 resources) stored in SQLite (a
 * temporary DATA_DIR), then $evaluate-measure timed:
 * - a proportion measure of our own in CQL (ELM; hypertension among patients with encounters,
 *   strata by gender, gender as supplemental data): a population report over all 100 patients
 *   (target < 5 s), and each patient's individual report (target p50 < 50 ms);
 * - the published Breast Cancer Screening eCQM (7 libraries, 37 value sets) the same way.
 */

const TARGET_POPULATION_MS = 5000;
const TARGET_P50_MS = 50;

const ownMeasure = measure('bench-hypertension', {
  scoringCode: 'proportion',
  library: [ownLibrary.url as string],
  group: [
    {
      id: 'main',
      population: [
        pop('initial-population', cql('Initial Population')),
        pop('denominator', cql('Denominator')),
        pop('numerator', cql('Numerator')),
      ],
      stratifier: [{ id: 'by-gender', criteria: cql('Gender') }],
    },
  ],
  supplementalData: [{ id: 'sex', criteria: cql('Gender') }],
});

/** Synthea codes hypertension as SNOMED 59621000 (Essential hypertension). */
const benchValueSet: ValueSet = {
  ...hypertensionValueSet,
  compose: {
    include: [
      {
        system: 'http://snomed.info/sct',
        concept: [{ code: '59621000', display: 'Essential hypertension' }, { code: '38341003' }],
      },
    ],
  },
};

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fhir-bench-measure-'));
  const server = await createServerApp({ ...loadConfig({ LOG_LEVEL: 'silent' }), dataDir: dir });
  const failures: string[] = [];
  try {
    const resources = syntheaResources();
    const loadStarted = Date.now();
    for (let i = 0; i < resources.length; i += 1000)
      await server.core.repository.in('default').transaction((tx) => tx.putMany(resources.slice(i, i + 1000)));
    const content: Resource[] = [
      benchValueSet,
      ownLibrary,
      ownMeasure,
      ...libraries(),
      ...valueSets(),
      breastCancerScreeningMeasure as Resource,
    ];
    for (const r of content) {
      const res = await server.app.inject({
        method: 'PUT',
        url: `/fhir/R4/${r.resourceType}/${r.id}`,
        headers: { 'content-type': 'application/fhir+json' },
        payload: r,
      });
      if (res.statusCode >= 300)
        throw new Error(`${r.resourceType}/${r.id}: ${res.statusCode} ${res.body.slice(0, 300)}`);
    }
    console.log(
      `stored ${resources.length} Synthea resources and ${content.length} measure resources in ${Date.now() - loadStarted} ms`,
    );
    const patients = resources.filter((r) => r.resourceType === 'Patient').map((r) => r.id as string);

    for (const [label, id, period] of [
      ['own proportion measure (CQL as ELM)', ownMeasure.id as string, 'periodStart=2019-01-01&periodEnd=2019-12-31'],
      [
        'published Breast Cancer Screening eCQM',
        breastCancerScreeningMeasure.id,
        'periodStart=2019-01-01&periodEnd=2019-12-31',
      ],
    ] as const) {
      const url = `/fhir/R4/Measure/${id}/$evaluate-measure?${period}`;
      // One warm-up: the first evaluation compiles the libraries and expands the value sets.
      const warm = Date.now();
      await server.app.inject({ method: 'GET', url: `${url}&subject=Patient/${patients[0]}` });
      const warmMs = Date.now() - warm;
      const started = Date.now();
      const res = await server.app.inject({ method: 'GET', url: `${url}&reportType=population` });
      const populationMs = Date.now() - started;
      if (res.statusCode !== 200) {
        failures.push(`${label}: population ${res.statusCode} ${res.body.slice(0, 200)}`);
        continue;
      }
      const report = res.json() as MeasureReport;
      const counts = (report.group?.[0]?.population ?? [])
        .map((p) => `${p.code?.coding?.[0]?.code} ${p.count}`)
        .join(', ');
      const times: number[] = [];
      for (const patient of patients) {
        const t = process.hrtime.bigint();
        const one = await server.app.inject({ method: 'GET', url: `${url}&subject=Patient/${patient}` });
        times.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (one.statusCode !== 200) throw new Error(`${label} ${patient}: ${one.statusCode} ${one.body.slice(0, 300)}`);
      }
      times.sort((a, b) => a - b);
      const p50 = percentile(times, 50);
      console.log(
        `${label}: first request ${warmMs} ms; population report over ${patients.length} patients ${populationMs} ms (${counts}; score ${report.group?.[0]?.measureScore?.value}); ` +
          `individual reports p50 ${p50.toFixed(1)} ms, p95 ${percentile(times, 95).toFixed(1)} ms, max ${times[times.length - 1].toFixed(1)} ms`,
      );
      if (id === ownMeasure.id) {
        if (populationMs > TARGET_POPULATION_MS)
          failures.push(`${label}: population ${populationMs} ms > ${TARGET_POPULATION_MS} ms`);
        if (p50 > TARGET_P50_MS) failures.push(`${label}: p50 ${p50.toFixed(1)} ms > ${TARGET_P50_MS} ms`);
      }
    }
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
  if (failures.length > 0) {
    console.error(`targets missed: ${failures.join('; ')}`);
    process.exit(1);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
