import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Measure, MeasureReport, Resource } from 'fhir/r4';
import { sharedMaterial } from '../helpers/shared';

/**
 * The published eCQM in ../shared/data/ecqm-breast-cancer-screening (CQF eCQM content IG, CC0):
 * its Libraries, ValueSets and test cases, read as published. The folder holds no Measure
 * resource, so `breastCancerScreeningMeasure` rebuilds the published one's computable part
 * (cqframework/ecqm-content-r4, input/resources/measure/BreastCancerScreeningFHIR.json: url,
 * version, library, scoring, population basis, improvement notation, the group as published,
 * criteria language `text/cql.identifier` included); its narrative elements are left out.
 */

/** Tests that read it check `ECQM.present` first and otherwise skip with `skipWithout(ECQM)`. */
export const ECQM = sharedMaterial('eCQM', 'data', 'ecqm-breast-cancer-screening');
export const ECQM_DIR = ECQM.path;
const TESTS = join(ECQM_DIR, 'tests', 'BreastCancerScreeningFHIR');

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

function jsonFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? jsonFiles(path) : name.endsWith('.json') ? [path] : [];
    });
}

export function libraries(): Resource[] {
  return jsonFiles(join(ECQM_DIR, 'resources', 'library')).map((f) => readJson<Resource>(f));
}

export function valueSets(): Resource[] {
  return jsonFiles(join(ECQM_DIR, 'vocabulary', 'valueset')).map((f) => readJson<Resource>(f));
}

export interface TestCase {
  name: string;
  patient: string;
  resources: Resource[];
  expected?: MeasureReport;
}

export function testCases(): TestCase[] {
  return readdirSync(TESTS)
    .sort()
    .map((name) => {
      const files = jsonFiles(join(TESTS, name));
      const report = files.find((f) => /measurereport-[^/]*\.json$/.test(f));
      const resources = files.filter((f) => f !== report).map((f) => readJson<Resource>(f));
      const patient = resources.find((r) => r.resourceType === 'Patient')?.id as string;
      return { name, patient, resources, expected: report ? readJson<MeasureReport>(report) : undefined };
    });
}

const POPULATION = 'http://terminology.hl7.org/CodeSystem/measure-population';
const population = (id: string, code: string, display: string) => ({
  id,
  code: { coding: [{ system: POPULATION, code, display }] },
  criteria: { language: 'text/cql.identifier', expression: display },
});

export const breastCancerScreeningMeasure = {
  resourceType: 'Measure',
  id: 'BreastCancerScreeningFHIR',
  extension: [
    { url: 'http://hl7.org/fhir/us/cqfmeasures/StructureDefinition/cqfm-populationBasis', valueCode: 'boolean' },
  ],
  url: 'http://ecqi.healthit.gov/ecqms/Measure/BreastCancerScreeningFHIR',
  version: '2.0.003',
  name: 'BreastCancerScreeningFHIR',
  title: 'Breast Cancer Screening FHIR',
  status: 'draft',
  library: ['http://ecqi.healthit.gov/ecqms/Library/BreastCancerScreeningFHIR'],
  scoring: {
    coding: [
      { system: 'http://terminology.hl7.org/CodeSystem/measure-scoring', code: 'proportion', display: 'Proportion' },
    ],
  },
  improvementNotation: {
    coding: [{ system: 'http://terminology.hl7.org/CodeSystem/measure-improvement-notation', code: 'increase' }],
  },
  group: [
    {
      id: 'group-1',
      population: [
        population('3D2DD734-0712-484A-BE23-B1D2FF96D83A', 'initial-population', 'Initial Population'),
        population('C4B18753-73BC-4D48-801E-82AB55A70139', 'denominator', 'Denominator'),
        population('7C770CA2-5177-4C5F-A976-7F57EC9BC311', 'denominator-exclusion', 'Denominator Exclusion'),
        population('57BC5171-93A7-4D9B-AA42-18A344C8623B', 'numerator', 'Numerator'),
      ],
    },
  ],
} satisfies Measure;

/**
 * The population counts a case's folder name stands for, where no expected report is published:
 * `numer` in numerator, `denom` in denominator only, `denomexcl` excluded, `neg-ip` in nothing.
 */
export function countsFromName(name: string): Record<string, number> {
  const kind = name.replace(/-EXM\d+$/, '');
  const counts = { 'initial-population': 1, denominator: 1, 'denominator-exclusion': 0, numerator: 0 };
  if (kind === 'numer') counts.numerator = 1;
  else if (kind === 'denomexcl') counts['denominator-exclusion'] = 1;
  else if (kind === 'neg-ip')
    return { 'initial-population': 0, denominator: 0, 'denominator-exclusion': 0, numerator: 0 };
  else if (kind !== 'denom') throw new Error(`no counts known for a case named ${name}`);
  return counts;
}

/** Population code -> count of a report's first group. */
export function countsOf(report: MeasureReport): Record<string, number> {
  return Object.fromEntries(
    (report.group?.[0]?.population ?? []).map((p) => [p.code?.coding?.[0]?.code as string, p.count as number]),
  );
}

/** A dateTime with a time and no timezone (R4 requires one): `2019-01-16T08:30:00`. */
const NO_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;

/**
 * The minimal repairs R4 needs of a published test resource the server refuses, each recorded
 * as `path: what`: a time without a timezone gets the expected reports' offset (-07:00); a
 * narrative without its required `div` is dropped. Nothing else is touched.
 */
export function repaired(resource: Resource, log: string[]): Resource {
  const at = `${resource.resourceType}/${resource.id}`;
  const walk = (value: unknown, path: string): unknown => {
    if (typeof value === 'string' && NO_ZONE.test(value)) {
      log.push(`${at} ${path}: '${value}' given the timezone -07:00`);
      return `${value}-07:00`;
    }
    if (Array.isArray(value)) return value.map((v, i) => walk(v, `${path}[${i}]`));
    if (typeof value === 'object' && value !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) {
        if (k === 'text' && typeof v === 'object' && v !== null && !('div' in v)) {
          log.push(`${at} ${path}.text: narrative without div dropped`);
          continue;
        }
        out[k] = walk(v, `${path}.${k}`);
      }
      return out;
    }
    return value;
  };
  return walk(resource, resource.resourceType) as Resource;
}
