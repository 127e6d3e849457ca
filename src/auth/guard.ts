import type { Resource } from 'fhir/r4';
import { ADMIN_WRITTEN_TYPES, PROJECT_ADMIN_TYPES, SYSTEM_SCOPE_TYPES } from '../fhir/admin-types';
import { fhirError } from '../fhir/errors';
import type { Principal } from './principal';
import { contextsAllowing, type Permission } from './scopes';

/**
 * What a principal may do, decided per interaction and resource type, before anything is read:
 * - operators may do everything;
 * - Project and User (system scope): a member reads its own project and its own user, nothing more,
 *   and writes neither; ProjectMembership, ClientApplication, AccessPolicy: project admins only;
 *   Bot: members read, project admins write;
 *   SearchParameter (they shape the whole server's index): operators write them;
 * - the membership's access policy, when it has one, names the types allowed and which only to read;
 * - SMART scopes, when the token has them: `system/` and `user/` allow the type in the project,
 *   `patient/` only within the launch patient's compartment;
 * - a membership whose profile is a Patient, without an access policy: that patient's compartment
 *   only (as `patient/*.*`), whatever its scopes.
 * Refusals are 403 about the type, never about a resource: whether one exists is not told.
 */

export type Interaction = 'read' | 'search' | 'history' | 'create' | 'update' | 'delete';

const PERMISSION: Record<Interaction, Permission> = {
  read: 'r',
  search: 's',
  history: 'r',
  create: 'c',
  update: 'u',
  delete: 'd',
};

/** What an allowed interaction is limited to. */
export interface Grant {
  /** Only resources in this patient's compartment. */
  patient?: string;
  /** Only these ids (a member's own Project or User). */
  ids?: string[];
}

/** Whether a grant is limited to some resources of its type (its own ids, a patient's compartment). */
export function isLimited(grant: Grant): boolean {
  return grant.ids !== undefined || grant.patient !== undefined;
}

export interface GuardDeps {
  /** The Patient compartment's parameters for a type (undefined: the type is not in it). */
  patientCompartment(type: string): string[] | undefined;
  /** The references a resource holds, by the search parameter that indexes each. */
  references(resource: Resource): { param: string; type: string | null; id: string | null }[];
}

export class AccessGuard {
  constructor(private readonly deps: GuardDeps) {}

  /** Throws 403 when the principal may not do this to resources of the type at all; else what it is limited to. */
  allow(principal: Principal | undefined, interaction: Interaction, type: string): Grant {
    if (!principal || principal.operator) return {};
    const writing = interaction === 'create' || interaction === 'update' || interaction === 'delete';
    const grant: Grant = {};
    if (SYSTEM_SCOPE_TYPES.has(type)) {
      if (writing) throw forbidden(`${type} resources are changed by the server's operators`);
      grant.ids = type === 'Project' ? [principal.project] : principal.user ? [principal.user] : [];
    }
    if (PROJECT_ADMIN_TYPES.has(type) && !principal.admin)
      throw forbidden(`${type} resources are the project administrators' to see and change`);
    if (ADMIN_WRITTEN_TYPES.has(type) && writing && !principal.admin)
      throw forbidden(`${type} resources are the project administrators' to change`);
    if (type === 'SearchParameter' && writing)
      throw forbidden("search parameters apply to the whole server; the server's operators define them");
    if (principal.policy) {
      const rule = principal.policy.find((r) => r.type === type) ?? principal.policy.find((r) => r.type === '*');
      if (!rule) throw forbidden(`the access policy does not include ${type}`);
      if (rule.readonly && writing) throw forbidden(`the access policy allows ${type} only to be read`);
    }
    if (principal.scopes) {
      const contexts = contextsAllowing(principal.scopes, type, PERMISSION[interaction]);
      if (contexts.size === 0) throw forbidden(`the token's scopes do not allow ${interaction} of ${type}`);
      // Only patient/ scopes allow it: within the launch patient's compartment.
      if (!contexts.has('system') && !contexts.has('user'))
        this.withinPatient(grant, principal.patient, interaction, type, "the token's patient/ scopes");
    }
    // A patient's own membership without an access policy: the patient's compartment, whatever
    // scopes the person asked for at sign-in (they choose those themselves).
    if (isPatientMember(principal))
      this.withinPatient(grant, principal.patient, interaction, type, 'a patient membership without an access policy');
    return grant;
  }

  private withinPatient(
    grant: Grant,
    patient: string | undefined,
    interaction: Interaction,
    type: string,
    by: string,
  ): void {
    if (!patient) throw forbidden(`${by}: no patient in context`);
    if (type !== 'Patient' && !this.deps.patientCompartment(type))
      throw forbidden(`${type} is not in a patient's compartment (${by})`);
    if (interaction === 'history') throw forbidden(`history is not available to ${by}`);
    grant.patient = patient;
  }

  /** Whether a resource (its current content, or what is about to be written) is within the grant. */
  covers(grant: Grant, resource: Resource): boolean {
    if (grant.ids && !grant.ids.includes(resource.id as string)) return false;
    if (grant.patient !== undefined) return this.inPatientCompartment(resource, grant.patient);
    return true;
  }

  /** Every type in the grant's terms: a search of all types, or system history. */
  allowAll(principal: Principal | undefined, interaction: Interaction): void {
    if (!principal || principal.operator) return;
    if (isPatientMember(principal))
      throw forbidden("a patient's membership reaches its own compartment one type at a time; name the types (_type)");
    if (principal.policy && !principal.policy.some((r) => r.type === '*'))
      throw forbidden('the access policy does not include every type; name the types (_type)');
    if (principal.scopes) {
      const contexts = contextsAllowing(principal.scopes, '*', PERMISSION[interaction]);
      if (!contexts.has('system') && !contexts.has('user'))
        throw forbidden(`the token's scopes do not allow ${interaction} of every type; name the types (_type)`);
    }
  }

  private inPatientCompartment(resource: Resource, patient: string): boolean {
    if (resource.resourceType === 'Patient' && resource.id === patient) return true;
    const params = this.deps.patientCompartment(resource.resourceType);
    if (!params) return false;
    return this.deps
      .references(resource)
      .some((r) => r.type === 'Patient' && r.id === patient && params.includes(r.param));
  }
}

/** A membership whose profile is a Patient, with no access policy and not an administrator's. */
function isPatientMember(principal: Principal): principal is Principal & { patient: string } {
  return (
    principal.patient !== undefined &&
    principal.profile === `Patient/${principal.patient}` &&
    !principal.policy &&
    !principal.admin
  );
}

function forbidden(reason: string) {
  return fhirError('ERR_AUTH_FORBIDDEN', { reason });
}
