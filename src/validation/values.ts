/** Comparisons of JSON values for fixed[x] (exactly this) and pattern[x] (at least this). */

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((v, i) => deepEqual(v, other[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** Whether `value` has everything `pattern` has: objects by property, arrays by each pattern item found somewhere. */
export function containsPattern(value: unknown, pattern: unknown): boolean {
  if (pattern === value) return true;
  if (typeof pattern !== 'object' || pattern === null) return false;
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(pattern)) {
    const items = Array.isArray(value) ? value : [value];
    return pattern.every((p) => items.some((v) => containsPattern(v, p)));
  }
  if (Array.isArray(value)) return false;
  for (const key of Object.keys(pattern)) {
    const p = (pattern as Record<string, unknown>)[key];
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined || !containsPattern(v, p)) return false;
  }
  return true;
}

/** Short JSON for messages. */
export function show(value: unknown, max = 80): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
