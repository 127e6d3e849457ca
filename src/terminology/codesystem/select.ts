import { TerminologyError, txIssue } from '../issues';
import type { EngineContext } from '../validate-code';
import type { CodeSystemProvider } from './provider';

/**
 * The code system an operation on one system ($lookup, $subsumes) works on: the version the
 * request and its version rules select, with the supplements it asks for applied. Anything that
 * cannot be found is a request that cannot be answered (404), never a guess.
 */
export function codeSystemProvider(system: string, stated: string | undefined, ctx: EngineContext): CodeSystemProvider {
  const { resolver, params } = ctx;
  const version = params.versionFor(system, stated);
  const cs = resolver.codeSystem(system, version);
  if (!cs) {
    const supplement = resolver.anyCodeSystem(system, version);
    if (supplement?.content === 'supplement') {
      const canonical = supplement.version ? `${system}|${supplement.version}` : system;
      throw new TerminologyError(txIssue('error', 'invalid', 'invalid-data', 'CODESYSTEM_CS_NO_SUPPLEMENT', [canonical]), 400);
    }
    if (!version) throw new TerminologyError(txIssue('error', 'not-found', 'not-found', 'UNKNOWN_CODESYSTEM', [system]), 404, system);
    const known = resolver.codeSystemVersions(system);
    if (known.length === 0) {
      throw new TerminologyError(txIssue('error', 'not-found', 'not-found', 'UNKNOWN_CODESYSTEM_VERSION_NONE', [system, version]), 404, `${system}|${version}`);
    }
    throw new TerminologyError(txIssue('error', 'not-found', 'not-found', 'UNKNOWN_CODESYSTEM_VERSION', [system, version, known.join(', ')]), 404, `${system}|${version}`);
  }
  if (cs.content === 'not-present') {
    const canonical = cs.version ? `${system}|${cs.version}` : system;
    throw new TerminologyError(txIssue('error', 'not-found', 'not-found', 'CODESYSTEM_CONTENT_NOT_PRESENT', [canonical]), 404, system);
  }
  const required = [...params.supplements];
  const supplements = resolver.supplementsFor(cs, required);
  const provider = resolver.provider(cs, supplements);
  const missing = required.filter((s) => !provider.hasSupplement(s));
  if (missing.length > 0) {
    throw new TerminologyError(txIssue('error', 'not-found', 'not-found', 'VALUESET_SUPPLEMENT_MISSING', [missing.join(',')]), 404);
  }
  return provider;
}
