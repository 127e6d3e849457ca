import type { CodeSystem, ValueSet } from 'fhir/r4';
import type { CodeSystemProvider } from '../providers/provider';
import { txIssue, type IssueList } from '../issues';
import type { IssueId } from '../issue-kinds';
import { canonicalOf, type CodingState } from './state';

const STANDARDS_STATUS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';

interface StatusFacts {
  type: 'CodeSystem' | 'ValueSet';
  canonical: string;
  status?: string;
  standardsStatus?: string;
  experimental?: boolean;
}

/**
 * Informational notes about what a value set relies on: deprecated, withdrawn or retired
 * resources, and experimental or draft ones referenced from a value set that is neither.
 */
export function reportStatus(issues: IssueList, facts: StatusFacts, source: ValueSet | undefined): void {
  let id: IssueId | undefined;
  if (facts.standardsStatus === 'deprecated') id = 'MSG_DEPRECATED';
  else if (facts.standardsStatus === 'withdrawn') id = 'MSG_WITHDRAWN';
  else if (facts.status === 'retired') id = 'MSG_RETIRED';
  else if (source && facts.experimental && !source.experimental) id = 'MSG_EXPERIMENTAL';
  else if (
    source &&
    (facts.status === 'draft' || facts.standardsStatus === 'draft') &&
    source.status !== 'draft' &&
    standardsStatusOf(source) !== 'draft'
  ) {
    id = 'MSG_DRAFT';
  }
  if (id) issues.add(txIssue(id, [facts.canonical, '', facts.type]));
}

export function checkResourceStatus(
  state: { issues: IssueList },
  resource: ValueSet | CodeSystem,
  source: ValueSet | undefined,
): void {
  reportStatus(
    state.issues,
    {
      type: resource.resourceType,
      canonical: canonicalOf(resource),
      status: resource.status,
      standardsStatus: standardsStatusOf(resource),
      experimental: resource.experimental,
    },
    source,
  );
}

export function checkCodeSystemStatus(state: CodingState, cs: CodeSystemProvider, source: ValueSet): void {
  if (cs.resource) checkResourceStatus(state, cs.resource, source);
}

function standardsStatusOf(resource: ValueSet | CodeSystem): string | undefined {
  return resource.extension?.find((e) => e.url === STANDARDS_STATUS)?.valueCode;
}
