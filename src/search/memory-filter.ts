import type { Resource } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import { queryOfString } from '../fhir/query';
import type { IndexRows } from '../storage/index-schema';
import type { IndexExtractor } from './extract';
import { matches } from './memory-match';
import type { Criterion } from './query/criteria';
import { parseSearch } from './query/parse';
import type { SearchParameterRegistry } from './registry';

/**
 * A search query as a test of one resource in memory, with the same value extraction the index
 * uses (Bulk Data `_typeFilter`, applied to a snapshot that is not the current index). Criteria
 * that need other resources or the terminology engine (chains, `_has`, `:in`/`:below`) cannot be
 * decided on one resource: the query is refused (400) rather than half applied.
 */
export type ResourceFilter = (resource: Resource) => boolean;

/**
 * Each resource's extracted values, shared by every filter over one extractor: a write tested
 * against ten Subscriptions (or a snapshot row against several `_typeFilter` queries) is extracted
 * once, not once per filter. Keyed by the resource object, which these callers never change after
 * reading it.
 */
const extracted = new WeakMap<IndexExtractor, WeakMap<Resource, IndexRows>>();

function rowsOf(extractor: IndexExtractor, resource: Resource): IndexRows {
  let byResource = extracted.get(extractor);
  if (!byResource) extracted.set(extractor, (byResource = new WeakMap()));
  let rows = byResource.get(resource);
  if (!rows) byResource.set(resource, (rows = extractor.extract(resource)));
  return rows;
}

export function memoryFilter(
  type: string,
  queryText: string,
  deps: { registry: SearchParameterRegistry; extractor: IndexExtractor; localBases: string[] },
): ResourceFilter {
  const query = queryOfString(queryText);
  const parsed = parseSearch([type], query, deps.registry, { strict: true, localBases: deps.localBases });
  const criteria = parsed.criteria;
  for (const c of criteria) {
    if (!decidable(c))
      throw fhirError('ERR_SEARCH_PARAM', { name: criterionName(c), value: `${type}?${queryText}`.slice(0, 200) });
  }
  const resolved = new Map();
  return (resource) => {
    const rows = rowsOf(deps.extractor, resource);
    return criteria.every((c) => matches(resource, rows, c, resolved) === true);
  };
}

function decidable(c: Criterion): boolean {
  if (c.kind === 'any' || c.kind === 'all') return c.of.every(decidable);
  return c.kind === 'id' || c.kind === 'value' || c.kind === 'missing' || c.kind === 'composite';
}

function criterionName(c: Criterion): string {
  if (c.kind === 'has') return '_has';
  return 'index' in c ? c.index : c.kind;
}
