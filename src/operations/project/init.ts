import { randomBytes, randomUUID } from 'node:crypto';
import type { Practitioner, Reference, Resource } from 'fhir/r4';
import { normalizeEmail, referenceParts } from '../../auth/accounts';
import { MIN_PASSWORD_LENGTH } from '../../auth/passwords';
import type {
  ClientApplicationResource,
  ProjectMembershipResource,
  ProjectResource,
  UserResource,
} from '../../fhir/admin-types';
import { fhirError, type FhirError } from '../../fhir/errors';
import type { AppServices } from '../../services';
import { SYSTEM_PROJECT } from '../../storage/store';
import { defineOperation } from '../operation';

/** `Project/$init` (this server's own, after Medplum's): a new tenant with its administrator. */

/**
 * The default client's scope: read and search only. Its secret is handed round more readily than
 * an administrator's password, so writing is granted only when an administrator widens the
 * ClientApplication's defaultScope (docs/security.md).
 */
export const DEFAULT_CLIENT_SCOPE = ['system/*.rs'];
export interface InitInput {
  name: string;
  ownerEmail?: string;
  ownerPassword?: string;
  ownerFirstName?: string;
  ownerLastName?: string;
  owner?: Reference;
}

export const projectInit = defineOperation<AppServices, InitInput, { return: Resource }>({
  definition: 'urn:fhir-tx-server:OperationDefinition:Project-init',
  operatorsOnly: true,
  created: true,
  handle: async (input, ctx) => {
    const { repository, auth, accounts, checkResource } = ctx.services;
    const name = input.name.trim();
    if (name === '') throw invalid('name is empty');
    if (input.owner && input.ownerEmail) throw invalid('give the owner as ownerEmail or as owner, not both');
    if (input.ownerPassword !== undefined && !input.ownerEmail)
      throw invalid('ownerPassword is for a new owner named by ownerEmail');
    if (input.ownerPassword !== undefined && input.ownerPassword.length < MIN_PASSWORD_LENGTH)
      throw invalid(`ownerPassword must have at least ${MIN_PASSWORD_LENGTH} characters`);
    const email = input.ownerEmail === undefined ? undefined : normalizeEmail(input.ownerEmail);
    if (email !== undefined && !/^[^\s@]+@[^\s@]+$/.test(email))
      throw invalid(`'${email.slice(0, 100)}' is not an email address`);

    const system = repository.in(SYSTEM_PROJECT);
    let user: UserResource | undefined;
    let newUser = false;
    if (input.owner) {
      const parts = referenceParts(input.owner);
      if (parts?.type !== 'User') throw invalid('owner must be a reference to a User (User/[id])');
      user = (
        await system.read('User', parts.id).catch(() => {
          throw invalid(`owner ${parts.type}/${parts.id} is not a User of this server`);
        })
      ).resource as UserResource;
    } else if (email !== undefined) {
      const existing = await accounts.userByEmail(email);
      if (existing) {
        if (input.ownerPassword !== undefined)
          throw invalid(
            'a user has this email already; their password is not changed by $init (leave ownerPassword out)',
          );
        user = (await system.read('User', existing)).resource as UserResource;
      } else {
        // A User has a first and a last name; when not given, the email's name and 'Administrator'.
        const firstName = input.ownerFirstName?.trim() || email.slice(0, email.indexOf('@'));
        const lastName = input.ownerLastName?.trim() || 'Administrator';
        user = { resourceType: 'User', id: randomUUID(), email, firstName, lastName };
        newUser = true;
        // Emails are unique: the claim is the one place two concurrent requests can meet.
        if (!(await accounts.claimEmail(email, user.id as string)))
          throw invalid('a user with this email was created at the same moment; try again');
      }
    }

    const projectId = randomUUID();
    const project: ProjectResource = { resourceType: 'Project', id: projectId, name };
    if (user) project.owner = { reference: `User/${user.id}` };
    const client: ClientApplicationResource = {
      resourceType: 'ClientApplication',
      id: randomUUID(),
      name: `${name} default client`,
      status: 'active',
      secret: randomBytes(32).toString('base64url'),
      defaultScope: DEFAULT_CLIENT_SCOPE,
    };
    const members: ProjectMembershipResource[] = [
      {
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${projectId}` },
        user: { reference: `ClientApplication/${client.id}` },
        profile: { reference: `ClientApplication/${client.id}` },
        admin: false,
      },
    ];
    let profile: Practitioner | undefined;
    if (user) {
      profile = {
        resourceType: 'Practitioner',
        id: randomUUID(),
        telecom: user.email ? [{ system: 'email', use: 'work', value: user.email }] : undefined,
      };
      if (user.firstName || user.lastName)
        profile.name = [{ given: user.firstName ? [user.firstName] : undefined, family: user.lastName }];
      members.unshift({
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${projectId}` },
        user: { reference: `User/${user.id}` },
        profile: { reference: `Practitioner/${profile.id}` },
        admin: true,
      });
    }
    try {
      const created = await system.transaction(async (tx) => {
        const stored = await tx.create('Project', checked(checkResource, project, SYSTEM_PROJECT), projectId);
        if (user && newUser) await tx.create('User', checked(checkResource, user, SYSTEM_PROJECT), user.id);
        const inProject = tx.in(projectId);
        if (profile) await inProject.create('Practitioner', checked(checkResource, profile, projectId), profile.id);
        await inProject.create('ClientApplication', checked(checkResource, client, projectId), client.id);
        for (const member of members)
          await inProject.create('ProjectMembership', checked(checkResource, member, projectId));
        return stored.version.resource as Resource;
      });
      if (user && newUser && input.ownerPassword !== undefined)
        await auth.setPassword(user.id as string, input.ownerPassword);
      ctx.log.info({ project: projectId, owner: user?.id }, 'project created');
      return { return: created };
    } catch (err) {
      if (newUser && email !== undefined) await accounts.releaseEmail(email);
      throw err;
    }
  },
});

function checked<T extends Resource>(check: AppServices['checkResource'], resource: T, project: string): T {
  check(resource.resourceType, resource, project);
  return resource;
}

function invalid(reason: string): FhirError {
  return fhirError('ERR_INIT_INVALID', { reason });
}
