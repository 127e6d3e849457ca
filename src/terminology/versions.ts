/**
 * Code system and value set versions: comparison (semver where it applies, text otherwise) and
 * matching with wildcards (`1.x.x`, `1.0.x`, `1.0.*`), as value set includes use them.
 */

const SEMVER = /^(\d+)\.(\d+)(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/;

/** Negative when a is older than b, positive when newer, 0 when equal. */
export function compareVersions(a: string, b: string): number {
  const ma = SEMVER.exec(a);
  const mb = SEMVER.exec(b);
  if (ma && mb) {
    for (const i of [1, 2, 3]) {
      const d = Number(ma[i] ?? 0) - Number(mb[i] ?? 0);
      if (d !== 0) return d;
    }
    // A pre-release sorts before its release.
    if (ma[4] && !mb[4]) return -1;
    if (!ma[4] && mb[4]) return 1;
    return (ma[4] ?? '').localeCompare(mb[4] ?? '');
  }
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return Number(a) - Number(b);
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The newest of a list of versions (undefined for an empty list). */
export function latestVersion(versions: Iterable<string>): string | undefined {
  let best: string | undefined;
  for (const v of versions) if (best === undefined || compareVersions(v, best) > 0) best = v;
  return best;
}

export function isWildcardVersion(version: string): boolean {
  return /(^|\.)([xX*])(\.|$)/.test(version);
}

/**
 * Whether `actual` is the version `wanted` names: equal, or equal in every segment that is not a
 * wildcard. A shorter pattern is not a prefix match: `1` does not name `1.0.0`.
 */
export function versionMatches(wanted: string, actual: string | undefined): boolean {
  if (actual === undefined) return false;
  if (wanted === actual) return true;
  if (!isWildcardVersion(wanted)) return false;
  const w = wanted.split('.');
  const a = actual.split('.');
  if (w.length !== a.length) return false;
  return w.every((segment, i) => segment === 'x' || segment === 'X' || segment === '*' || segment === a[i]);
}

/** "a", "a or b", "a, b and c": the list of known versions in messages. */
export function presentVersions(versions: string[]): string {
  const sorted = [...versions].sort();
  if (sorted.length <= 1) return sorted.join('');
  if (sorted.length === 2) return `${sorted[0]} or ${sorted[1]}`;
  return `${sorted.slice(0, -1).join(', ')} and ${sorted[sorted.length - 1]}`;
}
