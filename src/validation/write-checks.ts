import type { OperationOutcomeIssue, Resource } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import { SERVED_RESOURCE_TYPES } from '../fhir/admin-types';
import type { ResourceSchema } from '../fhir/resource-schema';
import { hasErrors, toOutcome } from './issues';
import type { ResourceValidator } from './validator';

/**
 * What the write path asks of validation. Every create and update gets the structural check (fast,
 * synchronous, bundled definitions only); optionally (VALIDATE_ON_WRITE, or a request's
 * X-Validate-On-Write header) the full validation $validate does, refusing a resource with errors.
 */

/** Further error issues the structural check lists after the first (the first is the message). */
const MAX_LISTED = 20;

/** The structural check of writes, in the shape the app and the REST layer use. */
export class StructuralCheck implements ResourceSchema {
  readonly resourceTypes: ReadonlySet<string> = new Set(SERVED_RESOURCE_TYPES);

  constructor(private readonly validator: ResourceValidator) {}

  isResourceType(type: string): boolean {
    return this.resourceTypes.has(type);
  }

  /** Throws ERR_RESOURCE_INVALID naming the first error's FHIRPath (and listing up to 20 more). */
  check(type: string, resource: Resource, options: { partial?: boolean } = {}): void {
    const errors = this.validator
      .checkStructure(resource)
      .filter((i) => (i.severity === 'error' || i.severity === 'fatal') && !(options.partial && i.code === 'required'));
    if (errors.length === 0) return;
    const [first, ...rest] = errors;
    const error = fhirError(
      'ERR_RESOURCE_INVALID',
      { type, path: first.expression, reason: first.message },
      { expression: [first.expression] },
    );
    const more: OperationOutcomeIssue[] = rest
      .slice(0, MAX_LISTED)
      .map((i) => ({ severity: 'error', code: i.code, details: { text: i.message }, expression: [i.expression] }));
    error.outcome.issue.push(...more);
    throw error;
  }
}

/** The request header that turns validation on write on or off for one request. */
export const VALIDATE_HEADER = 'x-validate-on-write';

/** Whether this write is to be validated: the header when the request sends one, else the setting. */
export function validatesOnWrite(setting: boolean, header: string | string[] | undefined): boolean {
  if (header === undefined) return setting;
  const value = String(header).trim().toLowerCase();
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw fhirError('ERR_REQUEST_INVALID', {
    reason: `${VALIDATE_HEADER} must be true or false, not '${value.slice(0, 20)}'`,
  });
}

/**
 * Full validation before a write: profiles the resource claims, invariants, bindings. Resolves when
 * there is no error; throws ERR_VALIDATION_FAILED (422) whose OperationOutcome is the one $validate
 * would answer. Warnings never refuse a write.
 */
export async function validateBeforeWrite(
  validator: ResourceValidator,
  resource: Resource,
  options: { deadline: number; project: string },
): Promise<void> {
  const issues = await validator.validate(resource, { deadline: options.deadline, project: options.project });
  if (!hasErrors(issues)) return;
  const outcome = toOutcome(issues);
  const count = issues.filter((i) => i.severity === 'error' || i.severity === 'fatal').length;
  throw fhirError('ERR_VALIDATION_FAILED', { type: resource.resourceType, count }, { issues: outcome.issue });
}
