import cluster from 'node:cluster';
import { ConfigError, loadConfig, readEnv } from './config';
import { runPrimary } from './cluster';
import { trackQuietConnections } from './http/connections';

/**
 * Entry point: config -> app -> listen, and a graceful stop on SIGTERM/SIGINT. With WORKERS > 1
 * this process only starts and watches the workers (src/cluster.ts), each of which runs this too.
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(readEnv());
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (config.workers > 1 && cluster.isPrimary) {
    runPrimary({ workers: config.workers, drainTimeoutMs: config.drainTimeoutMs, logLevel: config.logLevel });
    return;
  }
  // Loaded here, not above: a primary never needs it.
  const { createServerApp } = await import('./bootstrap');
  const server = await createServerApp(config);
  const { app } = server;
  if (config.authTokens.length === 0) {
    app.log.warn('AUTH_TOKENS is not set: the server accepts anonymous requests');
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal, drainTimeoutMs: config.drainTimeoutMs }, 'stopping: finishing in-flight requests');
    // Work still running when the drain time is over is cut off (long engine work gives the
    // event loop back often enough for this timer to fire).
    setTimeout(() => {
      app.log.warn({ signal }, 'drain time over: exiting with requests still in flight');
      process.exit(1);
    }, config.drainTimeoutMs).unref();
    // Connections idle at the signal are closed by app.close(); those whose request finishes during
    // the drain go idle later and would stay open (keep-alive) until the drain time is over, so they
    // are closed as they go idle. (Once requests were answered between turns of the event loop, the
    // signal found requests in flight, and the drain waited out its whole time.)
    setInterval(() => {
      connections.closeQuiet();
      app.server.closeIdleConnections();
    }, 50).unref();
    try {
      await server.close();
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  const connections = trackQuietConnections(app.server);
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  await app.listen({ port: config.port, host: config.host });
  app.log.info({ storage: config.databaseUrl ? 'postgres' : `sqlite in ${config.dataDir}` }, 'ready');
}

main().catch((err: unknown) => {
  process.stderr.write(`failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
