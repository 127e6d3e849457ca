import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { BatchReply, FhirPathAnswer, FhirPathJob, WorkerData, WorkerReady } from './protocol';

/**
 * The bounded evaluator of FHIRPath that users wrote (Subscription criteria, stored profiles'
 * invariants, GraphQL `fhirpath:` arguments). HL7's engine is synchronous and an expression can
 * take minutes and gigabytes on a large resource (`name.select(%current.name.given)` is a cross
 * product), so it cannot run on the event loop: a few worker threads evaluate, each with a capped
 * heap, and a batch that runs past its time has its worker stopped (and replaced on next use).
 * The event loop only posts a message and awaits the answer. Callers send one batch per resource
 * (every expression to evaluate against it), so the message costs are paid once per write.
 */

export interface FhirPathPoolOptions {
  /** Most worker threads at once (FHIRPATH_WORKERS). */
  workers: number;
  /** Most time one expression may run before its worker is stopped (FHIRPATH_TIMEOUT_MS). */
  timeoutMs: number;
  /** Heap cap of each worker, in MB (FHIRPATH_MEMORY_MB). */
  memoryMb: number;
}

export interface EvaluateOptions {
  /** Epoch ms after which nothing more is evaluated (the request's deadline). */
  deadline?: number;
  /**
   * After a job runs out of its budget: `continue` evaluates the jobs after it in a fresh worker
   * (Subscription criteria: each is its own user's); `stop` (default) answers `budget` for them
   * too (one answer is all the caller needs to refuse the request).
   */
  afterOverrun?: 'continue' | 'stop';
}

interface Slot {
  worker: Worker;
  progress: Int32Array;
  /** Settles once the worker has loaded the engine (true), or failed to (false). */
  ready: Promise<boolean>;
  /** The batch it is evaluating: settles with the reply, or with where the worker stopped. */
  current?: (outcome: Outcome) => void;
}

/** A batch answered, or stopped at job `at` (out of time, out of memory, or the pool closing). */
type Outcome = { answers: FhirPathAnswer[] } | { at: number; answer: FhirPathAnswer };

const require = createRequire(import.meta.url);

export class FhirPathPool {
  private readonly idle: Slot[] = [];
  private readonly live = new Set<Slot>();
  private readonly waiting: ((slot: Slot | undefined) => void)[] = [];
  private nextId = 0;
  private closed = false;
  /** Batches posted to a worker, and those stopped (out of time or memory, or closing): for metrics and tests. */
  readonly stats = { batches: 0, stopped: 0 };

  constructor(private readonly options: FhirPathPoolOptions) {}

  /**
   * One answer per job, in order. A job that runs out of time or memory answers `budget`; the
   * jobs before it are evaluated again in a fresh worker (their answers went with the stopped
   * one), the jobs after it as `afterOverrun` says. Never rejects.
   */
  async evaluate(jobs: FhirPathJob[], options: EvaluateOptions = {}): Promise<FhirPathAnswer[]> {
    if (jobs.length === 0) return [];
    const deadline = options.deadline ?? Number.POSITIVE_INFINITY;
    if (this.closed) return jobs.map(() => closing());
    if (Date.now() >= deadline)
      return jobs.map(() => stopped('the time of the request was spent before it could be evaluated'));
    const outcome = await this.once(jobs, deadline);
    if ('answers' in outcome) return outcome.answers;
    const before = await this.evaluate(jobs.slice(0, outcome.at), options);
    const rest = jobs.slice(outcome.at + 1);
    const after =
      options.afterOverrun === 'continue' ? await this.evaluate(rest, options) : rest.map(() => outcome.answer);
    return [...before, outcome.answer, ...after];
  }

  /** Stops every worker; batches in flight answer `unavailable`. */
  async close(): Promise<void> {
    this.closed = true;
    for (const wake of this.waiting.splice(0)) wake(undefined);
    await Promise.all(
      [...this.live].map((slot) =>
        this.stop(slot, { at: Math.max(0, Atomics.load(slot.progress, 0)), answer: closing() }),
      ),
    );
  }

  /** Live workers (for tests and metrics). */
  get size(): number {
    return this.live.size;
  }

  private async once(jobs: FhirPathJob[], deadline: number): Promise<Outcome> {
    const slot = await this.acquire();
    if (!slot || !(await slot.ready))
      return { at: 0, answer: slot ? unavailable('its FHIRPath worker did not start') : closing() };
    return new Promise<Outcome>((resolve) => {
      const watch = this.watchdog(slot, deadline);
      slot.current = (outcome) => {
        clearInterval(watch);
        slot.current = undefined;
        if ('answers' in outcome && this.live.has(slot)) this.release(slot);
        resolve(outcome);
      };
      // -1 until the worker has the batch: receiving it (a copy of the resource) is not the expression's time.
      Atomics.store(slot.progress, 0, -1);
      this.stats.batches++;
      slot.worker.postMessage({ id: ++this.nextId, jobs });
    });
  }

