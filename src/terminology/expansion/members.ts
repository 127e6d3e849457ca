import type {
  ValueSet,
  ValueSetComposeIncludeConcept,
  ValueSetExpansionContains,
  ValueSetExpansionParameter,
} from 'fhir/r4';
import type { CodeSystemProvider, ConceptHandle } from '../providers/provider';
import { canonicalOf } from '../membership/state';

/** What an expansion collects (members, by reference to their concepts) and the helpers on them. */

export interface Member {
  key: string;
  system: string;
  version?: string;
  code: string;
  cs?: CodeSystemProvider;
  concept?: ConceptHandle;
  /** The include's concept entry, for value set displays, designations and extensions. */
  listed?: ValueSetComposeIncludeConcept;
  /** An entry taken over whole from an imported expansion. */
  imported?: ValueSetExpansionContains;
  parent?: Member;
  children: Member[];
  /** Several versions of the system are in play: the entry states its version. */
  showVersion?: boolean;
}

/** The members of an expansion, and what the expansion must say about how it was made. */
export interface Collected {
  members: Member[];
  roots: Member[];
  hierarchical: boolean;
  parameters: ValueSetExpansionParameter[];
  /** Property definitions imported with imported members. */
  importedProperties: { code: string; uri?: string }[];
  /** Reasons the expansion is not closed (empty when it is). */
  unclosed: string[];
  /** A whole terminology without a count of its codes (a grammar) is in it: no total can be given. */
  totalUnknown: boolean;
}

export interface ImportedExpansion {
  keys: Set<string>;
  members: Member[];
  properties: { code: string; uri?: string }[];
  collected: Collected;
}

/** Where an expansion sits among the value sets one request expands. */
export interface Nesting {
  /** Canonicals of the value sets being expanded above this one, to refuse cycles. */
  chain: string[];
  /** The imports this request has expanded, by value set. */
  imports: Map<ValueSet, ImportedExpansion>;
}

/** The value set's own standing: a client expanding a withdrawn or retired value set is told so. */
export function ownStatusParameters(valueSet: ValueSet): ValueSetExpansionParameter[] {
  const standards = valueSet.extension?.find(
    (e) => e.url === 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status',
  )?.valueCode;
  const valueUri = canonicalOf(valueSet);
  if (standards === 'deprecated') return [{ name: 'warning-deprecated', valueUri }];
  if (standards === 'withdrawn') return [{ name: 'warning-withdrawn', valueUri }];
  if (valueSet.status === 'retired') return [{ name: 'warning-retired', valueUri }];
  return [];
}

export function memberKey(system: string, code: string): string {
  return `${system}\u0000${code}`;
}

/** Entries and their nested entries, in document order (iterative: nesting depth costs no stack). */
export function flatten(entries: ValueSetExpansionContains[]): ValueSetExpansionContains[] {
  const out: ValueSetExpansionContains[] = [];
  const stack = [...entries].reverse();
  for (let e = stack.pop(); e; e = stack.pop()) {
    out.push(e);
    const nested = e.contains ?? [];
    for (let i = nested.length - 1; i >= 0; i--) stack.push(nested[i]);
  }
  return out;
}
