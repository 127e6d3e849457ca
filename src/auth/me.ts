import type { Identifier, Resource } from 'fhir/r4';
import type { ProjectMembershipResource, ProjectResource, UserResource } from '../fhir/admin-types';
import { SYSTEM_PROJECT } from '../storage/store';
import { referenceParts } from './accounts';
import type { Principal } from './principal';
import { formatScopes } from './scopes';

/**
 * The answer of `/auth/me`, shaped as Medplum's server shapes it: MedplumClient takes `profile`
 * as the signed-in person's resource (getProfile(), and what processCode() resolves to), and
 * `project` and `membership` as resources (getProject(), getProjectMembership()). So they are the
 * resources themselves, cut to the elements Medplum's handler gives out, not references. Our own
 * members (`client`, `patient`, `admin`, `operator`, `scope`) ride along; Medplum's client
 * ignores them and the console reads them.
 */

/** Reads one stored resource in a project's scope (undefined: not there, or deleted). */
export type ReadResource = (project: string, type: string, id: string) => Promise<Resource | undefined>;

export interface SessionDetails {
  user?: { resourceType: 'User'; id: string; email?: string; identifier?: Identifier[] };
  project: {
    resourceType: 'Project';
    id: string;
    name?: string;
    description?: string;
    strictMode?: boolean;
    superAdmin?: boolean;
  };
  membership?: Pick<ProjectMembershipResource, 'resourceType' | 'identifier' | 'user' | 'profile' | 'admin'> & {
    id: string;
  };
  profile?: Resource;
  config: { resourceType: 'UserConfiguration' };
  accessPolicy?: Resource;
  client?: { reference: string };
  patient?: string;
  admin: boolean;
  operator: boolean;
  scope?: string;
}

export async function sessionDetails(principal: Principal, read: ReadResource): Promise<SessionDetails> {
  const project = (await read(SYSTEM_PROJECT, 'Project', principal.project)) as
    (ProjectResource & { description?: string; strictMode?: boolean; superAdmin?: boolean }) | undefined;
  const user = principal.user
    ? ((await read(SYSTEM_PROJECT, 'User', principal.user)) as
        (UserResource & { identifier?: Identifier[] }) | undefined)
    : undefined;
  const membership = principal.membership
    ? ((await read(principal.project, 'ProjectMembership', principal.membership)) as
        ProjectMembershipResource | undefined)
    : undefined;
  const inProject = async (reference: string | undefined) => {
    const parts = referenceParts(reference ? { reference } : undefined);
    return parts ? read(principal.project, parts.type, parts.id) : undefined;
  };
  const policy = membership?.accessPolicy ?? membership?.access?.[0]?.policy;
  return {
    user:
      user && principal.user
        ? { resourceType: 'User', id: principal.user, email: user.email, identifier: user.identifier }
        : undefined,
    project: {
      resourceType: 'Project',
      id: principal.project,
      name: project?.name,
      description: project?.description,
      strictMode: project?.strictMode,
      superAdmin: project?.superAdmin,
    },
    membership:
      membership && principal.membership
        ? {
            resourceType: 'ProjectMembership',
            id: principal.membership,
            identifier: membership.identifier,
            user: membership.user,
            profile: membership.profile,
            admin: membership.admin,
          }
        : undefined,
    profile: withoutSecret(await inProject(principal.profile)),
    config: { resourceType: 'UserConfiguration' },
    accessPolicy: await inProject(policy?.reference),
    client: principal.client ? { reference: `ClientApplication/${principal.client}` } : undefined,
    patient: principal.patient,
    admin: principal.admin,
    operator: principal.operator,
    scope: principal.scopes ? formatScopes(principal.scopes) : undefined,
  };
}

/**
 * A machine's profile is its ClientApplication: answered without its secret, which a token made
 * with a signed assertion (private_key_jwt) never needed, and which no answer needs to repeat.
 */
function withoutSecret(profile: Resource | undefined): Resource | undefined {
  if (profile?.resourceType !== 'ClientApplication' || !('secret' in profile)) return profile;
  const { secret: _secret, ...rest } = profile as Resource & { secret?: string };
  return rest;
}
