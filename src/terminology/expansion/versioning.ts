import type { ValueSet } from 'fhir/r4';
import type { TxParams } from '../params';

export interface Versioning {
  /** Several versions of one system are in play: version is part of a member's identity. */
  doingVersion: boolean;
  /** One version included and another excluded: the exclusion applies whatever the version. */
  excludeAcrossVersions: boolean;
  /** The expansion says versionsMatch was in force. */
  versionsMatch: boolean;
}

/**
 * Several versions of one system in a compose make version part of a member's identity,
 * unless versionsMatch says otherwise. Including one version and excluding another of the
 * same system means "these codes, but not those" whatever the version (versionsMatch, which is
 * set on the request's parameters).
 */
export function decideVersioning(compose: NonNullable<ValueSet['compose']>, params: TxParams): Versioning {
  const out: Versioning = { doingVersion: false, excludeAcrossVersions: false, versionsMatch: false };
  const seen = new Map<string, string | undefined>();
  for (const set of [...compose.include, ...(compose.exclude ?? [])]) {
    if (!set.system) continue;
    if (seen.has(set.system) && seen.get(set.system) !== set.version) out.doingVersion = true;
    else seen.set(set.system, set.version);
  }
  const includes = compose.include;
  const excludes = compose.exclude ?? [];
  if (!params.versionsMatchGiven && includes.length > 0 && excludes.length > 0) {
    const system = includes[0].system;
    const sameSystem = [...includes, ...excludes].every((s) => s.system === system && s.version);
    const overlap = includes.some((i) => excludes.some((e) => e.version === i.version));
    if (sameSystem && !overlap) {
      params.versionsMatch = true;
      out.excludeAcrossVersions = true;
      out.versionsMatch = true;
    }
  }
  if (params.versionsMatch && compose.extension?.some((e) => e.extension?.some((x) => x.valueCode === 'versionsMatch')))
    out.versionsMatch = true;
  return out;
}
