import type {
  CodeableConcept,
  Coding,
  ConceptMap,
  ConceptMapGroup,
  ConceptMapGroupElement,
  ConceptMapGroupElementTarget,
} from 'fhir/r4';
import { plainIssue, TerminologyError } from './issues';
import { message } from './messages';
import type { Resolver } from './resolver';

/**
 * ConceptMap/$translate as the engine sees it: the codes that concept maps give for a code,
 * forwards (source to target) or in reverse (target back to source).
 */

export interface TranslateRequest {
  /** The codes to translate (a CodeableConcept's codings, or one coding). */
  codings: Coding[];
  /** Translate a target code back to its source codes. */
  reverse: boolean;
  /** The maps to use; none means every map known that fits. */
  maps?: ConceptMap[];
  /** Only answers in this system (the target system forwards, the source system in reverse). */
  resultSystem?: string;
  /** Other elements' values (R4 `dependency`), which a target's `dependsOn` must find. */
  dependencies: { element?: string; concept?: CodeableConcept }[];
  /** Value set scopes the maps must declare, when given. */
  sourceScope?: string;
  targetScope?: string;
}

export interface TranslateMatch {
  equivalence: string;
  /** Forwards: the code found. In reverse: the code asked about. */
  concept: Coding;
  /** In reverse: the source code found. */
  source?: Coding;
  /** The map the match comes from, as url|version. */
  originMap?: string;
  product?: { element?: string; concept: Coding }[];
}

export interface TranslateResult {
  result: boolean;
  message?: string;
  matches: TranslateMatch[];
}

/** Equivalences that say the codes do not mean the same thing. */
const NOT_A_MATCH = new Set(['unmatched', 'disjoint']);
const MAX_MAP_CHAIN = 5;
/** More matches than this make an answer too large to be of use (and megabytes from a few kilobytes asked). */
export const MAX_TRANSLATE_MATCHES = 1_000;

export function translate(request: TranslateRequest, resolver: Resolver): TranslateResult {
  const maps = (request.maps ?? resolver.conceptMaps()).filter((m) => inScope(m, request));
  const matches: TranslateMatch[] = [];
  for (const coding of request.codings) {
    if (!coding.code) continue;
    for (const map of maps) {
      const found = request.reverse
        ? reverseMatches(map, coding, request.resultSystem)
        : forwardMatches(map, coding, { request, resolver, depth: 0 });
      for (const match of found) {
        if (matches.length >= MAX_TRANSLATE_MATCHES) {
          throw new TerminologyError(plainIssue('TRANSLATE_TOO_COSTLY', [MAX_TRANSLATE_MATCHES]), 422);
        }
        matches.push(match);
      }
    }
  }
  const result = matches.some((m) => !NOT_A_MATCH.has(m.equivalence));
  if (result) return { result, matches };
  const asked = request.codings.map((c) => `${c.system ?? ''}#${c.code ?? ''}`).join(', ');
  return { result, matches, message: message(maps.length === 0 ? 'TRANSLATE_NO_MAP' : 'TRANSLATE_NO_MATCH', asked) };
}

function inScope(map: ConceptMap, request: TranslateRequest): boolean {
  const source = map.sourceUri ?? map.sourceCanonical;
  const target = map.targetUri ?? map.targetCanonical;
  if (request.sourceScope && source && source.split('|')[0] !== request.sourceScope.split('|')[0]) return false;
  if (request.targetScope && target && target.split('|')[0] !== request.targetScope.split('|')[0]) return false;
  return true;
}

function originOf(map: ConceptMap): string | undefined {
  if (!map.url) return undefined;
  return map.version ? `${map.url}|${map.version}` : map.url;
}

/** Where a translation is: the request, what resolves other maps, and how many maps deep it has gone. */
interface MapWalk {
  request: TranslateRequest;
  resolver: Resolver;
  depth: number;
}

