import type { CodeSystem, Extension, ValueSet } from 'fhir/r4';
import type { CodeSystemProvider } from '../providers/provider';
import { plainIssue, TerminologyError, txIssue } from '../issues';
import type { ValidationEnv } from '../membership/state';
import { versionMatches } from '../versions';

/**
 * The code system an include draws on, as an expansion needs it: the version the request's rules
 * select, with the supplements in force; one that cannot be enumerated here (unknown, without
 * content, a supplement, a version the rules refuse) ends the expansion.
 */
export function expansionCodeSystem(
  system: string,
  stated: string | undefined,
  env: ValidationEnv,
): CodeSystemProvider {
  const { resolver, params } = env;
  const version = params.versionFor(system, stated);
  const cs = resolver.codeSystem(system, version);
  if (!cs) {
    const known = resolver.codeSystemVersions(system);
    if (!version) throw new TerminologyError(txIssue('UNKNOWN_CODESYSTEM_EXP', [system]), 422, system);
    if (known.length === 0) {
      throw new TerminologyError(
        txIssue('UNKNOWN_CODESYSTEM_VERSION_EXP_NONE', [system, version]),
        422,
        `${system}|${version}`,
      );
    }
    throw new TerminologyError(
      txIssue('UNKNOWN_CODESYSTEM_VERSION_EXP', [system, version, known.join(known.length === 2 ? ' or ' : ', ')]),
      422,
      `${system}|${version}`,
    );
  }
  if (cs.content === 'not-present' || cs.content === 'supplement') {
    const id = cs.content === 'not-present' ? 'CODESYSTEM_NO_CONTENT_TO_EXPAND' : 'CODESYSTEM_IS_SUPPLEMENT_EXPAND';
    throw new TerminologyError(plainIssue(id, [system]), 422);
  }
  const supplements = resolver.supplementsFor(cs, env.requiredSupplements);
  const provider = resolver.provider(cs, supplements);
  for (const required of env.requiredSupplements)
    if (provider.hasSupplement(required)) env.usedSupplements.add(required);
  for (const rule of params.rulesFor(system)) {
    if (rule.mode === 'check' && !versionMatches(rule.version, provider.version)) {
      throw new TerminologyError(txIssue('VALUESET_VERSION_CHECK', [system, provider.version, rule.version]), 400);
    }
  }
  return provider;
}

const STANDARDS_STATUS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';

/** The warning an expansion of `source` gives for relying on `resource` (deprecated, withdrawn, retired, ...). */
export function statusWarning(resource: ValueSet | CodeSystem, source: ValueSet): string | undefined {
  const standards = (r: { extension?: Extension[] }) => r.extension?.find((e) => e.url === STANDARDS_STATUS)?.valueCode;
  const ss = standards(resource);
  if (ss === 'deprecated' && standards(source) !== 'deprecated') return 'warning-deprecated';
  if (ss === 'withdrawn' && standards(source) !== 'withdrawn') return 'warning-withdrawn';
  if (resource.status === 'retired' && source.status !== 'retired') return 'warning-retired';
  if (resource.experimental && !source.experimental) return 'warning-experimental';
  if ((resource.status === 'draft' || ss === 'draft') && source.status !== 'draft' && standards(source) !== 'draft')
    return 'warning-draft';
  return undefined;
}