  /**
   * Stops the worker when one job has been running for FHIRPATH_TIMEOUT_MS (so a batch of many
   * cheap ones is not cut short), or when the request's deadline has passed. The job is watched
   * through the progress cell, every quarter of the limit: one is stopped after 1 to 1.5 times it.
   */
  private watchdog(slot: Slot, deadline: number): NodeJS.Timeout {
    const { timeoutMs } = this.options;
    let seen = -1;
    let since = Date.now();
    const timer = setInterval(
      () => {
        const now = Date.now();
        const at = Atomics.load(slot.progress, 0);
        if (now >= deadline) {
          void this.stop(slot, { at: Math.max(0, at), answer: stopped('the time of the request ran out') });
        } else if (at !== seen) {
          seen = at;
          since = now;
        } else if (at >= 0 && now - since >= timeoutMs) {
          void this.stop(slot, { at, answer: stopped(`it did not finish within ${timeoutMs} ms`) });
        }
      },
      Math.max(5, Math.floor(timeoutMs / 4)),
    );
    timer.unref();
    return timer;
  }

  private acquire(): Promise<Slot | undefined> {
    const slot = this.idle.pop();
    if (slot) return Promise.resolve(slot);
    if (this.live.size < this.options.workers) return Promise.resolve(this.spawn());
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(slot: Slot): void {
    const next = this.waiting.shift();
    if (next) next(slot);
    else this.idle.push(slot);
  }

  /** Ends a worker (its batch settling with `outcome`); whoever waits for a worker gets a new one. */
  private async stop(slot: Slot, outcome: Outcome): Promise<void> {
    if (!this.live.delete(slot)) return;
    if (slot.current) this.stats.stopped++;
    const at = this.idle.indexOf(slot);
    if (at >= 0) this.idle.splice(at, 1);
    slot.current?.(outcome);
    const next = this.waiting.shift();
    if (next) next(this.closed ? undefined : this.spawn());
    await slot.worker.terminate().catch(() => undefined);
  }

  private spawn(): Slot {
    const progress = new SharedArrayBuffer(4);
    const worker = startWorker({ progress } satisfies WorkerData, this.options.memoryMb);
    // An idle worker never keeps the process alive; close() ends the busy ones.
    worker.unref();
    let started: (ok: boolean) => void = () => undefined;
    const slot: Slot = {
      worker,
      progress: new Int32Array(progress),
      ready: new Promise((resolve) => (started = resolve)),
    };
    worker.on('message', (reply: BatchReply | WorkerReady) => {
      if ('ready' in reply) started(true);
      else slot.current?.({ answers: reply.answers });
    });
    worker.once('exit', () => started(false));
    worker.on('error', (err: Error & { code?: string }) => {
      const reason =
        err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? `it ran out of memory (${this.options.memoryMb} MB)`
          : `its worker failed (${err.message.slice(0, 200)})`;
      void this.stop(slot, { at: Math.max(0, Atomics.load(slot.progress, 0)), answer: stopped(reason) });
    });
    worker.on(
      'exit',
      () =>
        void this.stop(slot, {
          at: Math.max(0, Atomics.load(slot.progress, 0)),
          answer: stopped('its worker stopped'),
        }),
    );
    this.live.add(slot);
    return slot;
  }
}

function closing(): FhirPathAnswer {
  return unavailable('the server is stopping');
}

function unavailable(message: string): FhirPathAnswer {
  return { ok: false, error: 'unavailable', message };
}

function stopped(message: string): FhirPathAnswer {
  return { ok: false, error: 'budget', message };
}

/**
 * The worker: dist/fhirpath-worker.mjs beside the bundle under `npm start`; the TypeScript source
 * under tsx and the tests, loaded through tsx's loader (Node 20 workers do not take `--import`).
 */
function startWorker(workerData: WorkerData, memoryMb: number): Worker {
  const resourceLimits = {
    maxOldGenerationSizeMb: memoryMb,
    maxYoungGenerationSizeMb: Math.min(16, Math.max(1, Math.floor(memoryMb / 4))),
  };
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./fhirpath-worker.mjs', import.meta.url), { workerData, resourceLimits });
  const tsx = pathToFileURL(tsxEsmApi()).href;
  const entry = new URL('./worker.ts', import.meta.url).href;
  const boot = `import(${JSON.stringify(tsx)}).then((api) => { api.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(boot, { eval: true, workerData, resourceLimits });
}

/** tsx's ESM loader API, found through its package's exports (its CommonJS twin registers from the wrong place when imported). */
function tsxEsmApi(): string {
  const manifest = require.resolve('tsx/package.json');
  const exports = (require(manifest) as { exports: Record<string, { import: { default: string } }> }).exports;
  return join(dirname(manifest), exports['./esm/api'].import.default);
}