function forwardMatches(map: ConceptMap, coding: Coding, walk: MapWalk): TranslateMatch[] {
  const { request } = walk;
  const { resultSystem } = request;
  const out: TranslateMatch[] = [];
  for (const group of map.group ?? []) {
    if (group.source && group.source !== coding.system) continue;
    if (group.sourceVersion && coding.version && group.sourceVersion !== coding.version) continue;
    if (resultSystem && group.target && group.target !== resultSystem) continue;
    const elements = (group.element ?? []).filter((e) => e.code === coding.code);
    const found: TranslateMatch[] = [];
    for (const element of elements) for (const m of elementMatches(map, group, element, request)) found.push(m);
    if (found.length === 0 && group.unmapped) for (const m of unmappedMatches(map, group, coding, walk)) found.push(m);
    for (const m of found) out.push(m);
  }
  return out;
}

function elementMatches(
  map: ConceptMap,
  group: ConceptMapGroup,
  element: ConceptMapGroupElement,
  request: TranslateRequest,
): TranslateMatch[] {
  return (element.target ?? [])
    .filter((target) => dependenciesHold(target, request))
    .map((target) => {
      const concept: Coding = {};
      if (group.target) concept.system = group.target;
      if (group.targetVersion) concept.version = group.targetVersion;
      if (target.code) concept.code = target.code;
      if (target.display) concept.display = target.display;
      const match: TranslateMatch = { equivalence: target.equivalence, concept, originMap: originOf(map) };
      const product = (target.product ?? []).map((p) => ({
        element: p.property,
        concept: { system: p.system, code: p.value, display: p.display },
      }));
      if (product.length > 0) match.product = product;
      return match;
    });
}

/** What a group says about codes it does not list: keep the code, a fixed code, or ask another map. */
function unmappedMatches(map: ConceptMap, group: ConceptMapGroup, coding: Coding, walk: MapWalk): TranslateMatch[] {
  const unmapped = group.unmapped;
  if (!unmapped) return [];
  if (unmapped.mode === 'provided') {
    return [{ equivalence: 'equal', concept: { system: group.target, code: coding.code }, originMap: originOf(map) }];
  }
  if (unmapped.mode === 'fixed' && unmapped.code) {
    const concept: Coding = { system: group.target, code: unmapped.code };
    if (unmapped.display) concept.display = unmapped.display;
    return [{ equivalence: 'relatedto', concept, originMap: originOf(map) }];
  }
  if (unmapped.mode === 'other-map' && unmapped.url) {
    if (walk.depth >= MAX_MAP_CHAIN) {
      throw new TerminologyError(plainIssue('TRANSLATE_MAP_CHAIN_TOO_DEEP', [MAX_MAP_CHAIN, unmapped.url]), 400);
    }
    const [url, version] = unmapped.url.split('|');
    const other = walk.resolver.conceptMap(url, version);
    return other ? forwardMatches(other, coding, { ...walk, depth: walk.depth + 1 }) : [];
  }
  return [];
}

/** A target that depends on other elements holds only when the request gives those values. */
function dependenciesHold(target: ConceptMapGroupElementTarget, request: TranslateRequest): boolean {
  return (target.dependsOn ?? []).every((dep) =>
    request.dependencies.some(
      (given) =>
        given.element === dep.property &&
        (given.concept?.coding ?? []).some((c) => c.code === dep.value && (!dep.system || c.system === dep.system)),
    ),
  );
}

function reverseMatches(map: ConceptMap, coding: Coding, resultSystem: string | undefined): TranslateMatch[] {
  const out: TranslateMatch[] = [];
  for (const group of map.group ?? []) {
    if (group.target && group.target !== coding.system) continue;
    if (resultSystem && group.source && group.source !== resultSystem) continue;
    for (const element of group.element ?? []) {
      for (const target of element.target ?? []) {
        if (target.code !== coding.code) continue;
        const source: Coding = {};
        if (group.source) source.system = group.source;
        if (group.sourceVersion) source.version = group.sourceVersion;
        if (element.code) source.code = element.code;
        if (element.display) source.display = element.display;
        const concept: Coding = { system: coding.system, code: coding.code };
        out.push({ equivalence: target.equivalence, concept, source, originMap: originOf(map) });
      }
    }
  }
  return out;
}
