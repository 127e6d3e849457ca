import { TxParams } from '../terminology/params';
import type { TerminologyService } from '../terminology/service';
import { validateInValueSet, type EngineContext } from '../terminology/validate-code';
import type { CodeMatcher } from './terminology';
import { fhirError } from '../fhir/errors';
import { isEnumeration } from '../terminology/membership/checker';
import type { ValueSet } from 'fhir/r4';

/**
 * The token modifiers' code tests on this server's own terminology engine: value-set membership
 * as `$validate-code` decides it (membership only: displays and statuses do not matter here), and
 * subsumption in the code system's hierarchy.
 */
export function engineCodeMatcher(terminology: TerminologyService): CodeMatcher {
  return {
    async valueSet(url, project) {
      const resolver = await terminology.resolver(project);
      const [base, version] = url.split('|');
      const valueSet = resolver.valueSet(base, version);
      if (!valueSet) return undefined;
      const engine: EngineContext = { resolver, params: TxParams.from({ 'valueset-membership-only': true }), checkBudget: () => undefined };
      const cache = new Map<string, boolean>();
      const undecidable = undecidableSystems(valueSet, resolver);
      return (system, code) => {
        const key = `${system ?? ''}|${code}`;
        let member = cache.get(key);
        if (member === undefined) {
          // Answering "not a member" for a code nobody here can judge would drop matches silently.
          if (system !== null && undecidable.has(system)) throw fhirError('ERR_SEARCH_VALUESET_CONTENT', { url: url.slice(0, 200), system });
          const coding = system === null ? { code } : { system, code };
          member = validateInValueSet(valueSet, { concept: { coding: [coding] }, mode: 'coding', issuePath: 'Coding' }, engine).result;
          cache.set(key, member);
        }
        return member;
      };
    },
    async hierarchy(system, code, direction, project) {
      const resolver = await terminology.resolver(project);
      const cs = resolver.codeSystem(system);
      if (!cs || cs.content === 'not-present') return undefined;
      const provider = resolver.provider(cs);
      const root = provider.locate(code);
      if (!root) return () => false;
      return (candidate) => {
        const node = provider.locate(candidate);
        if (!node) return false;
        return direction === 'below' ? provider.subsumes(root, node) : provider.subsumes(node, root);
      };
    },
  };
}

/**
 * The code systems a value set takes by filter or whole, and whose content this server lacks:
 * membership of their codes cannot be decided (listed codes can: see the checker).
 */
function undecidableSystems(valueSet: ValueSet, resolver: Awaited<ReturnType<TerminologyService['resolver']>>): Set<string> {
  const systems = new Set<string>();
  for (const include of valueSet.compose?.include ?? []) {
    if (!include.system || isEnumeration(include)) continue;
    const cs = resolver.codeSystem(include.system, include.version);
    if (!cs || cs.content === 'not-present') systems.add(include.system);
  }
  return systems;
}
