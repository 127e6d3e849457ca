import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { OperationOutcome } from 'fhir/r4';
import { expect } from 'vitest';

/**
 * The R4 specification's own examples (hl7.fhir.r4.examples 4.0.1, a dev dependency), and the
 * ones that are really invalid, each with the errors it must get and why.
 */

const require = createRequire(import.meta.url);
export const EXAMPLES_DIR = dirname(require.resolve('hl7.fhir.r4.examples/package.json'));

const CONFORMANCE =
  /^(SearchParameter|ValueSet|CodeSystem|StructureDefinition|ConceptMap|OperationDefinition|CompartmentDefinition|CapabilityStatement|NamingSystem|ImplementationGuide|StructureMap|GraphDefinition|MessageDefinition|TerminologyCapabilities|ExampleScenario)-/;

export interface ExampleFile {
  file: string;
  size: number;
}

function files(filter: (name: string) => boolean): ExampleFile[] {
  return readdirSync(EXAMPLES_DIR)
    .filter((f) => f.endsWith('.json') && f !== 'package.json' && f !== 'ig-r4.json' && filter(f))
    .sort()
    .map((file) => ({ file, size: statSync(`${EXAMPLES_DIR}/${file}`).size }));
}

/** The 719 clinical examples: every file of the package that is not a conformance resource. */
export function clinicalExamples(): ExampleFile[] {
  return files((f) => !CONFORMANCE.test(f));
}

/** The package's SearchParameters, CodeSystems and ValueSets. */
export function terminologyAndSearchDefinitions(): ExampleFile[] {
  return files((f) => /^(SearchParameter|CodeSystem|ValueSet)-/.test(f));
}

export function readExample(file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(`${EXAMPLES_DIR}/${file}`, 'utf8')) as Record<string, unknown>;
}

export interface KnownInvalid {
  /** Every error the file gets matches one of these (and each of these matches some error). */
  errors: RegExp[];
  reason: string;
}

const FULL_URL = /The fullUrl '.*' does not match the resource it holds/;
const EMPTY_NARRATIVE = /Constraint failed: txt-2/;
const NOT_A_MIME_TYPE = /in the CodeSystem 'urn:ietf:bcp:13'/;

/** Files of the package that break R4's rules, with the finding each must produce. */
export const KNOWN_INVALID: Record<string, KnownInvalid> = {
  'Questionnaire-qs1.json': {
    errors: [/minimum required = 1, but only found 0 \(Questionnaire\.item\.linkId\)/],
    reason: 'nested items have no linkId (1..1)',
  },
  'Bundle-dataelements.json': {
    errors: [/Constraint failed: bdl-7/],
    reason: 'several entries share one fullUrl and have no meta.versionId (bdl-7)',
  },
  'Bundle-v2-valuesets.json': {
    errors: [/is not a valid code/],
    reason:
      "CodeSystem v2-0550 has codes with a trailing non-breaking space ('CHEST\\u00a0'), which code's pattern forbids",
  },
  'Bundle-10bb101f-a121-4264-a920-67be9cb82c74.json': {
    errors: [FULL_URL],
    reason: "an entry's fullUrl ends in Patient/pat12 but holds Patient/pat2",
  },
  'Bundle-3a0707d3-549e-4467-b8b8-5a2ab3800efe.json': {
    errors: [FULL_URL],
    reason: "an entry's fullUrl ends in Patient/pat12 but holds Patient/pat2",
  },
  'Bundle-lri-example.json': {
    errors: [FULL_URL],
    reason: 'fullUrls end in lri-gramstain1 etc. while the resources are gramstain1 etc.',
  },
  'DeviceMetric-example.json': {
    errors: [/points to a DeviceDefinition, but only Device may be referenced here/],
    reason: 'DeviceMetric.parent is Reference(Device); the example points to a DeviceDefinition',
  },
  'DeviceUseStatement-example.json': {
    errors: [/points to a Procedure, but only Condition, Observation, DiagnosticReport, DocumentReference, Media/],
    reason: 'reasonReference does not allow Procedure in R4',
  },
  'MedicationRequest-medrx0301.json': {
    errors: [/points to a Practitioner, but only Organization may be referenced here/],
    reason: 'dispenseRequest.performer is Reference(Organization)',
  },
  'Observation-clinical-gender.json': {
    errors: [
      /points to a Encounter, but only Practitioner, PractitionerRole, Organization, CareTeam, Patient, RelatedPerson/,
    ],
    reason: 'performer cannot be an Encounter',
  },
  'ActivityDefinition-blood-tubes-supply.json': {
    errors: [EMPTY_NARRATIVE],
    reason: 'text.div holds only whitespace (txt-2)',
  },
  'ActivityDefinition-heart-valve-replacement.json': {
    errors: [EMPTY_NARRATIVE],
    reason: 'text.div holds only whitespace (txt-2)',
  },
  'EventDefinition-example.json': { errors: [EMPTY_NARRATIVE], reason: 'text.div holds only whitespace (txt-2)' },
  'Questionnaire-zika-virus-exposure-assessment.json': {
    errors: [EMPTY_NARRATIVE],
    reason: 'text.div holds only whitespace (txt-2)',
  },
  ...Object.fromEntries(
    [
      'TestScript-testscript-example-history.json',
      'TestScript-testscript-example-multisystem.json',
      'TestScript-testscript-example-readtest.json',
      'TestScript-testscript-example-search.json',
      'TestScript-testscript-example-update.json',
      'TestScript-testscript-example.json',
      'Bundle-resources.json',
    ].map((file) => [
      file,
      {
        errors: [NOT_A_MIME_TYPE],
        reason:
          "operation.accept and contentType are bound (required) to MIME types; the TestScripts write 'json' and 'xml', which are not MIME types (the engine's MIME provider says so)",
      },
    ]),
  ),
  'Bundle-b0a5e4277-83c4-4adb-87e2-e3efe3369b6f.json': {
    errors: [NOT_A_MIME_TYPE],
    reason:
      "Endpoint.payloadMimeType is bound (required) to MIME types; 'application/dicom; variant=DICOM WADO-RS' has a parameter value with a space that is not quoted (RFC 2045 tokens have no spaces)",
  },
};

