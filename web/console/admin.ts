import type { Bundle, Resource } from 'fhir/r4';
import type { JobSummary } from '../../src/jobs/job-summary';
import { fhir, json } from './api';
import { byId, failure, h, show } from './dom';
import { backendServiceForm } from './services';
import type { Me } from './session';

/**
 * For a project's administrators (and operators): who the token is, the project's client
 * applications and members, and its background jobs (bulk exports, deliveries) with their
 * progress. Each part loads on "Refresh"; what the token may not see says so in place.
 */
export function adminViews(): void {
  const refresh = () => {
    void load('admin-me', async (out) => {
      const me = await json<Me>('/auth/me');
      const who = me.operator
        ? 'operator'
        : [me.user?.id && `User/${me.user.id}`, me.client?.reference].filter(Boolean).join(', ');
      const role = me.operator || me.admin ? 'administrator' : 'member';
      const profile = me.profile?.id ? `${me.profile.resourceType}/${me.profile.id}` : '';
      show(
        out,
        table(
          ['project', 'who', 'role', 'profile', 'scope'],
          [[me.project?.id ? `Project/${me.project.id}` : '', who, role, profile, me.scope ?? '']],
        ),
      );
    });
    void load('admin-clients', async (out) => {
      const bundle = await fhir<Bundle>('ClientApplication?_count=100');
      type Client = Resource & {
        name?: string;
        redirectUri?: string;
        jwksUri?: string;
        secret?: string;
        defaultScope?: string[];
      };
      const signIn = (c: Client) =>
        c.jwksUri ? 'key (private_key_jwt)' : c.secret ? 'secret' : c.redirectUri ? 'browser (redirect)' : '';
      const rows = resources<Client>(bundle).map((c) => [
        `ClientApplication/${c.id}`,
        c.name ?? '',
        signIn(c),
        (c.defaultScope ?? []).join(' '),
        c.redirectUri ?? '',
      ]);
      show(out, table(['client', 'name', 'signs in with', 'scopes', 'redirect URI'], rows));
    });
    void load('admin-members', async (out) => {
      const bundle = await fhir<Bundle>('ProjectMembership?_count=100');
      type Membership = Resource & {
        user?: { reference?: string };
        profile?: { reference?: string; display?: string };
        admin?: boolean;
      };
      const rows = resources<Membership>(bundle).map((m) => [
        m.user?.reference ?? '',
        m.profile?.display ?? m.profile?.reference ?? '',
        m.admin ? 'admin' : '',
      ]);
      show(out, table(['user or client', 'profile', 'role'], rows));
    });
    void load('admin-jobs', async (out) => {
      const { jobs } = await json<{ jobs: JobSummary[] }>('/admin/jobs?_count=50');
      const rows = jobs.map((j) => [
        j.kind,
        j.state,
        j.progress ?? '',
        j.createdAt.replace('T', ' ').slice(0, 19),
        j.finishedAt?.replace('T', ' ').slice(0, 19) ?? '',
        j.requestedBy,
        j.lastError ?? '',
      ]);
      show(
        out,
        h('p', { class: 'hint', id: 'admin-jobs-count' }, `${jobs.length} jobs`),
        table(['kind', 'state', 'progress', 'created', 'finished', 'by', 'last error'], rows),
      );
    });
  };
  byId('admin-refresh').addEventListener('click', refresh);
  backendServiceForm(refresh);
  document.querySelector<HTMLButtonElement>('.tab[data-tab="admin"]')?.addEventListener('click', refresh);
}

async function load(id: string, work: (out: HTMLElement) => Promise<void>): Promise<void> {
  const out = byId(id);
  try {
    await work(out);
  } catch (err) {
    failure(out, err);
  }
}

function resources<T>(bundle: Bundle): T[] {
  return (bundle.entry ?? [])
    .filter((e) => e.search?.mode !== 'include' && e.resource)
    .map((e) => e.resource as unknown as T);
}

function table(headers: string[], rows: string[][]): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'hint' }, 'None');
  return h(
    'table',
    {},
    h('tr', {}, ...headers.map((t) => h('th', {}, t))),
    ...rows.map((row) => h('tr', {}, ...row.map((cell) => h('td', {}, cell)))),
  );
}
