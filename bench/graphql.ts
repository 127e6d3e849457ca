import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/helpers/process';
import { rssMb, startProcess, stop, waitForOk, START_ARGS } from './harness';
import { loadByTransactions } from './synthea-load';

/**
 * `npm run bench:graphql`: the Synthea set loaded into the server (as `npm start` runs it, on
 * SQLite), then, for each patient in turn, one instance-level $graphql query for the patient with
 * its Conditions, Encounters and latest 50 Observations (reverse references, each Observation's
 * subject followed back). Reported: the first query (the schema is built then), then p50/p95/p99
 * of sequential queries for BENCH_SECONDS.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);

const QUERY = `{
  id name { family given } birthDate
  ConditionList(_reference: patient) { code { text } onsetDateTime }
  EncounterList(_reference: patient, _count: 50) { type { text } period { start end } }
  ObservationList(_reference: subject, _sort: "-date", _count: 50) {
    code { text } valueQuantity { value unit } effectiveDateTime
    subject { reference }
  }
}`;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-bench-graphql-'));
  const port = await freePort();
  const server = startProcess(START_ARGS, {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    AUTH_TOKENS: '',
    BODY_LIMIT: '64mb',
  });
  try {
    await waitForOk(`http://127.0.0.1:${port}/fhir/R4/metadata`, 60_000);
    const loaded = await loadByTransactions(port);
    console.log(`loaded ${loaded.resources} Synthea resources in ${(loaded.ms / 1000).toFixed(1)} s`);
    // Transactions POST their entries: the server gave the patients their ids.
    const found = (await (await fetch(`http://127.0.0.1:${port}/fhir/R4/Patient?_count=1000&_elements=id`)).json()) as {
      entry?: { resource: { id: string } }[];
    };
    const patients = (found.entry ?? []).map((e) => e.resource.id);
    const ask = async (id: string) => {
      const started = process.hrtime.bigint();
      const res = await fetch(`http://127.0.0.1:${port}/fhir/R4/Patient/${id}/$graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: QUERY }),
      });
      const body = (await res.json()) as { errors?: unknown[]; data?: { ObservationList?: unknown[] } };
      if (res.status !== 200 || body.errors)
        throw new Error(`$graphql failed: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      return {
        ms: Number(process.hrtime.bigint() - started) / 1e6,
        observations: body.data?.ObservationList?.length ?? 0,
      };
    };
    const first = await ask(patients[0]);
    console.log(`first query (builds the schema): ${first.ms.toFixed(0)} ms`);
    const times: number[] = [];
    let observations = 0;
    const until = Date.now() + SECONDS * 1000;
    for (let i = 0; Date.now() < until; i++) {
      const r = await ask(patients[i % patients.length]);
      times.push(r.ms);
      observations += r.observations;
    }
    times.sort((a, b) => a - b);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(1);
    console.log(
      `patient + conditions + encounters + latest 50 observations: ${times.length} queries, p50 ${at(0.5)} ms, p95 ${at(0.95)} ms, p99 ${at(0.99)} ms; ${(observations / times.length).toFixed(1)} observations per answer`,
    );
    console.log(`server RSS: ${rssMb(server.pid)} MB`);
  } finally {
    await stop(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
