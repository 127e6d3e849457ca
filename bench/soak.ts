import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { freePort } from '../test/helpers/process';
import { FHIR_JSON, ROOT, rssMb, startProcess, stop, waitForOk, START_ARGS } from './harness';

/**
 * `npm run soak`: SOAK_SECONDS (default 60) of mixed traffic at 64 connections on loopback against
 * the server as `npm start` runs it: validate-code by GET (repeated and never repeated) and POST,
 * create, read, update and delete, and paged expansions. Passes when there is no error and no
 * non-2xx answer, and RSS grows less than 10% between the first third and the end. Writes
 * bench/soak-results.json.
 */

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const CONNECTIONS = 64;
const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const GENDER = 'http://hl7.org/fhir/administrative-gender';

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-soak-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = startProcess(START_ARGS, {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    AUTH_TOKENS: '',
  });
  const samples: { second: number; rssMb: number }[] = [];
  try {
    await waitForOk(`${base}/fhir/R4/metadata`, 30_000);
    // The resource read below must exist from the start; deletes only touch odd ids.
    await fetch(`${base}/fhir/R4/Patient/soak-0`, {
      method: 'PUT',
      headers: { 'content-type': FHIR_JSON },
      body: JSON.stringify({ resourceType: 'Patient', id: 'soak-0' }),
    });
    let n = 0;
    const next = () => n++;
    const vc = (extra: Record<string, string>) =>
      `/fhir/R4/ValueSet/$validate-code?${new URLSearchParams({ url: GENDER_VS, system: GENDER, ...extra })}`;
    const patient = (i: number) =>
      JSON.stringify({
        resourceType: 'Patient',
        id: `soak-${i % 500}`,
        gender: i % 2 ? 'male' : 'female',
        birthDate: '1970-01-01',
      });
    // Each connection walks this list in order, again and again; ids differ per request.
    const requests: autocannon.Request[] = [
      { method: 'GET', path: vc({ code: 'female' }) },
      { method: 'GET', path: vc({ code: 'x' }), setupRequest: (r) => ({ ...r, path: vc({ code: `nope-${next()}` }) }) },
      {
        method: 'POST',
        path: '/fhir/R4/ValueSet/$validate-code',
        headers: { 'content-type': FHIR_JSON },
        body: JSON.stringify({
          resourceType: 'Parameters',
          parameter: [
            { name: 'url', valueUri: GENDER_VS },
            { name: 'coding', valueCoding: { system: GENDER, code: 'male' } },
          ],
        }),
      },
      {
        method: 'PUT',
        path: '/fhir/R4/Patient/soak-0',
        headers: { 'content-type': FHIR_JSON },
        body: patient(0),
        setupRequest: (r) => {
          const i = next();
          return { ...r, path: `/fhir/R4/Patient/soak-${i % 500}`, body: patient(i) };
        },
      },
      { method: 'GET', path: '/fhir/R4/Patient/soak-0' },
      {
        method: 'POST',
        path: '/fhir/R4/Patient',
        headers: { 'content-type': FHIR_JSON },
        body: JSON.stringify({ resourceType: 'Patient', active: true }),
      },
      {
        method: 'GET',
        path: '/fhir/R4/ValueSet/$expand',
        setupRequest: (r) => ({
          ...r,
          path: `/fhir/R4/ValueSet/$expand?url=${encodeURIComponent('http://hl7.org/fhir/ValueSet/resource-types')}&count=20&offset=${(next() % 7) * 20}`,
        }),
      },
      {
        method: 'GET',
        path: '/fhir/R4/CodeSystem/$lookup?system=http://hl7.org/fhir/administrative-gender&code=other',
      },
      {
        method: 'DELETE',
        path: '/fhir/R4/Patient/soak-1',
        setupRequest: (r) => ({ ...r, path: `/fhir/R4/Patient/soak-${(next() % 500) | 1}` }),
      },
    ];
    const sampler = setInterval(() => samples.push({ second: samples.length + 1, rssMb: rssMb(server.pid) }), 1000);
    const result = await autocannon({ url: base, connections: CONNECTIONS, duration: SECONDS, requests });
    clearInterval(sampler);
    const at = (second: number) => samples[Math.min(samples.length, second) - 1]?.rssMb ?? 0;
    const early = at(Math.round(SECONDS / 3));
    const late = at(SECONDS);
    const growth = early > 0 ? (late - early) / early : 0;
    const summary = {
      date: new Date().toISOString(),
      seconds: SECONDS,
      connections: CONNECTIONS,
      requests: result.requests.total,
      requestsPerSecond: Math.round(result.requests.average),
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.errors + result.timeouts,
      non2xx: result.non2xx,
      rssMbAtOneThird: early,
      rssMbAtEnd: late,
      rssGrowth: Math.round(growth * 1000) / 10,
      rssSamples: samples.map((s) => s.rssMb),
    };
    writeFileSync(join(ROOT, 'bench', 'soak-results.json'), `${JSON.stringify(summary, null, 2)}\n`);
    console.log(
      `${summary.requests} requests in ${SECONDS} s (${summary.requestsPerSecond}/s, p50 ${summary.p50} ms, p99 ${summary.p99} ms), ` +
        `${summary.errors} errors, ${summary.non2xx} non-2xx; RSS ${early} MB at ${Math.round(SECONDS / 3)} s, ${late} MB at ${SECONDS} s (${summary.rssGrowth}%)`,
    );
    if (summary.errors > 0 || summary.non2xx > 0 || growth >= 0.1) {
      console.error('soak failed: errors, non-2xx answers or RSS growth of 10% or more');
      process.exitCode = 1;
    }
  } finally {
    await stop(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
