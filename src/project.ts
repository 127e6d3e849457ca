import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The project's own folder (where package.json and definitions/ live), found by walking up from
 * this module: the same answer whether the server runs from src/ through tsx or from the
 * bundle in dist/.
 */
function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'definitions'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the project folder (package.json next to definitions/)');
    dir = parent;
  }
}

export const PROJECT_ROOT = findRoot();
export const DEFINITIONS_DIR = join(PROJECT_ROOT, 'definitions');
export const PACKAGE = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};
