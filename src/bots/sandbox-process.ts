import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type IsolatedVM from 'isolated-vm-types';
import { PRELUDE, RUN, wrapModule } from './prelude';
import { fhirError } from '../fhir/errors';
import {
  ENVELOPE_CHARS,
  refusedCall,
  type BotResult,
  type FromSandbox,
  type RunLimits,
  type ToSandbox,
} from './protocol';

/**
 * The bot sandbox: a child process of the server (src/bots/runner.ts forks it) that holds V8
 * isolates (isolated-vm) and runs each execution in a fresh context of a pooled isolate. An isolate
 * runs on its own thread, so a bot that loops forever never blocks this process's event loop: the
 * wall-clock timer here disposes the isolate, which ends whatever it was doing. The server is a
 * second line of defence: it kills and restarts this process if an answer is late (a V8 fatal
 * out-of-memory can take the whole process down).
 */

/**
 * isolated-vm builds against one V8 line: 5.x for Node 20 to 24, 7.x for Node 24 and later. Both are
 * optional dependencies under their own names (package.json), npm installs whichever builds on the
 * Node that installs them, and the sandbox takes the newer one present. The types come from either
 * (tsconfig paths `isolated-vm-types`); the API the sandbox uses is the same in both.
 */
function loadIsolatedVm(): typeof IsolatedVM {
  const require = createRequire(import.meta.url);
  const problems: string[] = [];
  for (const name of ['isolated-vm-7', 'isolated-vm-5']) {
    try {
      return require(name) as typeof IsolatedVM;
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(
    `no build of isolated-vm loads on Node ${process.version} (run npm ci on this Node): ${problems.join('; ')}`,
  );
}

const ivm = loadIsolatedVm();

const IDLE_ISOLATES = 8;
const CACHED_SCRIPTS = 64;

class Slot {
  readonly isolate: IsolatedVM.Isolate;
  private readonly scripts = new Map<string, IsolatedVM.Script>();
  /** The prelude and the call of the handler, compiled once per isolate. */
  readonly prelude: IsolatedVM.Script;
  readonly run: IsolatedVM.Script;

  constructor(readonly memoryMb: number) {
    this.isolate = new ivm.Isolate({ memoryLimit: memoryMb });
    this.prelude = this.isolate.compileScriptSync(PRELUDE, { filename: 'prelude.js' });
    this.run = this.isolate.compileScriptSync(RUN, { filename: 'run.js' });
  }

  /** The bot's module script, compiled once per isolate for the same code. */
  async script(code: string): Promise<IsolatedVM.Script> {
    const key = createHash('sha256').update(code).digest('base64url');
    const known = this.scripts.get(key);
    if (known) return known;
    const script = await this.isolate.compileScript(wrapModule(code), { filename: 'bot.js' });
    if (this.scripts.size >= CACHED_SCRIPTS) {
      const first = this.scripts.keys().next().value as string;
      this.scripts.get(first)?.release();
      this.scripts.delete(first);
    }
    this.scripts.set(key, script);
    return script;
  }
}

const idle: Slot[] = [];

function acquire(memoryMb: number): Slot {
  const index = idle.findIndex((s) => s.memoryMb === memoryMb && !s.isolate.isDisposed);
  if (index >= 0) return idle.splice(index, 1)[0];
  return new Slot(memoryMb);
}

function release(slot: Slot): void {
  if (slot.isolate.isDisposed) return;
  if (idle.length >= IDLE_ISOLATES) {
    slot.isolate.dispose();
    return;
  }
  idle.push(slot);
}

/** Client calls waiting for the server's answer, by execution and call number. */
const waiting = new Map<string, (answer: string) => void>();
let calls = 0;

function send(message: FromSandbox): void {
  process.send?.(message);
}

async function run(message: Extract<ToSandbox, { kind: 'run' }>): Promise<void> {
  const { id, limits } = message;
  const log = new Log(limits.logBytes);
  const slot = acquire(limits.memoryMb);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    slot.isolate.dispose();
  }, limits.timeoutMs);
  let context: IsolatedVM.Context | undefined;
  try {
    // Everything runs asynchronously, on the isolate's thread: this process's loop stays free to
    // answer other executions and to end this one with the timer above.
    context = await slot.isolate.createContext();
    const global = context.global;
    await Promise.all([
      global.set('__hostLog', new ivm.Callback((level: string, text: string) => log.add(level, text))),
      global.set(
        '__hostClient',
        new ivm.Reference((request: unknown, body: unknown) => clientCall({ id, request, body, limits })),
      ),
      global.set('__botEvent', message.event),
    ]);
    await slot.prelude.run(context, { timeout: limits.timeoutMs });
    const script = await slot.script(message.code);
    await script.run(context, { timeout: limits.timeoutMs });
    const out = (await slot.run.run(context, { timeout: limits.timeoutMs, promise: true, copy: true })) as string;
    if (out.length > limits.outputBytes) throw new Error(`the bot's answer is larger than ${limits.outputBytes} bytes`);
    send({ kind: 'done', id, ok: true, result: JSON.parse(out) as BotResult, log: log.text() });
  } catch (err) {
    send({ kind: 'done', id, ok: false, error: reason(err, { timedOut, slot, limits }), log: log.text() });
  } finally {
    clearTimeout(timer);
    if (!slot.isolate.isDisposed) context?.release();
    release(slot);
  }
}

