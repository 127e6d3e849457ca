import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { fhirError } from '../fhir/errors';
import { readTar, TarError } from './tar';

/**
 * An NPM-format FHIR package (https://confluence.hl7.org/display/FHIR/NPM+Package+Specification)
 * read into memory: its manifest (`package/package.json`), its `.index.json` when it has one, and
 * the JSON files of the package folder itself. Subfolders (`example/`, `other/`, `xml/`) hold
 * examples and tooling files, not the package's definitions, and are left out. Every problem
 * is an ERR_PACKAGE_* error that says what is wrong, before anything is stored.
 */

export interface PackageManifest {
  name: string;
  version: string;
  fhirVersions?: string[];
}

/** One entry of `.index.json`: which file holds which resource. */
export interface PackageIndexEntry {
  filename: string;
  resourceType: string;
  id?: string;
}

export interface FhirPackage {
  manifest: PackageManifest;
  index?: PackageIndexEntry[];
  /** The JSON files of the package folder (manifest and index aside), by file name. */
  files: Map<string, Buffer>;
}

/** How much a package may unpack to; guards against a small archive that inflates without end. */
export const DEFAULT_MAX_UNPACKED_BYTES = 256 * 1024 * 1024;

const MANIFEST = 'package.json';
const INDEX = '.index.json';

/** A package as published (`.tgz`: a gzip-compressed tar whose files are under `package/`). */
export async function unpackPackage(
  archive: Buffer,
  options: { maxUnpackedBytes?: number } = {},
): Promise<FhirPackage> {
  const limit = options.maxUnpackedBytes ?? DEFAULT_MAX_UNPACKED_BYTES;
  if (archive.length < 2 || archive[0] !== 0x1f || archive[1] !== 0x8b) {
    throw fhirError('ERR_PACKAGE_INVALID', { reason: 'it is not a gzip-compressed tar archive (.tgz)' });
  }
  let tar: Buffer;
  try {
    tar = await promisify(gunzip)(archive, { maxOutputLength: limit });
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    if (code === 'ERR_BUFFER_TOO_LARGE') throw fhirError('ERR_PACKAGE_TOO_LARGE', { limit });
    const reason =
      code === 'Z_BUF_ERROR'
        ? 'the archive is truncated (the gzip stream ends early)'
        : `the gzip stream is damaged (${message})`;
    throw fhirError('ERR_PACKAGE_INVALID', { reason });
  }
  let entries;
  try {
    entries = readTar(tar);
  } catch (err) {
    if (err instanceof TarError) throw fhirError('ERR_PACKAGE_INVALID', { reason: err.message });
    throw err;
  }
  const folder = new Map<string, Buffer>();
  for (const { path, data } of entries) {
    const name = path.startsWith('package/') ? path.slice('package/'.length) : undefined;
    if (name !== undefined && !name.includes('/') && name.endsWith('.json')) folder.set(name, data);
  }
  return fromFolder(folder, 'package/');
}

/**
 * A package unpacked on disk: a folder holding `package/package.json`, or the package folder
 * itself (as npm installs one: `node_modules/hl7.terminology.r4`).
 */
export async function readPackageFolder(dir: string): Promise<FhirPackage> {
  const root = (await isFile(join(dir, 'package', MANIFEST))) ? join(dir, 'package') : dir;
  const names = (await readdir(root, { withFileTypes: true }))
    .filter((e) => e.isFile() && e.name.endsWith('.json'))
    .map((e) => e.name);
  const folder = new Map<string, Buffer>();
  // Several reads in flight: thousands of small files, one after the other, take seconds.
  let next = 0;
  const reader = async () => {
    while (next < names.length) {
      const name = names[next++];
      folder.set(name, await readFile(join(root, name)));
    }
  };
  await Promise.all(Array.from({ length: 16 }, reader));
  return fromFolder(folder, root === dir ? '' : 'package/');
}

/** A `.tgz` file or a folder, as the command line names it. */
export async function readPackageAt(path: string, options: { maxUnpackedBytes?: number } = {}): Promise<FhirPackage> {
  const found = await stat(path).catch(() => undefined);
  if (!found) throw fhirError('ERR_PACKAGE_INVALID', { reason: `'${path}' does not exist` });
  if (found.isDirectory()) return readPackageFolder(path);
  return unpackPackage(await readFile(path), options);
}

function fromFolder(folder: Map<string, Buffer>, prefix: string): FhirPackage {
  const manifestBytes = folder.get(MANIFEST);
  if (!manifestBytes)
    throw fhirError('ERR_PACKAGE_INVALID', {
      reason: `it has no ${prefix}${MANIFEST}, so it is not an NPM-format FHIR package`,
    });
  const manifest = readManifest(parseJson(manifestBytes, `${prefix}${MANIFEST}`), `${prefix}${MANIFEST}`);
  const indexBytes = folder.get(INDEX);
  const index = indexBytes ? readIndex(parseJson(indexBytes, `${prefix}${INDEX}`), `${prefix}${INDEX}`) : undefined;
  folder.delete(MANIFEST);
  folder.delete(INDEX);
  return { manifest, index, files: folder };
}

function readManifest(json: unknown, file: string): PackageManifest {
  const manifest = json as Partial<PackageManifest> | null;
  if (typeof manifest?.name !== 'string' || typeof manifest.version !== 'string') {
    throw fhirError('ERR_PACKAGE_INVALID', { reason: `${file} has no name and version` });
  }
  const fhirVersions = Array.isArray(manifest.fhirVersions)
    ? manifest.fhirVersions.filter((v): v is string => typeof v === 'string')
    : undefined;
  if (fhirVersions && fhirVersions.length > 0 && !fhirVersions.some((v) => v.startsWith('4.0'))) {
    throw fhirError('ERR_PACKAGE_INVALID', {
      reason: `${manifest.name}#${manifest.version} is for FHIR ${fhirVersions.join(', ')}; this server speaks R4 (4.0.1)`,
    });
  }
  return { name: manifest.name, version: manifest.version, fhirVersions };
}

function readIndex(json: unknown, file: string): PackageIndexEntry[] {
  const files = (json as { files?: unknown } | null)?.files;
  const valid =
    Array.isArray(files) && files.every((f) => typeof f?.filename === 'string' && typeof f?.resourceType === 'string');
  if (!valid)
    throw fhirError('ERR_PACKAGE_INVALID', { reason: `${file} has no list of files with their resource types` });
  return files as PackageIndexEntry[];
}

export function parseJson(bytes: Buffer, file: string): unknown {
  try {
    // Some publishers start files with a byte-order mark, which JSON.parse refuses.
    return JSON.parse(bytes.toString('utf8').replace(/^\uFEFF/, ''));
  } catch (err) {
    throw fhirError('ERR_PACKAGE_INVALID', { reason: `${file} is not valid JSON (${(err as Error).message})` });
  }
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}
