import { setImmediate as nextTurn } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import type { Meta, Resource } from 'fhir/r4';
import { fhirError, isFhirError } from '../fhir/errors';
import { ID_PATTERN, type ProjectRepository, type RepositoryTx } from '../storage/repository';
import { parseJson, type FhirPackage } from './fhir-package';

/**
 * Loads the conformance resources of a FHIR package into storage: every CodeSystem, ValueSet,
 * ConceptMap, StructureDefinition and SearchParameter, each under its own id. Everything is read
 * and parsed first; then, in ONE transaction (in batches), each resource is compared with what is
 * stored, and a new or changed one gets the checks a REST write gets and is written. A package
 * that fails anywhere leaves storage as it was; a resource whose stored content is the same is
 * left alone, so importing a package again writes nothing (and checks nothing again).
 */

export const IMPORTED_TYPES: readonly string[] = [
  'CodeSystem',
  'ValueSet',
  'ConceptMap',
  'StructureDefinition',
  'SearchParameter',
];

export type ImportPhase = 'read' | 'write';

export interface ImportProgress {
  phase: ImportPhase;
  done: number;
  total: number;
}

export interface ImportOptions {
  /** Where the package goes: the system scope, whose definitions every project sees. */
  repository: ProjectRepository;
  /** The checks a REST write of the resource gets (R4 schema, stored SearchParameter rules); throws a FhirError. */
  checkResource: (type: string, resource: Resource) => void;
  onProgress?: (progress: ImportProgress) => void;
  /** Epoch milliseconds after which the import stops (and stores nothing). */
  deadline?: number;
  /** Called when the deadline passes; answers the error to throw. */
  tooLong?: () => Error;
  /** Resources per batch of reads and writes inside the one transaction. */
  batchSize?: number;
}

export interface TypeCounts {
  created: number;
  updated: number;
  unchanged: number;
}

export interface ImportSummary {
  name: string;
  version: string;
  /** Per imported type, what happened to its resources. */
  types: Record<string, TypeCounts>;
  /** Resources of other types in the package, by type: not imported. */
  skipped: Record<string, number>;
  milliseconds: number;
  /** Time spent reading the files, and in the transaction (comparing, checking, writing). */
  phases: Record<ImportPhase, number>;
}

interface PackageResource {
  file: string;
  resource: Resource;
}

const DEFAULT_BATCH = 250;

export async function importPackage(pkg: FhirPackage, options: ImportOptions): Promise<ImportSummary> {
  const started = Date.now();
  const skipped: Record<string, number> = {};
  const resources = await readResources(pkg, skipped, options);
  checkIds(resources);
  const read = Date.now();
  const types: Record<string, TypeCounts> = {};
  for (const { resource } of resources) types[resource.resourceType] ??= { created: 0, updated: 0, unchanged: 0 };
  await options.repository.transaction(async (tx) => {
    // The transaction may be run again after losing a race: count afresh each time.
    for (const counts of Object.values(types)) Object.assign(counts, { created: 0, updated: 0, unchanged: 0 });
    const batch = options.batchSize ?? DEFAULT_BATCH;
    for (let at = 0; at < resources.length; at += batch) {
      await writeBatch(tx, resources.slice(at, at + batch), types, options);
      options.onProgress?.({ phase: 'write', done: Math.min(at + batch, resources.length), total: resources.length });
      checkDeadline(options);
      // Checking and writing thousands of resources takes seconds: let a server answer others meanwhile.
      await nextTurn();
    }
  });
  return {
    name: pkg.manifest.name,
    version: pkg.manifest.version,
    types,
    skipped,
    milliseconds: Date.now() - started,
    phases: { read: read - started, write: Date.now() - read },
  };
}

/** The package's resources of the imported types, parsed; `.index.json` says which files to read when present. */
async function readResources(
  pkg: FhirPackage,
  skipped: Record<string, number>,
  options: ImportOptions,
): Promise<PackageResource[]> {
  const wanted = new Set(IMPORTED_TYPES);
  const listed = pkg.index ? new Map(pkg.index.map((e) => [e.filename, e.resourceType])) : undefined;
  const names = [...(listed?.keys() ?? pkg.files.keys())].sort();
  const found: PackageResource[] = [];
  let done = 0;
  for (const file of names) {
    const type = listed?.get(file);
    if (type !== undefined && !wanted.has(type)) {
      skipped[type] = (skipped[type] ?? 0) + 1;
      continue;
    }
    const bytes = pkg.files.get(file);
    if (!bytes)
      throw fhirError('ERR_PACKAGE_INVALID', { reason: `.index.json lists ${file}, which the package does not have` });
    const json = parseJson(bytes, file) as { resourceType?: unknown } | null;
    if (typeof json !== 'object' || json === null || Array.isArray(json) || typeof json.resourceType !== 'string') {
      throw fhirError('ERR_PACKAGE_RESOURCE', { file, reason: 'it is not a FHIR resource (no resourceType)' });
    }
    if (type !== undefined && json.resourceType !== type) {
      throw fhirError('ERR_PACKAGE_RESOURCE', {
        file,
        reason: `it is a ${json.resourceType}, but .index.json says ${type}`,
      });
    }
    if (wanted.has(json.resourceType)) found.push({ file, resource: json as Resource });
    else skipped[json.resourceType] = (skipped[json.resourceType] ?? 0) + 1;
    if (++done % 200 === 0) {
      options.onProgress?.({ phase: 'read', done, total: names.length });
      await nextTurn();
    }
  }
  options.onProgress?.({ phase: 'read', done: names.length, total: names.length });
  return found;
}

