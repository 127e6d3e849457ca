import type * as Jose from 'jose';

let loaded: Promise<typeof Jose> | undefined;

/** jose, loaded with the first token signed or checked rather than at start (about 50 ms of it). */
export function jose(): Promise<typeof Jose> {
  loaded ??= import('jose');
  return loaded;
}
