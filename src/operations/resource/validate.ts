import type { OperationOutcome, Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import type { AppServices } from '../../services';
import { toOutcome, type ValidationIssue } from '../../validation/issues';
import { defineOperation, type OperationContext } from '../operation';

/**
 * Resource/$validate (type and instance level, every resource type): the resource against the R4
 * definitions, the profiles it claims, and the `profile` asked for. The answer is 200 with an
 * OperationOutcome whether or not the resource is valid; 4xx only when validation cannot be done
 * (no resource, an unknown or unusable profile, a mode that needs the instance level).
 */
export interface ResourceValidateInput {
  resource?: Resource;
  mode?: string;
  profile?: string;
}

const MODES = ['create', 'update', 'delete', 'profile'];

export const resourceValidate = defineOperation<AppServices, ResourceValidateInput, { return: OperationOutcome }>({
  definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate',
  // An invalid resource is what this operation is for: it must reach the handler, not be refused.
  judgesResources: true,
  handle: async (input, ctx) => {
    const mode = input.mode;
    if (mode !== undefined && !MODES.includes(mode)) {
      throw fhirError('ERR_PARAM_VALUE', {
        name: 'mode',
        type: 'mode (create | update | delete | profile)',
        value: mode.slice(0, 50),
      });
    }
    if ((mode === 'update' || mode === 'delete') && ctx.level !== 'instance') {
      throw fhirError('ERR_PARAM_RULE', {
        message: `Mode '${mode}' validates against an existing resource: invoke it as POST [type]/[id]/$validate`,
      });
    }
    if (mode === 'delete') return { return: toOutcome(await referrers(ctx)) };
    const resource = input.resource;
    if (!resource) throw fhirError('ERR_PARAM_MISSING', { name: 'resource' });
    if (ctx.resourceType && resource.resourceType !== ctx.resourceType) {
      throw fhirError('ERR_RESOURCE_TYPE_MISMATCH', {
        expected: ctx.resourceType,
        found: String(resource.resourceType).slice(0, 64),
      });
    }
    if (mode === 'profile' && !input.profile) throw fhirError('ERR_PARAM_MISSING', { name: 'profile' });
    const issues = await ctx.services.validator.validate(resource, {
      profiles: input.profile ? [input.profile] : [],
      ignoreClaimedProfiles: mode === 'profile',
      deadline: ctx.deadline,
      project: ctx.request.project,
    });
    if (mode === 'update') issues.push(...updateRules(resource, ctx));
    return { return: toOutcome(issues) };
  },
});

/** An update needs the id, and at the instance level the id of the resource in the URL. */
function updateRules(resource: Resource, ctx: OperationContext<AppServices>): ValidationIssue[] {
  const at = `${resource.resourceType}.id`;
  if (resource.id === undefined)
    return [{ severity: 'error', code: 'required', message: 'A resource to update must carry its id', expression: at }];
  if (ctx.target && resource.id !== ctx.target.id) {
    return [
      {
        severity: 'error',
        code: 'invalid',
        message: `The id '${resource.id}' is not the id of the resource in the URL ('${ctx.target.id}')`,
        expression: at,
      },
    ];
  }
  return [];
}

const MAX_LISTED = 20;

/** Mode delete: a warning for each stored resource that refers to the target (from the search index). */
async function referrers(ctx: OperationContext<AppServices>): Promise<ValidationIssue[]> {
  const target = ctx.target as Resource;
  const wanted = `${target.resourceType}/${target.id}`;
  // A reference is indexed under every parameter that reads it (subject and patient): one warning per resource.
  const byResource = new Map<string, string[]>();
  for (const r of await ctx.services.repository
    .in(ctx.request.project)
    .referrers(target.resourceType, target.id as string, 10 * (MAX_LISTED + 1))) {
    const key = `${r.type}/${r.id}`;
    byResource.set(key, [...(byResource.get(key) ?? []), r.param]);
  }
  const found = [...byResource];
  const issues: ValidationIssue[] = found.slice(0, MAX_LISTED).map(([from, params]) => ({
    severity: 'warning',
    code: 'business-rule',
    message: `${wanted} is referred to by ${from} (search parameters ${[...new Set(params)].sort().join(', ')})`,
    expression: target.resourceType,
  }));
  if (found.length > MAX_LISTED) {
    issues.push({
      severity: 'information',
      code: 'informational',
      message: `More resources than the ${MAX_LISTED} listed refer to ${wanted}`,
      expression: target.resourceType,
    });
  }
  return issues;
}
