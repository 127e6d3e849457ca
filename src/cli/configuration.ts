import { ConfigError, loadConfig, readEnv, type Config } from '../config';

/**
 * The configuration a command-line tool runs with (the server's: environment and .env), or
 * undefined after saying on stderr what is wrong with it; the tool then exits with code 2.
 */
export function commandConfig(): Config | undefined {
  try {
    return loadConfig(readEnv());
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`configuration error: ${err.message}\n`);
    return undefined;
  }
}
