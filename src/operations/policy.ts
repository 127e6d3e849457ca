import type { Resource } from 'fhir/r4';
import type { AccessGuard } from '../auth/guard';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { ResourceSchema } from '../fhir/resource-schema';
import type { OperationCall } from './invoke';
import type { BoundOperation } from './registry';

/**
 * Who may run an operation: operators run anything; an operation for operators only, or one at
 * system level that affects state, is theirs alone; an operation on a type reads it, or updates
 * it when it affects state, under the principal's grants.
 */
export function operationPolicy(guard: AccessGuard) {
  return <S>(op: BoundOperation<S>, call: OperationCall, ctx: RequestContext): void => {
    const principal = ctx.principal;
    if (principal.operator) return;
    if (op.operatorsOnly || (call.level === 'system' && op.spec.affectsState)) {
      throw fhirError('ERR_AUTH_FORBIDDEN', { reason: `$${op.spec.code} is for the server's operators` });
    }
    if (call.type) guard.allow(principal, op.spec.affectsState ? 'update' : 'read', call.type);
  };
}

/** The check of a resource given as an operation's parameter: an R4 resource, structurally sound. */
export function parameterCheck(schema: ResourceSchema) {
  return (resource: Resource, at: string): void => {
    if (!schema.isResourceType(resource.resourceType)) {
      throw fhirError(
        'ERR_PARAM_VALUE',
        { name: at, type: 'R4 resource', value: String(resource.resourceType).slice(0, 100) },
        { expression: [at] },
      );
    }
    // A Parameters given as a parameter is some operation's input: read and checked against that
    // operation's definition when it is used (with the same tolerance as a request body).
    if (resource.resourceType !== 'Parameters') schema.check(resource.resourceType, resource, { partial: true });
  };
}
