import type { Library } from 'fhir/r4';
import { fhirError } from '../fhir/errors';

/**
 * A Measure's logic: its Library and every Library that one includes, found by canonical
 * url|version, each with its ELM (JSON) read out of `content`. CQL itself is never translated
 * here: a Library without `application/elm+json` cannot be run and says so.
 */

/** The parts of ELM JSON this server reads itself (cql-execution reads the rest). */
interface ElmJson {
  library: {
    identifier: { id: string; system?: string; version?: string };
    includes?: { def?: { localIdentifier: string; path: string; version?: string }[] };
    valueSets?: { def?: { name: string; id: string; version?: string }[] };
    statements?: { def?: { name: string; type?: string; context?: string; operand?: unknown[] }[] };
    parameters?: { def?: { name: string }[] };
  };
}

export interface LoadedLibrary {
  /** `url|version` as the Library states them. */
  canonical: string;
  /** The project, canonical and stored version: what compiled forms of it are cached under. */
  identity: string;
  resource: Library;
  elm: ElmJson;
}

export interface LibraryClosure {
  main: LoadedLibrary;
  /** The main library and everything it includes, transitively, each once. */
  all: LoadedLibrary[];
}

/** Finds a Library by canonical url and (when given) version, in the request's project. */
export type LibraryFinder = (url: string, version?: string) => Promise<Library | undefined>;

const ELM_JSON = 'application/elm+json';
/** Includes nest this deep at most (published measures use 3 or 4 levels). */
const MAX_DEPTH = 16;

/** Parsed ELM by library identity: a published library's ELM is large (200 kB of base64) and read by every evaluation. */
const parsed = new Map<string, ElmJson>();
const MAX_PARSED = 256;

/** `project`: whose libraries these are (what caches are keyed by, besides each library's version). */
export async function resolveClosure(
  canonical: string,
  from: string,
  find: LibraryFinder,
  project: string,
): Promise<LibraryClosure> {
  const loaded = new Map<string, LoadedLibrary>();
  const visit = async (ref: string, by: string, depth: number): Promise<LoadedLibrary> => {
    const [url, version] = splitCanonical(ref);
    const known = [...loaded.values()].find(
      (l) => l.resource.url === url && (version === undefined || l.resource.version === version),
    );
    if (known) return known;
    if (depth > MAX_DEPTH)
      throw fhirError('ERR_MEASURE_ELM_INVALID', {
        library: ref,
        reason: `includes nest more than ${MAX_DEPTH} levels deep`,
      });
    const resource = await find(url, version);
    if (!resource) throw fhirError('ERR_MEASURE_LIBRARY_MISSING', { library: ref, from: by });
    const canonicalOf = `${resource.url}|${resource.version ?? ''}`;
    const identity = `${project}\u0000${canonicalOf}\u0000${resource.id}/${resource.meta?.versionId ?? ''}/${resource.meta?.lastUpdated ?? ''}`;
    let elm = parsed.get(identity);
    if (!elm) {
      elm = readElm(resource, ref);
      if (parsed.size >= MAX_PARSED) parsed.delete(parsed.keys().next().value as string);
      parsed.set(identity, elm);
    }
    const library: LoadedLibrary = { canonical: canonicalOf, identity, resource, elm };
    loaded.set(library.canonical, library);
    for (const include of library.elm.library.includes?.def ?? []) {
      const target = includeCanonical(resource, include.path, include.version);
      await visit(target, `Library '${ref}'`, depth + 1);
    }
    return library;
  };
  const main = await visit(canonical, from, 0);
  return { main, all: [...loaded.values()] };
}

/** `url|version` -> [url, version]. */
export function splitCanonical(ref: string): [string, string | undefined] {
  const bar = ref.indexOf('|');
  return bar < 0 ? [ref, undefined] : [ref.slice(0, bar), ref.slice(bar + 1) || undefined];
}

/** The ELM JSON of a Library: its `application/elm+json` attachment, decoded and checked for the parts every run needs. */
function readElm(library: Library, name: string): ElmJson {
  const attachment = library.content?.find((c) => c.contentType?.split(';')[0].trim() === ELM_JSON);
  if (!attachment) throw fhirError('ERR_MEASURE_NO_ELM', { library: name });
  if (attachment.data === undefined)
    throw fhirError('ERR_MEASURE_ELM_INVALID', {
      library: name,
      reason: 'the application/elm+json content has no data (a url is not followed)',
    });
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(attachment.data, 'base64').toString('utf8'));
  } catch (err) {
    throw fhirError('ERR_MEASURE_ELM_INVALID', {
      library: name,
      reason: `not JSON (${(err as Error).message.slice(0, 100)})`,
    });
  }
  const elm = json as Partial<ElmJson>;
  const identifier = elm?.library?.identifier;
  if (
    typeof elm !== 'object' ||
    elm === null ||
    typeof elm.library !== 'object' ||
    typeof identifier?.id !== 'string'
  ) {
    throw fhirError('ERR_MEASURE_ELM_INVALID', { library: name, reason: 'it has no library.identifier.id' });
  }
  const statements = elm.library.statements?.def;
  if (statements !== undefined && !Array.isArray(statements))
    throw fhirError('ERR_MEASURE_ELM_INVALID', { library: name, reason: 'library.statements.def is not a list' });
  const includes = elm.library.includes?.def;
  if (includes !== undefined && (!Array.isArray(includes) || includes.some((i) => typeof i?.path !== 'string'))) {
    throw fhirError('ERR_MEASURE_ELM_INVALID', {
      library: name,
      reason: 'library.includes.def is not a list of includes with a path',
    });
  }
  return elm as ElmJson;
}

/**
 * The canonical of an included library. ELM names it by `path` (`<system>/<name>` for namespaced
 * libraries, else just the name) and version; the including Library's `depends-on` artifacts
 * say which canonical that is, and a Library's canonical is `<system>/Library/<name>` by the CQF
 * convention when they do not.
 */
function includeCanonical(including: Library, path: string, version?: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  for (const artifact of including.relatedArtifact ?? []) {
    if (artifact.type !== 'depends-on' || !artifact.resource) continue;
    const [url, artifactVersion] = splitCanonical(artifact.resource);
    if (
      url.endsWith(`/Library/${name}`) &&
      (version === undefined || artifactVersion === undefined || artifactVersion === version)
    ) {
      return version === undefined ? artifact.resource : `${url}|${version}`;
    }
  }
  const system = path.includes('/')
    ? path.slice(0, path.lastIndexOf('/'))
    : including.url?.replace(/\/Library\/[^/]*$/, '');
  const url = system ? `${system}/Library/${name}` : name;
  return version === undefined ? url : `${url}|${version}`;
}
