/**
 * SMART on FHIR scopes (App Launch 1.0 and 2.x): `patient/Observation.read`, `user/*.write`,
 * `system/Patient.rs`, `system/*.cruds`. Each names a context (whose data: the launch patient's,
 * what the user may see, or the whole project), a resource type (or `*`) and the interactions it
 * allows. v1's `read` and `write` are v2's `rs` and `cud`; `*` is everything.
 */

export type ScopeContext = 'patient' | 'user' | 'system';

/** The interactions v2 names: create, read, update, delete, search. */
export type Permission = 'c' | 'r' | 'u' | 'd' | 's';

export interface ResourceScope {
  context: ScopeContext;
  /** A resource type, or `*`. */
  type: string;
  permissions: ReadonlySet<Permission>;
  /** As the client wrote it (echoed back in the token's scope). */
  text: string;
}

export interface ScopeSet {
  /** The resource scopes granted (others, like `openid` or `offline_access`, are in `other`). */
  resources: ResourceScope[];
  other: string[];
}

export class ScopeError extends Error {}

const ORDER: Permission[] = ['c', 'r', 'u', 'd', 's'];

/**
 * Parses one scope string (space-separated). Unknown non-resource scopes are kept in `other`;
 * a malformed resource scope, or one with a `?` query restriction (not supported), is an error.
 */
export function parseScopes(text: string): ScopeSet {
  const set: ScopeSet = { resources: [], other: [] };
  for (const scope of text.split(/\s+/).filter(Boolean)) {
    const resource = parseResourceScope(scope);
    if (resource) set.resources.push(resource);
    else set.other.push(scope);
  }
  return set;
}

function parseResourceScope(scope: string): ResourceScope | undefined {
  const match = /^(patient|user|system)\/([^.]+)\.(.+)$/.exec(scope);
  if (!match) return undefined;
  const [, context, type, rest] = match;
  if (rest.includes('?'))
    throw new ScopeError(`the scope '${scope}' restricts by a query, which this server does not support`);
  if (type !== '*' && !/^[A-Z][A-Za-z]{1,63}$/.test(type))
    throw new ScopeError(`the scope '${scope}' names no resource type`);
  return { context: context as ScopeContext, type, permissions: permissionsOf(rest, scope), text: scope };
}

function permissionsOf(text: string, scope: string): Set<Permission> {
  if (text === '*') return new Set(ORDER);
  if (text === 'read') return new Set<Permission>(['r', 's']);
  if (text === 'write') return new Set<Permission>(['c', 'u', 'd']);
  // v2: letters in the order c r u d s, each at most once.
  let at = 0;
  const out = new Set<Permission>();
  for (const letter of text) {
    const index = ORDER.indexOf(letter as Permission, at);
    if (index < 0)
      throw new ScopeError(
        `the scope '${scope}' has permissions '${text}' (expected read, write, * or some of c, r, u, d, s in that order)`,
      );
    out.add(letter as Permission);
    at = index + 1;
  }
  if (out.size === 0) throw new ScopeError(`the scope '${scope}' grants nothing`);
  return out;
}

/** Whether the scopes allow `permission` on `type` (in any context), and the contexts that do. */
export function contextsAllowing(scopes: ScopeSet, type: string, permission: Permission): Set<ScopeContext> {
  const contexts = new Set<ScopeContext>();
  for (const s of scopes.resources) {
    if ((s.type === '*' || s.type === type) && s.permissions.has(permission)) contexts.add(s.context);
  }
  return contexts;
}

/**
 * The scopes of `requested` that `allowed` covers wholly (a client asks for a subset of what it
 * may have; a scope only partly covered is not granted).
 */
export function narrow(requested: ScopeSet, allowed: ScopeSet): ScopeSet {
  const resources = requested.resources.filter((want) =>
    [...want.permissions].every((p) =>
      allowed.resources.some(
        (a) => a.context === want.context && (a.type === '*' || a.type === want.type) && a.permissions.has(p),
      ),
    ),
  );
  return { resources, other: requested.other.filter((o) => allowed.other.includes(o)) };
}

/** The scope string of a set, as the client wrote each scope (a token's `scope` claim). */
export function formatScopes(scopes: ScopeSet): string {
  return [...scopes.resources.map((s) => s.text), ...scopes.other].join(' ');
}