/** Every resource has a valid id, and no two share a type and id. */
function checkIds(resources: PackageResource[]): void {
  const seen = new Map<string, string>();
  for (const { file, resource } of resources) {
    const { id, resourceType: type } = resource;
    if (typeof id !== 'string' || !ID_PATTERN.test(id)) {
      throw fhirError('ERR_PACKAGE_RESOURCE', {
        file,
        reason: id === undefined ? 'it has no id' : `'${String(id).slice(0, 100)}' is not a valid id`,
      });
    }
    const key = `${type}/${id}`;
    const other = seen.get(key);
    if (other) throw fhirError('ERR_PACKAGE_RESOURCE', { file, reason: `${other} has the same id (${key})` });
    seen.set(key, file);
  }
}

/**
 * One batch inside the transaction: resources whose stored content is the same are left alone;
 * the others get the checks a REST write gets (a throw rolls back everything) and are written.
 */
async function writeBatch(
  tx: RepositoryTx,
  batch: PackageResource[],
  types: Record<string, TypeCounts>,
  options: ImportOptions,
): Promise<void> {
  const changed: Resource[] = [];
  const stored = await currentContents(tx, batch);
  for (const { file, resource } of batch) {
    const current = stored.get(`${resource.resourceType}/${resource.id}`);
    if (current !== undefined && sameContent(JSON.parse(current) as Resource, resource)) {
      types[resource.resourceType].unchanged++;
      continue;
    }
    try {
      options.checkResource(resource.resourceType, resource);
    } catch (err) {
      if (isFhirError(err)) throw fhirError('ERR_PACKAGE_RESOURCE', { file, reason: err.message });
      throw err;
    }
    changed.push(resource);
  }
  if (changed.length === 0) return;
  const written = await tx.putMany(changed);
  written.forEach(({ created }, i) => types[changed[i].resourceType][created ? 'created' : 'updated']++);
}

/**
 * The current content of the batch's resources that exist and are not deleted, by type/id: one
 * query per type (the tables every backend has, as the search layer reads them), where reading
 * one by one would cost a round trip per resource on PostgreSQL.
 */
async function currentContents(tx: RepositoryTx, batch: PackageResource[]): Promise<Map<string, string>> {
  const idsByType = new Map<string, string[]>();
  for (const { resource } of batch)
    idsByType.set(resource.resourceType, [...(idsByType.get(resource.resourceType) ?? []), resource.id as string]);
  const found = new Map<string, string>();
  for (const [type, ids] of idsByType) {
    const rows = await tx.store.query<{ id: string; content: string }>(
      `SELECT r.id, v.content FROM resources r
         JOIN resource_versions v ON v.type = r.type AND v.id = r.id AND v.version = r.version
       WHERE r.type = ? AND r.deleted = FALSE AND r.id IN (${ids.map(() => '?').join(', ')})`,
      [type, ...ids],
    );
    for (const row of rows) found.set(`${type}/${row.id}`, row.content);
  }
  return found;
}

/** Equal content, the server's bookkeeping (meta.versionId, meta.lastUpdated) aside; key order does not matter. */
export function sameContent(stored: Resource, incoming: Resource): boolean {
  return isDeepStrictEqual(withoutBookkeeping(stored), withoutBookkeeping(incoming));
}

function withoutBookkeeping(resource: Resource): Resource {
  const { versionId: _v, lastUpdated: _l, ...meta } = resource.meta ?? ({} as Meta);
  const copy: Resource = { ...resource };
  if (Object.keys(meta).length > 0) copy.meta = meta;
  else delete copy.meta;
  return copy;
}

function checkDeadline(options: ImportOptions): void {
  if (options.deadline !== undefined && Date.now() > options.deadline && options.tooLong) throw options.tooLong();
}
