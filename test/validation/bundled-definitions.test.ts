import { readFileSync } from 'node:fs';
import type { ElementDefinition, StructureDefinition } from 'fhir/r4';
import { expect, test } from 'vitest';
import { bundledDefinitionsDir } from '../../src/fhir/bundled-definitions';
import { BundledDefinitions } from '../../src/validation/bundled-definitions';

/**
 * The bundled definitions are read with the members validation never uses cut from their text
 * before parsing. What is left must be exactly the definition less those members, for every one.
 */

const DIR = bundledDefinitionsDir();
const FILES = [
  'profiles-types.json',
  'profiles-resources.json',
  'profiles-others.json',
  'extension-definitions.json',
  'profiles-medplum.json',
];
const ELEMENT_TEXTS = ['short', 'definition', 'comment', 'requirements', 'alias', 'mapping'] as const;

function withoutUnread(definition: StructureDefinition): StructureDefinition {
  const { text: _text, differential: _differential, ...rest } = definition;
  if (!rest.snapshot) return rest;
  const element = rest.snapshot.element.map((e) => {
    const copy: Partial<ElementDefinition> = { ...e };
    for (const key of ELEMENT_TEXTS) delete copy[key];
    return copy as ElementDefinition;
  });
  return { ...rest, snapshot: { ...rest.snapshot, element } };
}

test('every bundled definition reads as itself less its narrative, differential and element texts (or whole, where its layout is not the one cut)', () => {
  const bundled = new BundledDefinitions();
  let cut = 0;
  let whole = 0;
  for (const file of FILES) {
    const bundle = JSON.parse(readFileSync(`${DIR}/${file}`, 'utf8')) as { entry: { resource: StructureDefinition }[] };
    for (const { resource } of bundle.entry) {
      if (resource.resourceType !== 'StructureDefinition' || !resource.url) continue;
      const read = bundled.get(resource.url);
      if (JSON.stringify(read) === JSON.stringify(resource)) whole++;
      else {
        expect(read, resource.url).toEqual(withoutUnread(resource));
        cut++;
      }
    }
  }
  // The R4 bundles are all cut; Medplum's own (laid out differently) are read whole.
  expect(cut).toBeGreaterThan(600);
  expect(whole).toBeLessThan(30);
});
