import { TerminologyError, txIssue } from '../issues';
import type { EngineContext } from '../validate-code';
import type { IssueId } from '../issue-kinds';
import type { CodeSystemProvider } from './provider';

/** The operations that work on one code system; each says in its own words what could not be done. */
export type CodeSystemPurpose = 'lookup' | 'subsumes';

/**
 * The HL7 ids (UNKNOWN_CODESYSTEM ...) end "so the code cannot be validated": right for
 * $validate-code, which uses them, wrong for a $lookup, which validates nothing.
 */
const NOT_FOUND: Record<CodeSystemPurpose, Record<'system' | 'version' | 'noVersions' | 'notPresent', IssueId>> = {
  lookup: {
    system: 'UNKNOWN_CODESYSTEM_LOOKUP',
    version: 'UNKNOWN_CODESYSTEM_VERSION_LOOKUP',
    noVersions: 'UNKNOWN_CODESYSTEM_VERSION_LOOKUP_NONE',
    notPresent: 'CODESYSTEM_CONTENT_NOT_PRESENT_LOOKUP',
  },
  subsumes: {
    system: 'UNKNOWN_CODESYSTEM_SUBSUMES',
    version: 'UNKNOWN_CODESYSTEM_VERSION_SUBSUMES',
    noVersions: 'UNKNOWN_CODESYSTEM_VERSION_SUBSUMES_NONE',
    notPresent: 'CODESYSTEM_CONTENT_NOT_PRESENT_SUBSUMES',
  },
};

/**
 * The code system an operation on one system ($lookup, $subsumes) works on: the version the
 * request and its version rules select, with the supplements it asks for applied. Anything that
 * cannot be found is a request that cannot be answered (404), never a guess.
 */
export function codeSystemProvider(
  system: string,
  stated: string | undefined,
  ctx: EngineContext,
  purpose: CodeSystemPurpose,
): CodeSystemProvider {
  const { resolver, params } = ctx;
  const ids = NOT_FOUND[purpose];
  const version = params.versionFor(system, stated);
  const cs = resolver.codeSystem(system, version);
  if (!cs) {
    const supplement = resolver.anyCodeSystem(system, version);
    if (supplement?.content === 'supplement') {
      const canonical = supplement.version ? `${system}|${supplement.version}` : system;
      throw new TerminologyError(txIssue('CODESYSTEM_CS_NO_SUPPLEMENT', [canonical]), 400);
    }
    if (!version) throw new TerminologyError(txIssue(ids.system, [system]), 404, system);
    const known = resolver.codeSystemVersions(system);
    if (known.length === 0) {
      throw new TerminologyError(txIssue(ids.noVersions, [system, version]), 404, `${system}|${version}`);
    }
    throw new TerminologyError(txIssue(ids.version, [system, version, known.join(', ')]), 404, `${system}|${version}`);
  }
  if (cs.content === 'not-present') {
    const canonical = cs.version ? `${system}|${cs.version}` : system;
    throw new TerminologyError(txIssue(ids.notPresent, [canonical]), 404, system);
  }
  const required = [...params.supplements];
  const supplements = resolver.supplementsFor(cs, required);
  const provider = resolver.provider(cs, supplements);
  const missing = required.filter((s) => !provider.hasSupplement(s));
  if (missing.length > 0) {
    throw new TerminologyError(txIssue('VALUESET_SUPPLEMENT_MISSING', [missing.join(',')]), 404);
  }
  return provider;
}
