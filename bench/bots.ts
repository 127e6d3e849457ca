import { rssMb, runBench, withBuiltServer } from './harness';

/**
 * `npm run bench:bots`: the built server (as `npm start` runs it, on SQLite) with one trivial bot
 * (`return event.input`), deployed from TypeScript. Reported: the first $execute (the sandbox process
 * starts then), then p50/p95/p99 of sequential warm executions for BENCH_SECONDS, and executions per
 * second with BENCH_CONCURRENCY (default 8) executions in flight. Each execution writes its
 * AuditEvent (auditEventTrigger always, Medplum's default) unless BENCH_AUDIT=never.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const AUDIT = process.env.BENCH_AUDIT === 'never' ? 'never' : 'always';

runBench(() =>
  withBuiltServer('bots', {}, async (base, server) => {
    const put = await fetch(`${base}/Bot/trivial`, {
      method: 'PUT',
      headers: { 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Bot', id: 'trivial', name: 'trivial', auditEventTrigger: AUDIT }),
    });
    if (put.status >= 300) throw new Error(`PUT Bot: ${put.status} ${await put.text()}`);
    const code = 'export async function handler(medplum: unknown, event: { input: unknown }) { return event.input; }';
    const deployed = await fetch(`${base}/Bot/trivial/$deploy`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code, filename: 'trivial.ts' }),
    });
    if (deployed.status !== 200) throw new Error(`$deploy: ${deployed.status} ${await deployed.text()}`);
    const execute = async (i: number) => {
      const started = process.hrtime.bigint();
      const res = await fetch(`${base}/Bot/trivial/$execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ n: i }),
      });
      const body = (await res.json()) as { n?: number };
      if (res.status !== 200 || body.n !== i)
        throw new Error(`$execute failed: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      return Number(process.hrtime.bigint() - started) / 1e6;
    };
    console.log(`first $execute (starts the sandbox process): ${(await execute(0)).toFixed(0)} ms`);
    for (let i = 1; i <= 50; i++) await execute(i);
    const times: number[] = [];
    let until = Date.now() + SECONDS * 1000;
    for (let i = 0; Date.now() < until; i++) times.push(await execute(i));
    times.sort((a, b) => a - b);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(1);
    console.log(
      `trivial bot, sequential (warm): ${times.length} executions, p50 ${at(0.5)} ms, p95 ${at(0.95)} ms, p99 ${at(0.99)} ms`,
    );
    let done = 0;
    until = Date.now() + SECONDS * 1000;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, worker) => {
        for (let i = worker; Date.now() < until; i += CONCURRENCY) {
          await execute(i);
          done++;
        }
      }),
    );
    console.log(
      `trivial bot, ${CONCURRENCY} in flight: ${done} executions in ${((Date.now() - started) / 1000).toFixed(1)} s = ${(done / ((Date.now() - started) / 1000)).toFixed(0)} executions/s`,
    );
    console.log(`server RSS: ${rssMb(server.pid)} MB (the sandbox process is separate)`);
  }),
);
