import { fhirError } from '../fhir/errors';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import { BundledDefinitions } from './bundled-definitions';
import { ProfileError } from './compile';
import { Invariants } from './invariants';
import type { ValidationIssue } from './issues';
import { checkUserInvariants } from './user-invariants';
import { ProfileLibrary, type ProfileSession, type StoredDefinitions } from './library';
import type { CompiledProfile } from './model';
import type { TerminologyPort } from './terminology-port';
import type { PendingBinding } from './walk/constraints';
import { isObject } from './resource-rules';
import { Walk } from './walker';

/**
 * The validation engine: a resource against the R4 definitions, the profiles it claims and the
 * profiles asked for, with invariants and bindings. Definitions are compiled on first use and
 * kept; nothing is read or compiled at start-up.
 */

export interface ValidatorDeps {
  /** Compiled definitions to share (another validator's); built here when not given. */
  library?: ProfileLibrary;
  bundled?: BundledDefinitions;
  stored?: StoredDefinitions;
  terminology?: TerminologyPort;
  /** Where the invariants of stored profiles are evaluated, bounded (without it they are reported unevaluated). */
  userExpressions?: Pick<FhirPathPool, 'evaluate'>;
}

export interface ValidateOptions {
  /** Canonical urls of profiles to validate against, besides the base definition. */
  profiles?: string[];
  /** Ignore the profiles the resource claims in `meta.profile` (mode `profile`). */
  ignoreClaimedProfiles?: boolean;
  /** Epoch ms after which validation stops with too-costly. */
  deadline: number;
  /** The project whose stored profiles and terminology apply (with the system scope's). */
  project: string;
}

/** Rounds of loading stored definitions found while walking (a profile using an extension using...). */
const MAX_ROUNDS = 4;

export class ResourceValidator {
  readonly library: ProfileLibrary;
  readonly invariants = new Invariants();
  private readonly terminology?: TerminologyPort;
  private readonly userExpressions?: Pick<FhirPathPool, 'evaluate'>;

  constructor(deps: ValidatorDeps = {}) {
    this.library = deps.library ?? new ProfileLibrary(deps.bundled ?? new BundledDefinitions(), deps.stored);
    this.terminology = deps.terminology;
    this.userExpressions = deps.userExpressions;
  }

  /**
   * Every issue found. Throws (a 4xx FhirError) only when validation cannot be done: a profile
   * asked for that is unknown or cannot be used, or a time budget spent.
   */
  async validate(resource: unknown, options: ValidateOptions): Promise<ValidationIssue[]> {
    const session = await this.library.session(options.project);
    const profiles = await this.requestedProfiles(session, options.profiles ?? []);
    const walk = new Walk(
      session,
      {
        invariants: true,
        terminology: this.terminology !== undefined,
        references: true,
        extensions: true,
        profiles: !options.ignoreClaimedProfiles,
        deadline: options.deadline,
      },
      this.invariants,
    );
    walk.resource(resource, rootPath(resource), { profiles });
    await this.settle(walk, session);
    const results = await checkUserInvariants(walk.userInvariants, {
      pool: this.userExpressions,
      deadline: options.deadline,
    });
    results.forEach((result, i) =>
      walk.invariantResult(walk.userInvariants[i].constraint, walk.userInvariants[i].path, result),
    );
    if (this.terminology && walk.bindings.length > 0)
      await this.checkBindings(walk.bindings, walk.issues, options.deadline, options.project);
    return walk.issues;
  }

  /**
   * The structural check of every write: JSON shape, primitive values, cardinalities, choice
   * types, unknown elements, down through contained resources and Bundle entries, against the
   * base R4 definitions. No invariants, terminology, stored profiles or extension definitions.
   */
  checkStructure(resource: unknown): ValidationIssue[] {
    const walk = new Walk(this.library.sessionWithoutStore(), {
      invariants: false,
      terminology: false,
      references: false,
      extensions: false,
      profiles: false,
      deadline: Number.MAX_SAFE_INTEGER,
    });
    walk.resource(resource, rootPath(resource));
    return walk.issues;
  }

  private async requestedProfiles(session: ProfileSession, urls: string[]): Promise<CompiledProfile[]> {
    await session.load(urls.filter((u) => !this.library.isBundled(u)));
    return urls.map((url) => {
      const resolved = session.profile(url);
      if (resolved instanceof ProfileError)
        throw fhirError('ERR_VALIDATION_PROFILE_INVALID', { url, reason: resolved.message });
      if (resolved === undefined || resolved === 'unloaded') throw fhirError('ERR_VALIDATION_PROFILE_UNKNOWN', { url });
      return resolved;
    });
  }

  /** Loads the stored definitions the walk ran into, and finishes the work that waited for them. */
  private async settle(walk: Walk, session: ProfileSession): Promise<void> {
    for (let round = 0; round < MAX_ROUNDS && walk.deferred.length > 0; round++) {
      const items = walk.deferred;
      walk.deferred = [];
      await session.load(new Set(items.map((i) => i.url)));
      for (const item of items) {
        const found = session.profile(item.url);
        const resolved = found === 'unloaded' ? undefined : found;
        if (item.kind === 'extension') walk.extension(resolved, item);
        else {
          const claim = {
            url: item.url,
            json: item.value,
            where: `${item.cursor.path}.meta.profile`,
            type: String(item.value.resourceType),
          };
          walk.claimed(resolved, claim, item.cursor);
        }
      }
    }
  }

  private async checkBindings(
    bindings: PendingBinding[],
    issues: ValidationIssue[],
    deadline: number,
    project: string,
  ): Promise<void> {
    const verdicts = await (this.terminology as TerminologyPort).check(bindings, { deadline, project });
    verdicts.forEach((verdict, i) => {
      const b = bindings[i];
      if (verdict.status === 'valid') return;
      if (verdict.status === 'unchecked') {
        issues.push({ severity: 'warning', code: 'not-supported', message: verdict.message, expression: b.expression });
        return;
      }
      issues.push({
        severity: b.strength === 'required' ? 'error' : 'warning',
        code: 'code-invalid',
        message: `${verdict.message} (${b.strength} binding to ${b.valueSet})`,
        expression: b.expression,
      });
    });
  }
}

/** `Patient` for a Patient: issue expressions start at the resource type, as FHIRPath does. */
function rootPath(resource: unknown): string {
  const type = isObject(resource) ? resource.resourceType : undefined;
  return typeof type === 'string' && /^[A-Z][A-Za-z]{0,63}$/.test(type) ? type : 'Resource';
}
