import type { TerminologyService } from '../terminology/service';
import type { CodeMatcher } from './terminology';
import { fhirError } from '../fhir/errors';

/**
 * The token modifiers' code tests on this server's own terminology engine: value-set membership
 * as `$validate-code` decides it (membership only: displays and statuses do not matter here), and
 * subsumption in the code system's hierarchy.
 */
export function engineCodeMatcher(terminology: TerminologyService): CodeMatcher {
  return {
    async valueSet(url, project) {
      const session = await terminology.session({ project, input: { 'valueset-membership-only': true } });
      const [base, version] = url.split('|');
      const valueSet = session.resolver.valueSet(base, version);
      if (!valueSet) return undefined;
      const cache = new Map<string, boolean | 'undecidable'>();
      return (system, code) => {
        const key = `${system ?? ''}|${code}`;
        let member = cache.get(key);
        if (member === undefined) {
          const verdict = session.membership(valueSet, system === null ? { code } : { system, code });
          member = verdict === 'undecidable' ? verdict : verdict === 'member';
          cache.set(key, member);
        }
        // Answering "not a member" for a code nobody here can judge would drop matches silently.
        if (member === 'undecidable')
          throw fhirError('ERR_SEARCH_VALUESET_CONTENT', { url: url.slice(0, 200), system: system ?? '' });
        return member;
      };
    },
    async hierarchy(system, code, direction, project) {
      const session = await terminology.session({ project });
      return session.hierarchy(system, code, direction);
    },
  };
}
