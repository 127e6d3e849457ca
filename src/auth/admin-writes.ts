import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import type { ProjectMembershipResource } from '../fhir/admin-types';
import { fhirError } from '../fhir/errors';
import type { MembershipKey } from '../storage/admin-lookups';
import type { WriteEvent, WriteObserver } from '../storage/repository';
import type { StoreTx } from '../storage/store';
import { referenceParts } from './accounts';

/**
 * What a project's administrators may not write, though the types are theirs, because it reaches
 * beyond their project: sign-in finds a client by its id and a person by their memberships in
 * every project, so
 * - a ClientApplication's id is unique across projects: one another project holds is refused, 409,
 *   or its owner's client would stop signing in (checked inside the writing transaction, under a
 *   lock on the id, so two projects racing for one id cannot both get it);
 * - a ProjectMembership's `user` is a User who is a member of this project already (people join a
 *   project through the server's operators: `Project/$init`, or a membership an operator writes),
 *   or a ClientApplication or Bot of this project: a membership for anyone else is refused, 403.
 * Operators (and the server acting for itself: a bot's own membership) are not limited by the
 * second; nobody, operators included, makes a second client with an id.
 */

export interface AdminWriteDeps {
  memberships(member: { type: 'User'; id: string }): Promise<MembershipKey[]>;
  /** Whether a live resource of the type and id is in the project. */
  exists(project: string, type: string, id: string): Promise<boolean>;
}

/** The membership rule, before a write (a project administrator's; operators' are theirs to decide). */
export async function checkAdminWrite(resource: Resource, ctx: RequestContext, deps: AdminWriteDeps): Promise<void> {
  if (ctx.principal.operator) return;
  if (resource.resourceType === 'ProjectMembership')
    await checkMember(resource as ProjectMembershipResource, ctx.project, deps);
}

/** The client id rule, inside every writing transaction. */
export class UniqueClientIds implements WriteObserver {
  async written(tx: StoreTx, project: string, events: WriteEvent[]): Promise<void> {
    for (const { version } of events) {
      if (version.type !== 'ClientApplication' || !version.resource) continue;
      await tx.lock(`client-id:${version.id}`);
      const elsewhere = await tx.query<{ project: string }>(
        "SELECT project FROM resources WHERE type = 'ClientApplication' AND id = ? AND deleted = FALSE AND project <> ? LIMIT 1",
        [version.id, project],
      );
      if (elsewhere.length > 0) throw fhirError('ERR_RESOURCE_EXISTS', { type: 'ClientApplication', id: version.id });
    }
  }
}

async function checkMember(
  membership: ProjectMembershipResource,
  project: string,
  deps: AdminWriteDeps,
): Promise<void> {
  const member = referenceParts(membership.user);
  if (member?.type === 'User') {
    const joined = (await deps.memberships({ type: 'User', id: member.id })).some((m) => m.project === project);
    if (!joined)
      throw refused(
        "a person joins a project through the server's operators; the membership's user must be a member of this project already",
      );
    return;
  }
  if (
    (member?.type === 'ClientApplication' || member?.type === 'Bot') &&
    (await deps.exists(project, member.type, member.id))
  )
    return;
  throw refused("the membership's user must be a User of this project, or one of its ClientApplications or Bots");
}

function refused(reason: string) {
  return fhirError('ERR_AUTH_FORBIDDEN', { reason });
}
