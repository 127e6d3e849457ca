import { parentPort, workerData } from 'node:worker_threads';
import { compileExpression, correctedInvariant, type Compiled } from './engine';
import { fhirpathEngine } from './load';
import type { BatchReply, BatchRequest, FhirPathAnswer, FhirPathJob, WorkerData, WorkerReady } from './protocol';

/**
 * A FHIRPath worker thread (started by pool.ts; built to dist/fhirpath-worker.mjs). It evaluates
 * the expressions users wrote, which may take any time and memory, off the event loop that serves
 * requests: the pool stops it when it runs past its time, and its heap is capped. It writes the
 * index of the job it is on into the shared progress cell, so that the pool can tell which
 * expression was the costly one.
 */

const progress = new Int32Array((workerData as WorkerData).progress);
/** Compiled expressions, by base and text; bounded, as the expressions come from users. */
const compiled = new Map<string, Compiled | Error>();
const MAX_COMPILED = 1000;

function compiledOf(job: FhirPathJob): Compiled | Error {
  const base = job.invariant?.base ?? '';
  const key = `${base}\u0000${job.expression}`;
  let found = compiled.get(key);
  if (found) return found;
  try {
    found = job.invariant
      ? compileExpression(correctedInvariant(job.expression), { base, invariant: true })
      : compileExpression(job.expression);
  } catch (err) {
    found = new Error(
      `does not compile: ${String((err as Error).message)
        .split('\n')[0]
        .slice(0, 200)}`,
    );
  }
  if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value as string);
  compiled.set(key, found);
  return found;
}

function evaluate(job: FhirPathJob): FhirPathAnswer {
  const fn = compiledOf(job);
  if (fn instanceof Error) return { ok: false, error: 'invalid', message: fn.message };
  try {
    const result = fn(job.focus, job.vars ?? {});
    const first = typeof result[0] === 'boolean' ? result[0] : undefined;
    const summary = { length: result.length, first, hasFalse: result.includes(false) };
    // Through JSON: what goes back is plain data, whatever the engine answered.
    return job.values
      ? { ok: true, summary, values: JSON.parse(JSON.stringify(result)) as unknown[] }
      : { ok: true, summary };
  } catch (err) {
    return {
      ok: false,
      error: 'invalid',
      message: String((err as Error).message)
        .split('\n')[0]
        .slice(0, 200),
    };
  }
}

// Loaded before the first batch, so that its time limit is not spent on loading the engine.
fhirpathEngine();
parentPort?.postMessage({ ready: true } satisfies WorkerReady);

parentPort?.on('message', (request: BatchRequest) => {
  const answers = request.jobs.map((job, i) => {
    Atomics.store(progress, 0, i);
    return evaluate(job);
  });
  parentPort?.postMessage({ id: request.id, answers } satisfies BatchReply);
});
