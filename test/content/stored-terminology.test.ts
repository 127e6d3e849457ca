import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CodeSystem, ConceptMap } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { outputs, partsOf, putResource, serverApp } from '../helpers/server-app';
import { codeSystem } from './packages';

/**
 * A server reads stored terminology another process wrote as the JSON the store holds, looks it
 * up by the few members it needs and parses a resource when a request first reaches it. Here
 * server A writes and server B, over the same database file, answers: everything B knows came
 * to it as stored JSON, never as objects A had in hand.
 */

const pets: CodeSystem = { ...codeSystem('pets', ['dog', 'cat']), valueSet: 'http://example.org/fhir/ValueSet/pets-all' };
const colors = codeSystem('colors', ['red', 'green']);
const petsInFrench: CodeSystem = {
  resourceType: 'CodeSystem',
  id: 'pets-fr',
  url: 'http://example.org/fhir/CodeSystem/pets-fr',
  version: '1.0.0',
  status: 'active',
  content: 'supplement',
  supplements: pets.url,
  extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/codesystem-supplement-type', valueCode: 'lang-pack' }],
  concept: [{ code: 'dog', designation: [{ language: 'fr', value: 'Chien' }] }],
};
const petColors: ConceptMap = {
  resourceType: 'ConceptMap',
  id: 'pet-colors',
  url: 'http://example.org/fhir/ConceptMap/pet-colors',
  status: 'active',
  group: [{ source: pets.url, target: colors.url, element: [{ code: 'dog', target: [{ code: 'red', equivalence: 'equivalent' }] }] }],
};

/**
 * A server asks the store for changes once per turn of its event loop (StoredTerminology): two
 * HTTP requests never share a turn, but injected requests and another app's write can.
 */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('stored terminology written by another process', () => {
  let dir: string;
  let writer: ServerApp;
  let reader: ServerApp;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fhir-stored-'));
    // Every request reads the marks (FRESHNESS_CHECK=request): this is about what B reads, not when.
    writer = await serverApp({ dataDir: dir, freshnessCheck: 'request' });
    for (const resource of [pets, colors, petsInFrench, petColors]) await putResource(writer.app, resource);
    reader = await serverApp({ dataDir: dir, freshnessCheck: 'request' });
  });
  afterAll(async () => {
    await reader?.close();
    await writer?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = async (url: string) => {
    const res = await reader.app.inject({ method: 'GET', url: `/fhir/R4${url}` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  test("a code system's implicit value set (CodeSystem.valueSet) is found", async () => {
    expect(outputs(await get(`/ValueSet/$validate-code?url=${pets.valueSet}&system=${pets.url}&code=dog`)).result).toBe(true);
    expect(outputs(await get(`/ValueSet/$validate-code?url=${pets.valueSet}&system=${pets.url}&code=red`)).result).toBe(false);
  });

  test('a stored language pack applies to its code system without being asked for', async () => {
    const body = await get(`/CodeSystem/$lookup?system=${pets.url}&code=dog`);
    expect(partsOf(body, 'designation')).toContainEqual(expect.objectContaining({ language: 'fr', value: 'Chien' }));
  });

  test('a stored concept map is used by a translation that names no map', async () => {
    const body = await get(`/ConceptMap/$translate?system=${pets.url}&code=dog&targetsystem=${colors.url}`);
    expect(outputs(body).result).toBe(true);
    expect(partsOf(body, 'match')[0]).toMatchObject({ equivalence: 'equivalent', concept: { system: colors.url, code: 'red' } });
  });

  test('an update and a deletion by the other process replace and remove what is held', async () => {
    const withBird: CodeSystem = { ...pets, concept: [...(pets.concept ?? []), { code: 'bird' }] };
    await putResource(writer.app, withBird);
    await nextTurn();
    expect(outputs(await get(`/ValueSet/$validate-code?url=${pets.valueSet}&system=${pets.url}&code=bird`)).result).toBe(true);
    const deleted = await writer.app.inject({ method: 'DELETE', url: '/fhir/R4/ConceptMap/pet-colors' });
    expect(deleted.statusCode).toBe(204);
    await nextTurn();
    const body = await get(`/ConceptMap/$translate?system=${pets.url}&code=dog&targetsystem=${colors.url}`);
    expect(outputs(body).result).toBe(false);
  });
});
