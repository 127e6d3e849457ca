import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServerApp } from '../src/bootstrap';
import { loadConfig } from '../src/config';
import { syntheaResources } from '../test/helpers/synthea';

/**
 * `npm run bench:export`: the whole Synthea set (38,970 resources and the Group) stored in SQLite
 * (a temporary DATA_DIR), then a system `$export` timed from kick-off to the finished job, and the
 * download of every file; per-type counts checked against what was stored; resident memory
 * before and after.
 */

const rssMb = () => Math.round(process.memoryUsage().rss / 1024 / 1024);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fhir-bench-export-'));
  const server = await createServerApp({ ...loadConfig({ LOG_LEVEL: 'silent' }), dataDir: dir });
  try {
    const resources = syntheaResources();
    const loadStarted = Date.now();
    for (let i = 0; i < resources.length; i += 1000)
      await server.core.repository.in('default').transaction((tx) => tx.putMany(resources.slice(i, i + 1000)));
    console.log(`stored ${resources.length} resources in ${Date.now() - loadStarted} ms`);
    const expected: Record<string, number> = {};
    for (const r of resources) expected[r.resourceType] = (expected[r.resourceType] ?? 0) + 1;
    // The first request after a bulk load catches up with it (stored terminology, search parameters); not the export's time.
    const warmStarted = Date.now();
    await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient?_count=1' });
    console.log(`first request after the load: ${Date.now() - warmStarted} ms`);
    const rssBefore = rssMb();
    const kickStarted = Date.now();
    const kick = await server.app.inject({
      method: 'GET',
      url: '/fhir/R4/$export',
      headers: { prefer: 'respond-async' },
    });
    if (kick.statusCode !== 202) throw new Error(`kick-off: ${kick.statusCode} ${kick.body}`);
    const started = Date.now();
    console.log(`kick-off answered in ${started - kickStarted} ms`);
    const location = kick.headers['content-location'] as string;
    const id = location.slice(location.lastIndexOf('/') + 1);
    for (;;) {
      const job = await server.jobs.get(id);
      if (job?.state === 'done' || job?.state === 'dead') break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const exportMs = Date.now() - started;
    const manifest = (
      await server.app.inject({ method: 'GET', url: location.replace(/^https?:\/\/[^/]+/, '') })
    ).json() as { output: { type: string; url: string; count: number }[] };
    const downloadStarted = Date.now();
    let lines = 0;
    for (const output of manifest.output) {
      const res = await server.app.inject({ method: 'GET', url: output.url.replace(/^https?:\/\/[^/]+/, '') });
      const n = res.body.split('\n').filter((l) => l !== '').length;
      if (n !== expected[output.type]) throw new Error(`${output.type}: ${n} lines, ${expected[output.type]} stored`);
      lines += n;
    }
    const downloadMs = Date.now() - downloadStarted;
    if (lines !== resources.length) throw new Error(`${lines} lines, ${resources.length} stored`);
    console.log(
      `system export of ${lines} resources: ${exportMs} ms after kick-off (${Math.round(lines / (exportMs / 1000))} resources/s); download ${downloadMs} ms; rss ${rssBefore} -> ${rssMb()} MB`,
    );
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
