import type { Reference, Resource } from 'fhir/r4';
import type {
  AccessPolicyResource as AccessPolicy,
  ClientApplicationResource as ClientApplication,
  ProjectMembershipResource as ProjectMembership,
} from '../fhir/admin-types';
import type { Repository } from '../storage/repository';
import { firstHolder, membershipsOf, projectsHolding, type MembershipKey } from '../storage/admin-lookups';
import { NEVER as NEVER_EXPIRES, type EphemeralStore } from '../storage/ephemeral';
import { SYSTEM_PROJECT } from '../storage/store';
import type { PolicyRule } from './principal';
import type { TokenGrant } from './tokens';

/**
 * The accounts behind sign-in: a person's User (system scope) and its memberships, a machine's
 * ClientApplication and its membership, and the grant each membership gives. Emails are unique
 * (claimed in the ephemeral store, lower-cased, so two processes cannot both take one); password
 * hashes live there too, never in a resource.
 */

const EMAIL = 'user-email';
const PASSWORD = 'password';

export interface ClientRecord {
  project: string;
  client: ClientApplication;
}

export class Accounts {
  constructor(
    private readonly repository: Repository,
    private readonly ephemeral: EphemeralStore,
  ) {}

  /** The User id an email belongs to. */
  userByEmail(email: string): Promise<string | undefined> {
    return this.ephemeral.peek(EMAIL, normalizeEmail(email));
  }

  /** Takes an email for a user; false when another holds it. */
  claimEmail(email: string, user: string): Promise<boolean> {
    return this.ephemeral.claim(EMAIL, normalizeEmail(email), user, NEVER_EXPIRES);
  }

  releaseEmail(email: string): Promise<void> {
    return this.ephemeral.remove(EMAIL, normalizeEmail(email));
  }

  passwordHash(user: string): Promise<string | undefined> {
    return this.ephemeral.peek(PASSWORD, user);
  }

  setPasswordHash(user: string, hash: string): Promise<void> {
    return this.ephemeral.put(PASSWORD, user, hash, NEVER_EXPIRES);
  }

  /** Whether the User (system scope) is there, not deleted. */
  async userExists(id: string): Promise<boolean> {
    return (await this.repository.store.read(SYSTEM_PROJECT, 'User', id))?.resource != null;
  }

  /** A stored resource of a project's scope (or the system scope), undefined when absent or deleted. */
  async resource(project: string, type: string, id: string): Promise<Resource | undefined> {
    return (await this.repository.store.read(project, type, id))?.resource ?? undefined;
  }

  /** The live memberships of a person or a client, in every project. */
  memberships(member: { type: 'User' | 'ClientApplication' | 'Bot'; id: string }): Promise<MembershipKey[]> {
    return membershipsOf(this.repository.store, member);
  }

  /**
   * A client application by id, in the project that owns the id: the one that created it first.
   * Ids are unique across projects (src/auth/admin-writes.ts); a copy another project made before
   * they were never stands in for the owner's client.
   */
  async client(id: string): Promise<ClientRecord | undefined> {
    if (!/^[A-Za-z0-9\-.]{1,64}$/.test(id)) return undefined;
    const project = await this.clientOwner(id);
    if (project === undefined) return undefined;
    const version = await this.repository.in(project).read('ClientApplication', id);
    return { project, client: version.resource as unknown as ClientApplication };
  }

  private async clientOwner(id: string): Promise<string | undefined> {
    const projects = (await projectsHolding(this.repository.store, 'ClientApplication', id)).filter(
      (p) => p !== SYSTEM_PROJECT,
    );
    if (projects.length <= 1) return projects[0];
    return firstHolder(this.repository.store, 'ClientApplication', id, projects);
  }

  /** What a membership gives now: admin flag, profile, access policy (undefined when it is gone or inactive). */
  async grantOf(key: MembershipKey): Promise<TokenGrant | undefined> {
    const repo = this.repository.in(key.project);
    let membership: ProjectMembership;
    try {
      membership = (await repo.read('ProjectMembership', key.id)).resource as unknown as ProjectMembership;
    } catch {
      return undefined;
    }
    if (membership.active === false) return undefined;
    const member = referenceParts(membership.user);
    const profile = membership.profile?.reference;
    const grant: TokenGrant = {
      project: key.project,
      membership: key.id,
      admin: membership.admin === true,
      profile,
      patient: profile?.startsWith('Patient/') ? profile.slice('Patient/'.length) : undefined,
    };
    if (member?.type === 'User') grant.user = member.id;
    if (member?.type === 'ClientApplication') grant.client = member.id;
    const policy = membership.accessPolicy ?? membership.access?.[0]?.policy;
    if (policy) grant.policy = await this.policyRules(key.project, policy);
    return grant;
  }

  /** The rules of an access policy; one that cannot be read allows nothing (never everything). */
  private async policyRules(project: string, reference: Reference): Promise<PolicyRule[]> {
    const parts = referenceParts(reference);
    if (parts?.type !== 'AccessPolicy') return [];
    try {
      const policy = (await this.repository.in(project).read('AccessPolicy', parts.id))
        .resource as unknown as AccessPolicy;
      // A rule limited by criteria this server does not enforce would allow the whole type: it allows nothing.
      return (policy.resource ?? [])
        .filter((r) => typeof r.resourceType === 'string' && r.criteria === undefined)
        .map((r) => ({ type: r.resourceType as string, readonly: r.readonly === true }));
    } catch {
      return [];
    }
  }
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function referenceParts(reference: Reference | undefined): { type: string; id: string } | undefined {
  const match = /^([A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/.exec(reference?.reference ?? '');
  return match ? { type: match[1], id: match[2] } : undefined;
}