function reason(err: unknown, facts: { timedOut: boolean; slot: Slot; limits: RunLimits }): string {
  if (facts.timedOut) return `the bot did not finish within its timeout of ${facts.limits.timeoutMs / 1000} s`;
  const message = err instanceof Error ? err.message : String(err);
  if (facts.slot.isolate.isDisposed || /memory limit|allocation failed/i.test(message)) {
    if (!facts.slot.isolate.isDisposed) facts.slot.isolate.dispose();
    return `the bot ran out of memory (limit ${facts.limits.memoryMb} MB): ${message}`;
  }
  if (/Script execution timed out/i.test(message))
    return `the bot did not finish within its timeout of ${facts.limits.timeoutMs / 1000} s`;
  return message;
}

/**
 * A FHIR call of a bot's client: sent to the server, which answers as the bot. What cannot be
 * a call (not text, or over the limits) is answered here, so that it never crosses to the server:
 * a body over BODY_LIMIT is 413 as over HTTP (the server checks again, in bytes and depth).
 */
function clientCall(call: { id: number; request: unknown; body: unknown; limits: RunLimits }): Promise<string> {
  const { id, request, body, limits } = call;
  if (typeof request !== 'string' || (body !== undefined && typeof body !== 'string')) {
    return Promise.resolve(
      JSON.stringify(refusedCall(fhirError('ERR_REQUEST_INVALID', { reason: 'a bot call must be text' }))),
    );
  }
  if (request.length > ENVELOPE_CHARS) {
    return Promise.resolve(
      JSON.stringify(
        refusedCall(
          fhirError('ERR_REQUEST_INVALID', {
            reason: `the call's URL, query and headers are longer than ${ENVELOPE_CHARS} characters`,
          }),
        ),
      ),
    );
  }
  if (body !== undefined && body.length > limits.bodyBytes)
    return Promise.resolve(JSON.stringify(refusedCall(fhirError('ERR_BODY_TOO_LARGE', { limit: limits.bodyBytes }))));
  const number = ++calls;
  return new Promise((resolve) => {
    waiting.set(`${id}:${number}`, resolve);
    send({ kind: 'client-call', id, call: number, request, body });
  });
}

/** A syntax check: the code compiles in an isolate (it does not run). */
async function compile(message: Extract<ToSandbox, { kind: 'compile' }>): Promise<void> {
  const slot = acquire(16);
  try {
    const script = await slot.isolate.compileScript(wrapModule(message.code), { filename: 'bot.js' });
    script.release();
    send({ kind: 'done', id: message.id, ok: true, result: { kind: 'none' }, log: '' });
  } catch (err) {
    send({ kind: 'done', id: message.id, ok: false, error: err instanceof Error ? err.message : String(err), log: '' });
  } finally {
    release(slot);
  }
}

/** The console output of one execution, cut at the limit. */
class Log {
  private readonly lines: string[] = [];
  private bytes = 0;
  private cut = false;

  constructor(private readonly limit: number) {}

  add(level: string, text: string): void {
    if (this.cut) return;
    const line = level === 'info' ? String(text) : `[${level}] ${String(text)}`;
    if (this.bytes + line.length + 1 > this.limit) {
      this.lines.push(`${line.slice(0, Math.max(0, this.limit - this.bytes))}... (log cut at ${this.limit} bytes)`);
      this.cut = true;
      return;
    }
    this.bytes += line.length + 1;
    this.lines.push(line);
  }

  text(): string {
    return this.lines.join('\n');
  }
}

process.on('message', (message: ToSandbox) => {
  if (message.kind === 'run') void run(message);
  else if (message.kind === 'compile') void compile(message);
  else if (message.kind === 'client-answer') {
    const key = `${message.id}:${message.call}`;
    waiting.get(key)?.(message.answer);
    waiting.delete(key);
  }
});
// The server went away: so does the sandbox.
process.on('disconnect', () => process.exit(0));
send({ kind: 'ready' });