const MISSING_BASE = /minimum required = 1, but only found 0 \(SearchParameter\.base\)/;

/** The package's SearchParameters and CodeSystems that break R4's rules (no ValueSet does). */
export const KNOWN_INVALID_DEFINITIONS: Record<string, KnownInvalid> = {
  ...Object.fromEntries(
    ['codesystem', 'valueset'].flatMap((kind) =>
      ['author', 'effective', 'end', 'keyword', 'workflow'].map((name) => [
        `SearchParameter-${kind}-extensions-${kind === 'codesystem' ? 'CodeSystem' : 'ValueSet'}-${name}.json`,
        { errors: [MISSING_BASE], reason: 'a search parameter on an extension, written without base (1..*)' },
      ]),
    ),
  ),
  'SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json': {
    errors: [/is not a valid id/],
    reason: 'its id is 67 characters long; an id has at most 64',
  },
  'CodeSystem-v2-0550.json': {
    errors: [/is not a valid code/],
    reason: "codes with a trailing non-breaking space ('CHEST\\u00a0')",
  },
};

/** Asserts that exactly the known files have errors, and that their errors are the known ones. */
export function expectOnlyKnownErrors(found: Record<string, string[]>, known: Record<string, KnownInvalid>): void {
  expect(Object.keys(found).sort()).toEqual(Object.keys(known).sort());
  for (const [file, errors] of Object.entries(found)) {
    const { errors: patterns } = known[file];
    for (const error of errors)
      expect(
        patterns.some((p) => p.test(error)),
        `${file}: ${error}`,
      ).toBe(true);
    for (const pattern of patterns)
      expect(
        errors.some((e) => pattern.test(e)),
        `${file}: no error matches ${pattern}`,
      ).toBe(true);
  }
}

/** Validates through the server (`POST [type]/$validate`, the resource in a Parameters) and returns the error texts. */
export async function errorsOf(app: FastifyInstance, resource: Record<string, unknown>): Promise<string[]> {
  const res = await app.inject({
    method: 'POST',
    url: `/fhir/R4/${String(resource.resourceType)}/$validate`,
    headers: { 'content-type': 'application/fhir+json' },
    payload: { resourceType: 'Parameters', parameter: [{ name: 'resource', resource }] },
  });
  expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
  const outcome = res.json() as OperationOutcome;
  return outcome.issue
    .filter((i) => i.severity === 'error' || i.severity === 'fatal')
    .map((i) => `${i.expression?.[0]}: ${i.details?.text}`);
}

/** Each file validated through the server; the errors of those that have some, by file name. */
export async function errorsByFile(app: FastifyInstance, files: ExampleFile[]): Promise<Record<string, string[]>> {
  const found: Record<string, string[]> = {};
  for (const { file } of files) {
    const errors = await errorsOf(app, readExample(file));
    if (errors.length > 0) found[file] = errors;
  }
  return found;
}

/** The known invalid files among these. */
export function knownAmong(files: ExampleFile[], known: Record<string, KnownInvalid>): Record<string, KnownInvalid> {
  return Object.fromEntries(Object.entries(known).filter(([file]) => files.some((f) => f.file === file)));
}
