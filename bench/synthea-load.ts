import { syntheaFiles } from '../test/helpers/synthea';

/** The Synthea set's resource counts per type (../shared/data/README.md). */
export const README_COUNTS: Record<string, number> = {
  Observation: 16315,
  Claim: 6083,
  Encounter: 3697,
  ExplanationOfBenefit: 3697,
  MedicationRequest: 2386,
  Procedure: 2351,
  Immunization: 1287,
  DiagnosticReport: 897,
  Condition: 639,
  Organization: 452,
  Practitioner: 452,
  CareTeam: 278,
  CarePlan: 278,
  Patient: 100,
  AllergyIntolerance: 38,
  ImagingStudy: 16,
  Device: 4,
};

/** POSTs every Synthea Bundle to the base as a transaction (two at a time), and checks what landed. */
export async function loadByTransactions(port: number): Promise<{ ms: number; resources: number }> {
  const { patients, shared } = syntheaFiles();
  const queue = [...shared, ...patients];
  const resources = queue.reduce((n, b) => n + (b.entry?.length ?? 0), 0);
  const started = Date.now();
  await Promise.all(
    [0, 1].map(async () => {
      for (let bundle = queue.shift(); bundle; bundle = queue.shift()) {
        const res = await fetch(`http://127.0.0.1:${port}/fhir/R4`, {
          method: 'POST',
          headers: { 'content-type': 'application/fhir+json', prefer: 'return=minimal' },
          body: JSON.stringify(bundle),
        });
        if (res.status !== 200)
          throw new Error(`a Synthea transaction failed: ${res.status} ${(await res.text()).slice(0, 300)}`);
        await res.arrayBuffer();
      }
    }),
  );
  const ms = Date.now() - started;
  for (const [type, expected] of Object.entries(README_COUNTS)) {
    const total = (
      (await (await fetch(`http://127.0.0.1:${port}/fhir/R4/${type}?_summary=count`)).json()) as { total: number }
    ).total;
    if (total !== expected) throw new Error(`${type}: ${total} stored, the data's README says ${expected}`);
  }
  return { ms, resources };
}
