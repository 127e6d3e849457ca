import { fork, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { asFhirError } from '../fhir/outcome';
import { parseJsonBody } from '../fhir/json-body';
import {
  ENVELOPE_CHARS,
  refusedCall,
  type BotResult,
  type ClientAnswer,
  type ClientRequest,
  type FromSandbox,
  type RunLimits,
  type ToSandbox,
} from './protocol';
import { FairSlots } from './slots';

/**
 * The server's side of the bot sandbox: forks src/bots/sandbox-process.ts (dist/bot-sandbox.mjs
 * once built), sends it executions, answers its bots' client calls, and restarts it when it dies.
 * Each execution has a deadline here too (timeout + grace): a sandbox that does not answer by then
 * is killed, its executions fail, and the next one starts a new sandbox.
 */

export type RunOutcome = { ok: true; result: BotResult; log: string } | { ok: false; error: string; log: string };

/** Answers a bot's FHIR call (the server runs it as the bot's principal). */
export type ClientHandler = (request: ClientRequest) => Promise<ClientAnswer>;

interface Pending {
  resolve: (outcome: RunOutcome) => void;
  client?: ClientHandler;
  timer: NodeJS.Timeout;
}

/**
 * Time the sandbox has beyond a bot's own timeout to report it (it ends the bot itself, on time;
 * this is for a sandbox that is stuck, and generous so that a loaded machine does not look stuck).
 */
const GRACE_MS = 5000;
/**
 * Executions in the sandbox at once; more wait their turn (each may hold an isolate of up to
 * BOT_MEMORY_MB, so this bounds the sandbox's memory too).
 */
const MAX_RUNNING = 16;
/** Executions of one project that may wait for a slot before more are refused (429). */
const QUEUE_PER_PROJECT = 64;

/**
 * V8 flags of the sandbox process. isolated-vm's memoryLimit counts the V8 heap and ArrayBuffers
 * made through its allocator, but not WebAssembly memories nor resizable/growable buffers (V8
 * reserves and commits those itself): one bot grew a Wasm memory to 3.84 GB under a 128 MB limit.
 * No bot needs either, so neither exists in any isolate: the prelude deletes WebAssembly, resize and
 * grow before a bot runs, and on Node 20 V8's --no-expose-wasm and --no-harmony-rab-gsab take
 * them out of V8 as well (Node 24 and later refuse those flags as bad options). The sandbox's own heap (bodies and
 * answers in transit, logs) gets the process's ceiling as its limit (--max-old-space-size): a
 * fixed small one would let a few large bodies at once end every execution in the sandbox.
 */
const SANDBOX_FLAGS = [
  '--no-node-snapshot',
  ...(Number(process.versions.node.split('.')[0]) < 24 ? ['--no-expose-wasm', '--no-harmony-rab-gsab'] : []),
];
/** How often the server reads the sandbox's resident memory (Linux /proc). */
const RSS_CHECK_MS = 200;
/** What the sandbox process needs besides its isolates' heaps (Node, isolated-vm, messages). */
const SANDBOX_OVERHEAD_MB = 256;

export interface BotRunnerOptions {
  /** Heap of one isolate (BOT_MEMORY_MB): with the number of slots, the sandbox's expected size. */
  memoryMb?: number;
  /**
   * Resident memory past which the sandbox is killed and replaced, whatever it runs (a backstop
   * for any allocation the isolates' limit does not see). Default: memoryMb x slots + 256 MB.
   */
  sandboxMemoryMb?: number;
  /** Slots one project may hold at once (BOT_SLOTS_PER_PROJECT); default half of them. */
  slotsPerProject?: number;
  /** Executions of one project that may wait for a slot (BOT_QUEUE_PER_PROJECT); more are refused. */
  queuePerProject?: number;
}

/** One execution of a bot. */
export interface Execution {
  code: string;
  /** The event, as JSON. */
  event: string;
  limits: RunLimits;
  client: ClientHandler;
  /** Whose slots it takes (the bot's project): one project cannot hold them all. */
  project: string;
}

export class BotRunner {
  private child?: ChildProcess;
  /** Settles when the current sandbox has loaded (its start-up is not counted against any bot's time). */
  private ready?: Promise<boolean>;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closed = false;
  private readonly slots: FairSlots;
  private readonly ceilingMb: number;

  constructor(options: BotRunnerOptions = {}) {
    this.ceilingMb = options.sandboxMemoryMb ?? (options.memoryMb ?? 128) * MAX_RUNNING + SANDBOX_OVERHEAD_MB;
    const perProject = Math.min(options.slotsPerProject ?? MAX_RUNNING / 2, MAX_RUNNING);
    this.slots = new FairSlots({
      slots: MAX_RUNNING,
      perProject,
      queuePerProject: options.queuePerProject ?? QUEUE_PER_PROJECT,
    });
  }

  /** The sandbox process's id, while one runs. */
  get pid(): number | undefined {
    return this.child?.exitCode === null ? this.child.pid : undefined;
  }

  /** Runs the execution once a slot of its project's share is free; ERR_BOT_BUSY when its queue is full. */
  async run(execution: Execution): Promise<RunOutcome> {
    const { code, event, limits, client } = execution;
    const release = await this.slots.acquire(execution.project);
    try {
      return await this.send(
        { kind: 'run', id: ++this.nextId, code, event, limits },
        limits.timeoutMs + GRACE_MS,
        client,
      );
    } finally {
      release();
    }
  }

  /** Whether the code compiles in the sandbox; the syntax error's message when not. */
  async compile(code: string): Promise<string | undefined> {
    const outcome = await this.send({ kind: 'compile', id: ++this.nextId, code }, 10_000);
    return outcome.ok ? undefined : outcome.error;
  }

  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    this.child = undefined;
    this.failAll('the server is shutting down');
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  }

  private async send(
    message: ToSandbox & { id: number },
    deadlineMs: number,
    client?: ClientHandler,
  ): Promise<RunOutcome> {
    if (this.closed) return { ok: false, error: 'the server is shutting down', log: '' };
    const child = this.sandbox();
    if (!(await this.ready)) return { ok: false, error: 'the bot sandbox stopped before it started', log: '' };
    if (this.child !== child || !child.connected)
      return { ok: false, error: 'the bot sandbox stopped (a bot may have exhausted its memory)', log: '' };
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        // The sandbox did not answer in time: it is stuck, and so is anything else it runs.
        this.pending.delete(message.id);
        resolve({ ok: false, error: `the bot did not finish within its timeout (the sandbox was restarted)`, log: '' });
        this.restart(child, 'a bot sandbox stopped answering');
      }, deadlineMs);
      timer.unref();
      this.pending.set(message.id, { resolve, client, timer });
      child.send(message);
    });
  }

  private sandbox(): ChildProcess {
    if (this.child && this.child.exitCode === null && this.child.connected) return this.child;
    const source = import.meta.url.endsWith('.ts');
    const entry = fileURLToPath(new URL(source ? './sandbox-process.ts' : './bot-sandbox.mjs', import.meta.url));
    // isolated-vm wants no startup snapshot; the TypeScript source runs through tsx.
    const child = fork(entry, [], {
      execArgv: [...SANDBOX_FLAGS, `--max-old-space-size=${this.ceilingMb}`, ...(source ? ['--import', 'tsx'] : [])],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
    });
    let started: (ok: boolean) => void = () => undefined;
    this.ready = new Promise((resolve) => (started = resolve));
    child.on('message', (message: FromSandbox) => {
      if (message.kind === 'ready') started(true);
      else this.receive(child, message);
    });
    const watch = this.watchMemory(child);
    child.on('exit', () => {
      clearInterval(watch);
      started(false);
      if (this.child === child) {
        this.child = undefined;
        this.failAll('the bot sandbox stopped (a bot may have exhausted its memory)');
      }
    });
    child.on('error', () => undefined);
    this.child = child;
    return child;
  }

  /**
   * Reads the sandbox's resident memory (VmRSS in /proc/<pid>/status) and replaces the sandbox
   * once it holds more than the ceiling: what it runs fails, and nothing it allocated stays.
   * Where there is no /proc (not Linux), the V8 flags and the isolates' limits stand alone.
   */
  private watchMemory(child: ChildProcess): NodeJS.Timeout {
    let reading = false;
    const timer = setInterval(() => {
      if (reading || child.pid === undefined) return;
      reading = true;
      readFile(`/proc/${child.pid}/status`, 'utf8')
        .then((status) => {
          const kb = Number(/^VmRSS:\s*(\d+)/m.exec(status)?.[1] ?? 0);
          if (kb > this.ceilingMb * 1024)
            this.restart(
              child,
              `the bot sandbox held ${Math.round(kb / 1024)} MB, more than its ceiling of ${this.ceilingMb} MB, and was restarted`,
            );
        })
        .catch(() => clearInterval(timer))
        .finally(() => (reading = false));
    }, RSS_CHECK_MS);
    timer.unref();
    return timer;
  }

  private receive(child: ChildProcess, message: Exclude<FromSandbox, { kind: 'ready' }>): void {
    const pending = this.pending.get(message.id);
    if (!pending) return;
    if (message.kind === 'client-call') {
      void this.answerCall(pending.client, message).then((answer) => {
        if (child.connected)
          child.send({
            kind: 'client-answer',
            id: message.id,
            call: message.call,
            answer: JSON.stringify(answer),
          } satisfies ToSandbox);
      });
      return;
    }
    clearTimeout(pending.timer);
    this.pending.delete(message.id);
    pending.resolve(
      message.ok
        ? { ok: true, result: message.result, log: message.log }
        : { ok: false, error: message.error, log: message.log },
    );
  }

  /**
   * A bot's call, read as the HTTP layer reads a request (src/fhir/json-body.ts): the envelope is
   * small JSON; the body stays text for the handler to read under the body limits.
   */
  private async answerCall(
    handler: ClientHandler | undefined,
    message: Extract<FromSandbox, { kind: 'client-call' }>,
  ): Promise<ClientAnswer> {
    if (!handler) return { status: 400, message: 'no client here' };
    let request: ClientRequest;
    try {
      request = {
        ...(parseJsonBody(message.request, { bodyLimit: ENVELOPE_CHARS }) as ClientRequest),
        body: message.body,
      };
    } catch (err) {
      return refusedCall(asFhirError(err));
    }
    return handler(request).catch((err: unknown) => ({
      status: 500,
      message: err instanceof Error ? err.message : String(err),
    }));
  }

  private restart(child: ChildProcess, why: string): void {
    if (this.child === child) {
      this.child = undefined;
      this.failAll(why);
    }
    child.kill('SIGKILL');
  }

  private failAll(why: string): void {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.resolve({ ok: false, error: why, log: '' });
      this.pending.delete(id);
    }
  }
}
