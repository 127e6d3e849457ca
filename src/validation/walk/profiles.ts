import { ProfileError } from '../compile';
import type { Report } from '../issues';
import type { ProfileSession } from '../library';
import type { CompiledProfile, TypeRef } from '../model';
import { clip } from '../primitives';
import { isObject } from '../resource-rules';
import type { Deferred, Walk } from '../walker';
import type { Cursor } from './cursor';

/**
 * Definitions the walk meets on the way: the profiles a resource claims (`meta.profile`), the
 * definitions of extensions, and type profiles. Those defined by stored StructureDefinitions not
 * loaded yet are left in `walk.deferred`, for the validator to finish after loading them.
 */

const EXTENSION: TypeRef = { code: 'Extension', profiles: [], targetProfiles: [] };

/** A profile named in `meta.profile`: its url, the resource claiming it and where the claim is written. */
export interface Claim {
  url: string;
  json: Record<string, unknown>;
  where: string;
  type: string;
}

/** A profile that is loaded and usable, or undefined. */
export function usable(session: ProfileSession, url: string): CompiledProfile | undefined {
  const resolved = session.profile(url);
  return resolved && resolved !== 'unloaded' && !(resolved instanceof ProfileError) ? resolved : undefined;
}

export function claimedProfiles(walk: Walk, json: Record<string, unknown>, type: string, cursor: Cursor): void {
  const meta = json.meta;
  const urls = isObject(meta) && Array.isArray(meta.profile) ? meta.profile : [];
  urls.forEach((url, i) => {
    if (typeof url !== 'string') return;
    const resolved = walk.session.profile(url);
    if (resolved === 'unloaded') {
      walk.deferred.push({ kind: 'profile', url, value: json, cursor });
      return;
    }
    checkClaim(walk, resolved, { url, json, where: `${cursor.path}.meta.profile[${i}]`, type }, cursor);
  });
}

/** A profile named in `meta.profile`, once resolved (now or after loading). */
export function checkClaim(
  walk: Walk,
  resolved: CompiledProfile | ProfileError | undefined,
  claim: Claim,
  cursor: Cursor,
): void {
  const { url, where, type } = claim;
  if (resolved === undefined) {
    walk.warning(
      'not-supported',
      where,
      `Profile '${url}' is not known to this server; the resource was not checked against it`,
    );
  } else if (resolved instanceof ProfileError) {
    walk.error('processing', where, resolved.message);
  } else if (resolved.type !== type) {
    walk.error('invalid', where, `Profile '${url}' is for ${resolved.type}, not ${type}`);
  } else {
    walk.againstProfile(claim.json, resolved, cursor);
  }
}

/** An extension whose definition was loaded after the walk. */
export function deferredExtension(
  walk: Walk,
  resolved: CompiledProfile | ProfileError | undefined,
  item: Deferred,
): void {
  const { path } = item.cursor;
  if (resolved === undefined) unknownExtension(walk, item.url, path);
  else if (resolved instanceof ProfileError) walk.error('processing', path, resolved.message);
  else {
    modifierRule(walk, resolved, path);
    walk.complex(item.value, resolved.root, EXTENSION, item.cursor);
  }
}

/** The definition that gives a value of this type its children: a type profile, an extension's own, or the base type. */
export function typeDefinition(
  walk: Walk,
  value: Record<string, unknown>,
  type: TypeRef,
  cursor: Cursor,
): CompiledProfile | undefined {
  for (const url of type.profiles) {
    const resolved = usable(walk.session, url);
    if (resolved) return resolved;
  }
  const { path } = cursor;
  if (
    type.code === 'Extension' &&
    type.profiles.length === 0 &&
    walk.options.extensions &&
    typeof value.url === 'string'
  ) {
    const resolved = walk.session.profile(value.url);
    if (resolved === 'unloaded') walk.deferred.push({ kind: 'extension', url: value.url, value, cursor });
    else if (resolved === undefined) unknownExtension(walk, value.url, path);
    else if (resolved instanceof ProfileError) walk.error('processing', path, resolved.message);
    else if (resolved.type === 'Extension') {
      modifierRule(walk, resolved, path);
      return resolved;
    }
  }
  return walk.session.base(type.code);
}

/**
 * An extension nobody here knows: a warning (its definition may live elsewhere), worded more
 * strongly for a modifier extension, which changes the meaning of what holds it.
 */
function unknownExtension(report: Report, url: string, path: string): void {
  if (isModifierPath(path)) {
    report.warning(
      'extension',
      path,
      `The modifier extension '${clip(url, 120)}' is not known to this server: its content was not checked, and a system that does not know it must not ignore it`,
    );
  } else
    report.warning(
      'extension',
      path,
      `The extension '${clip(url, 120)}' is not known to this server, so its content was not checked`,
    );
}

/** A modifier extension only in modifierExtension, and only a modifier extension there. */
function modifierRule(report: Report, definition: CompiledProfile, path: string): void {
  const modifierPlace = isModifierPath(path);
  if (definition.root.isModifier && !modifierPlace)
    report.error(
      'extension',
      path,
      `The extension '${definition.url}' is a modifier extension: it belongs in modifierExtension`,
    );
  if (!definition.root.isModifier && modifierPlace)
    report.error(
      'extension',
      path,
      `The extension '${definition.url}' is not a modifier extension: it belongs in extension`,
    );
}

function isModifierPath(path: string): boolean {
  return /\.modifierExtension\[\d+\]$/.test(path);
}
