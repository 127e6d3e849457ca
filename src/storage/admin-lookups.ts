import type { StoreReader } from './store';

/**
 * The few reads that cross projects, for signing in: a person's memberships (one per project they
 * belong to) and a client application by its id (its project is not known before). Everything
 * else any request reads is within one project.
 */

export interface MembershipKey {
  project: string;
  id: string;
}

/** The live memberships, in any project, whose `user` is this User, ClientApplication or Bot. */
export async function membershipsOf(
  reader: StoreReader,
  member: { type: 'User' | 'ClientApplication' | 'Bot'; id: string },
): Promise<MembershipKey[]> {
  return reader.query<MembershipKey>(
    `SELECT r.project, r.id FROM search_reference x JOIN resources r ON r.rid = x.rid
      WHERE x.param = ? AND x.target_type = ? AND x.target_id = ? AND r.type = 'ProjectMembership' AND r.deleted = FALSE
      ORDER BY r.project, r.id`,
    ['user', member.type, member.id],
  );
}

/** The projects holding a live resource of this type and id (ids are UUIDs: one, normally). */
export async function projectsHolding(reader: StoreReader, type: string, id: string): Promise<string[]> {
  const rows = await reader.query<{ project: string }>(
    'SELECT project FROM resources WHERE type = ? AND id = ? AND deleted = FALSE ORDER BY project',
    [type, id],
  );
  return rows.map((r) => r.project);
}

/** Of the projects holding a resource of this type and id, the one that created it first (by its first version's time). */
export async function firstHolder(
  reader: StoreReader,
  type: string,
  id: string,
  projects: string[],
): Promise<string | undefined> {
  if (projects.length === 0) return undefined;
  const rows = await reader.query<{ project: string }>(
    `SELECT project FROM resource_versions WHERE type = ? AND id = ? AND version = 1 AND project IN (${projects.map(() => '?').join(', ')})
      ORDER BY last_updated, project LIMIT 1`,
    [type, id, ...projects],
  );
  return rows[0]?.project;
}
