import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../project';
import type { PublicRoutes } from '../public-routes';
import { fileUnder, sendStatic, type StaticFile } from '../static-files';

/** The console's sources (browser TypeScript, HTML, CSS): bundled by esbuild the first time they are asked for. */
export const CONSOLE_DIR = join(PROJECT_ROOT, 'web', 'console');

/**
 * The web console: `/` is its page, `/console/app.js` and `/console/app.css` what the page loads.
 * The script is bundled from web/console/ on first use (esbuild is a dependency already), so a fresh
 * clone needs no build step beyond `npm start`, and tests serve the same files.
 */
export function registerConsoleRoutes(routes: PublicRoutes): void {
  let files: Promise<Map<string, StaticFile>> | undefined;
  const load = () => {
    files ??= consoleFiles().catch((err: unknown) => {
      files = undefined;
      throw err;
    });
    return files;
  };
  routes.get('/', async (request, reply) => sendStatic(reply, (await load()).get('index.html'), request.url, 0));
  routes.under('/console', async (request, reply) =>
    sendStatic(reply, (await load()).get(fileUnder(request.url, '/console')), request.url),
  );
}

async function consoleFiles(): Promise<Map<string, StaticFile>> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [join(CONSOLE_DIR, 'main.ts')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const files = new Map<string, StaticFile>();
  files.set('app.js', { name: 'app.js', body: result.outputFiles[0].text });
  for (const name of ['index.html', 'app.css']) files.set(name, { name, body: readFileSync(join(CONSOLE_DIR, name)) });
  return files;
}
