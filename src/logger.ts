import pino, { type Logger } from 'pino';
import type { Config } from './config';

/**
 * The server's logger: made first by the composition root and given to every part that logs
 * (the job queue, subscriptions, bot schedules) and to the HTTP app, whose request loggers are
 * its children. Authorization headers never reach a log line.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, stream: NodeJS.WritableStream = process.stdout): Logger {
  return pino({ level: config.logLevel, redact: ['req.headers.authorization', 'headers.authorization'] }, stream);
}
