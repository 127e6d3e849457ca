import type { EphemeralStore } from '../storage/ephemeral';
import type { Notices } from '../storage/notices';
import { SYSTEM_PROJECT } from '../storage/store';
import type { MembershipKey } from '../storage/admin-lookups';
import type { PolicyRule, Principal } from './principal';
import { REFRESH_TOKEN_MS, type Revocations, type TokenGrant } from './tokens';

/**
 * Whether what an access token says still holds, asked on every request: the token is signed and
 * lives an hour, but the membership it stands on may be deleted, deactivated or changed (admin
 * flag, access policy, profile), its User deleted, and its sign-in revoked (a refresh token of its
 * family was reused). A token that says more than holds now is refused (401); its refresh token
 * gets one that says what holds.
 *
 * Cheap on the hot path: answers are kept per token content and the change marks of memberships,
 * access policies and users (ResourceStore.changeMarks: in memory until some process writes one of
 * those types, learnt through the store's change notices), so a request pays map lookups until an
 * administrative write. Revoked sign-ins are kept in the ephemeral store (shared by every process)
 * and announced on a notice channel; a process that may have missed a notice asks again.
 */

export const REVOKED_CHANNEL = 'auth_revoked';
const WATCHED = ['ProjectMembership', 'AccessPolicy'];
const KEPT = 10_000;

export interface LiveGrantDeps {
  grantOf(key: MembershipKey): Promise<TokenGrant | undefined>;
  userExists(id: string): Promise<boolean>;
  marks(project: string, types: string[]): Promise<Map<string, number>>;
  ephemeral: EphemeralStore;
  notices: Notices;
}

export class LiveGrants implements Revocations {
  private readonly answers = new Map<string, { marks: string; live: boolean }>();
  private readonly families = new Map<string, boolean>();
  private stopListening?: () => void;

  constructor(private readonly deps: LiveGrantDeps) {}

  /** Listens for other processes' revocations; until then (and after a missed notice) each is asked for. */
  async start(): Promise<void> {
    this.stopListening = await this.deps.notices.listen(
      REVOKED_CHANNEL,
      (family) => this.remember(this.families, family, true),
      () => this.families.clear(),
    );
  }

  close(): void {
    this.stopListening?.();
  }

  /** Revokes a sign-in: every refresh and access token of its family, in every process. */
  async revoke(family: string): Promise<void> {
    await this.deps.ephemeral.put('revoked-family', family, '1', Date.now() + REFRESH_TOKEN_MS);
    this.remember(this.families, family, true);
    await this.deps.notices.publish(REVOKED_CHANNEL, family);
  }

  /** Asked of the store itself (a refresh is rare; the answer must not lag a notice). */
  async revoked(family: string): Promise<boolean> {
    const revoked = (await this.deps.ephemeral.peek('revoked-family', family)) !== undefined;
    this.remember(this.families, family, revoked);
    return revoked;
  }

  /** Whether the principal of a verified token may still act as the token says. */
  async holds(principal: Principal): Promise<boolean> {
    if (principal.operator) return true;
    if (principal.family !== undefined) {
      const known = this.families.get(principal.family);
      if (known ?? (await this.revoked(principal.family))) return false;
    }
    if (principal.membership === undefined) return true;
    const marks = await this.marksOf(principal.project);
    const key = fingerprint(principal);
    const cached = this.answers.get(key);
    if (cached?.marks === marks) return cached.live;
    const live = await this.stillHolds(principal, principal.membership);
    this.remember(this.answers, key, { marks, live });
    return live;
  }

  private async stillHolds(principal: Principal, membership: string): Promise<boolean> {
    const grant = await this.deps.grantOf({ project: principal.project, id: membership });
    if (!grant) return false;
    if (grant.admin !== principal.admin || grant.user !== principal.user || grant.profile !== principal.profile)
      return false;
    if (!samePolicy(grant.policy, principal.policy)) return false;
    return principal.user === undefined || this.deps.userExists(principal.user);
  }

  private async marksOf(project: string): Promise<string> {
    const [own, users] = await Promise.all([
      this.deps.marks(project, WATCHED),
      this.deps.marks(SYSTEM_PROJECT, ['User']),
    ]);
    return `${WATCHED.map((t) => own.get(t) ?? 0).join(':')}:${users.get('User') ?? 0}`;
  }

  private remember<V>(map: Map<string, V>, key: string, value: V): void {
    if (map.size >= KEPT && !map.has(key)) map.delete(map.keys().next().value as string);
    map.set(key, value);
  }
}

function fingerprint(p: Principal): string {
  return JSON.stringify([p.project, p.membership, p.user, p.profile, p.admin, p.policy ?? null]);
}

function samePolicy(a: PolicyRule[] | undefined, b: PolicyRule[] | undefined): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}
