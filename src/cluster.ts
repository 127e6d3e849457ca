import cluster, { type Worker } from 'node:cluster';
import pino from 'pino';
import { NOTICE_KEY, noticeOf } from './storage/cluster-notices';

/**
 * WORKERS > 1: this process is the primary. It forks that many server processes of the same entry
 * point, which share the port (the primary hands each new connection to the next worker), and
 * keeps them running: one that dies is started again (after a pause that grows while they keep
 * dying young). Over SQLite it relays notices between them (PostgreSQL carries its own). SIGTERM or
 * SIGINT stops them all, each finishing its requests within the drain time, and then the primary.
 *
 * Every worker is a complete server over the same storage: nothing one holds in memory goes stale
 * in another (see docs/storage.md#several-processes). The first worker starts alone (it runs the
 * migrations and any start-up reindex), the others once it listens.
 */

export interface ClusterOptions {
  workers: number;
  drainTimeoutMs: number;
  logLevel: string;
}

/** A worker that lived shorter than this before dying counts as a crash loop: the next start waits. */
const YOUNG_MS = 10_000;
const MAX_RESTART_DELAY_MS = 5_000;

export function runPrimary(options: ClusterOptions): void {
  const log = pino({ level: options.logLevel });
  const started = new Map<Worker, number>();
  let stopping = false;
  let restartDelay = 0;
  let listening = false;
  let stopFailed = false;

  const fork = () => {
    const worker = cluster.fork();
    started.set(worker, Date.now());
    worker.on('message', (message: unknown) => {
      const notice = noticeOf(message);
      if (!notice) return;
      for (const other of Object.values(cluster.workers ?? {}))
        if (other?.isConnected()) other.send({ [NOTICE_KEY]: notice });
    });
    return worker;
  };

  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (started.get(worker) ?? Date.now());
    started.delete(worker);
    if (stopping) {
      // Ended by the SIGTERM itself: a worker still starting (it had no handler yet).
      if (code !== 0 && signal !== 'SIGTERM') stopFailed = true;
      if (started.size === 0) process.exit(stopFailed ? 1 : 0);
      return;
    }
    if (!listening) {
      // The first worker could not start (configuration, storage): starting it again will not help.
      log.fatal({ worker: worker.process.pid, code, signal }, 'the first worker stopped before it listened');
      process.exit(1);
    }
    restartDelay = lived < YOUNG_MS ? Math.min(MAX_RESTART_DELAY_MS, Math.max(100, restartDelay * 2)) : 0;
    log.error(
      { worker: worker.process.pid, code, signal, livedMs: lived, restartInMs: restartDelay },
      'worker stopped; starting another',
    );
    setTimeout(() => {
      if (!stopping) fork();
    }, restartDelay).unref();
  });

  const first = fork();
  first.once('listening', (address) => {
    listening = true;
    log.info({ workers: options.workers, port: address.port }, 'first worker listening; starting the others');
    for (let i = 1; i < options.workers; i++) fork();
  });

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: started.size }, 'stopping the workers');
    for (const worker of started.keys()) worker.process.kill('SIGTERM');
    if (started.size === 0) process.exit(0);
    // A worker exits within its drain time; one that does not is ended.
    setTimeout(() => {
      for (const worker of started.keys()) worker.process.kill('SIGKILL');
      process.exit(1);
    }, options.drainTimeoutMs + 5_000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
