import type { CodeableConcept, CodeSystem, OperationOutcome, ValueSet } from 'fhir/r4';
import type { ContentMode } from '../providers/provider';
import type { IssueList } from '../issues';
import type { Language } from '../languages';
import type { Pacer } from '../pacing';
import type { TxParams } from '../params';
import type { Resolver } from '../resolver';
import type { DisplayList } from './display-list';

/** What one validation run works with: where resources come from, and the request's parameters. */
export interface ValidationEnv {
  resolver: Resolver;
  params: TxParams;
  /** Supplements the request or the value set requires (useSupplement, valueset-supplement). */
  requiredSupplements: Set<string>;
  usedSupplements: Set<string>;
  /** Throws too-costly when the request's time budget is spent. */
  checkBudget(): void;
  /** Long loops give the event loop back through it (and check the budget). */
  pacer: Pacer;
}

/** A code found inactive while checking, for the warning and the `inactive` output. */
export interface InactiveFinding {
  path: string;
  code: string;
  status?: string;
}

/**
 * What checking one coding collects on the way: the issues and messages, the unknown systems,
 * the displays the concept has, and facts about the concept for the answer.
 */
export interface CodingState {
  issues: IssueList;
  messages: string[];
  unknownSystems: Set<string>;
  displays: DisplayList;
  version?: string;
  contentMode?: ContentMode;
  inactive?: InactiveFinding;
  status?: string;
  normalForm?: string;
  impliedSystem?: string;
  defLang?: Language;
  /** The concept's display is its users' to choose (a wrong one is only a note). */
  ownDisplay?: boolean;
}

/** true: in the value set; false: not; null: cannot say (the code system is unknown). */
export type Membership = boolean | null;

export type CodedMode = 'code' | 'coding' | 'codeableConcept';

/** The answer of $validate-code, named as the operation's outputs are. */
export interface ValidationResult {
  result: boolean;
  message?: string;
  display?: string;
  code?: string;
  system?: string;
  version?: string;
  inactive?: boolean;
  status?: string;
  codeableConcept?: CodeableConcept;
  'normalized-code'?: string;
  issues?: OperationOutcome;
  /** Code systems that could not be found, so the code could not be checked. */
  'x-unknown-system'?: string[];
  /** Code systems that could not be found and made the answer false. */
  'x-caused-by-unknown-system'?: string[];
}

export function canonicalOf(resource: CodeSystem | ValueSet): string {
  return resource.version ? `${resource.url}|${resource.version}` : (resource.url ?? '');
}

/** One coding asked about: where it is in the request (issue paths), and what it says. */
export interface CodingQuery {
  path: string;
  system?: string;
  version?: string;
  code: string;
  display?: string;
}
