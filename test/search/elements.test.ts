import type { Bundle, Observation } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { onBothBackends, putResource, type OpenServer } from '../helpers/server-app';

/** `_elements` (R4 search.html): choice elements by their base name, and the mandatory elements kept, on both backends. */

const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`_elements (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const search = async (query: string) => {
      const res = await server.app.inject({ method: 'GET', url: `/fhir/R4/Observation?_id=elements-obs&${query}` });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as Bundle).entry?.[0].resource as Observation & Record<string, unknown>;
    };
    beforeAll(async () => {
      ({ server, cleanup } = await open());
      await putResource(server.app, {
        resourceType: 'Observation',
        id: 'elements-obs',
        status: 'final',
        category: [{ text: 'vital-signs' }],
        code: { text: 'heart rate' },
        effectiveDateTime: '2024-01-02',
        valueQuantity: { value: 60, unit: '/min' },
        _effectiveDateTime: { extension: [{ url: 'http://example.org/precision', valueString: 'day' }] },
        note: [{ text: 'resting' }],
      } as Observation);
    });
    afterAll(() => cleanup?.());

    test('a choice element named by its base name (effective, value) keeps its typed form; the mandatory status is kept; SUBSETTED', async () => {
      const subset = await search('_elements=code,effective,value');
      expect(Object.keys(subset).sort()).toEqual([
        '_effectiveDateTime',
        'code',
        'effectiveDateTime',
        'id',
        'meta',
        'resourceType',
        'status',
        'valueQuantity',
      ]);
      expect(subset.valueQuantity).toEqual({ value: 60, unit: '/min' });
      expect(subset.meta?.tag).toContainEqual(SUBSETTED);
    });

    test('a mandatory element is kept even when not named; a typed name (valueQuantity) still works; others go', async () => {
      const subset = await search('_elements=valueQuantity');
      expect(Object.keys(subset).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status', 'valueQuantity']);
      expect(subset.meta?.tag).toContainEqual(SUBSETTED);
    });
  });
}

onBothBackends(suite);
