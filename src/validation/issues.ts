import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4';

/** One finding about an instance, located by a FHIRPath expression (`Patient.contact[0].name`). */
export interface ValidationIssue {
  severity: 'fatal' | 'error' | 'warning' | 'information';
  code: OperationOutcomeIssue['code'];
  message: string;
  expression: string;
  /** The constraint key or profile the finding comes from, when there is one. */
  source?: string;
}

/** Where the checks put what they find. */
export interface Report {
  error(code: ValidationIssue['code'], expression: string, message: string, source?: string): void;
  warning(code: ValidationIssue['code'], expression: string, message: string): void;
}

export function hasErrors(issues: readonly ValidationIssue[]): boolean {
  return issues.some((i) => i.severity === 'error' || i.severity === 'fatal');
}

const ORDER = { fatal: 0, error: 1, warning: 2, information: 3 } as const;

/**
 * The findings as an OperationOutcome: one issue per distinct finding (several profiles of one
 * resource find the same missing element once), errors first, in document order within a
 * severity. With no finding at all, the single information issue R4 needs (an outcome has at
 * least one issue) says so.
 */
export function toOutcome(issues: readonly ValidationIssue[]): OperationOutcome {
  const seen = new Set<string>();
  const unique: ValidationIssue[] = [];
  for (const issue of issues) {
    const key = `${issue.severity}\u0000${issue.expression}\u0000${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    unique.push(issue);
  }
  const sorted = unique
    .map((issue, i) => ({ issue, i }))
    .sort((a, b) => ORDER[a.issue.severity] - ORDER[b.issue.severity] || a.i - b.i);
  const out: OperationOutcomeIssue[] = sorted.map(({ issue }) => {
    const entry: OperationOutcomeIssue = {
      severity: issue.severity,
      code: issue.code,
      details: { text: issue.message },
    };
    if (issue.expression) entry.expression = [issue.expression];
    if (issue.source) entry.diagnostics = issue.source;
    return entry;
  });
  if (out.length === 0) out.push({ severity: 'information', code: 'informational', details: { text: 'All OK' } });
  return { resourceType: 'OperationOutcome', issue: out };
}
