import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import type { OperationDefinition } from 'fhir/r4';
import { fhirError, type FhirError } from '../fhir/errors';
import { levelsOf, toOperationSpec, type OperationSpec } from '../fhir/operation-definition';
import type { AnswerToken, Level, OperationHandler, OperationModule, RawHandler } from './operation';

/**
 * Definitions and handlers, bound at boot. Every check happens here, once: a definition
 * without a handler, a handler without a definition, two operations answering the same
 * code at the same place. A broken registry stops the server before it listens.
 */

export class RegistryError extends Error {}

export interface BoundOperation<S> {
  spec: OperationSpec;
  handle: OperationHandler<S>;
  answerToken?: AnswerToken<S>;
  judgesResources?: boolean;
  operatorsOnly?: boolean;
  created?: boolean;
  raw?: RawHandler<S>;
}

export class OperationRegistry<S> {
  private readonly byPlace = new Map<string, BoundOperation<S>>();

  constructor(readonly operations: readonly BoundOperation<S>[]) {
    for (const op of operations) {
      for (const place of placesOf(op.spec)) {
        const other = this.byPlace.get(place);
        if (other) {
          throw new RegistryError(
            `${op.spec.url} and ${other.spec.url} both define $${op.spec.code} at ${place.split('|').slice(1).join(' ')}`,
          );
        }
        this.byPlace.set(place, op);
      }
    }
  }

  /** The operation answering `code` at this level (and resource type), if any. */
  find(code: string, level: Level, type?: string): BoundOperation<S> | undefined {
    return this.byPlace.get(placeKey(code, level, type));
  }

  /** Every operation with this code, wherever it is invoked; for telling "wrong level" from "unknown". */
  withCode(code: string): BoundOperation<S>[] {
    return this.operations.filter((op) => op.spec.code === code);
  }

  definitions(): OperationDefinition[] {
    return this.operations.map((op) => op.spec.definition);
  }

  /**
   * The answer for `$code` where no operation is bound: the operation exists but not at this
   * level (or not for this type), or it does not exist at all.
   */
  unknown(code: string, level: Level, type?: string): FhirError {
    const elsewhere = this.withCode(code);
    if (elsewhere.length > 0) {
      const here =
        elsewhere.find((op) => level === 'system' || op.spec.resources.includes(type as string)) ?? elsewhere[0];
      if (level !== 'system' && !here.spec.resources.includes(type as string)) {
        return fhirError('ERR_OP_UNKNOWN', {
          code,
          where: `for ${type} (it applies to ${here.spec.resources.join(', ') || 'the system'})`,
        });
      }
      return fhirError('ERR_OP_LEVEL', { code, level, levels: levelsOf(here.spec).join(', ') });
    }
    return fhirError('ERR_OP_UNKNOWN', { code, where: level === 'system' ? 'on this server' : `for ${type}` });
  }
}

function placeKey(code: string, level: Level, type?: string): string {
  return level === 'system' ? `${code}|system` : `${code}|${level}|${type}`;
}

function placesOf(spec: OperationSpec): string[] {
  const places: string[] = [];
  if (spec.system) places.push(placeKey(spec.code, 'system'));
  for (const type of spec.resources) {
    if (spec.typeLevel) places.push(placeKey(spec.code, 'type', type));
    if (spec.instance) places.push(placeKey(spec.code, 'instance', type));
  }
  return places;
}

export interface RegistryOptions {
  /** The resource types the server knows, which `Resource` and `DomainResource` stand for (R4's by default). */
  resourceTypes?: readonly string[];
}

export function buildRegistry<S>(
  definitions: OperationDefinition[],
  modules: OperationModule<S>[],
  options: RegistryOptions = {},
): OperationRegistry<S> {
  const handlers = new Map<string, OperationModule<S>>();
  for (const module of modules) {
    if (handlers.has(module.definition)) throw new RegistryError(`two handlers are bound to ${module.definition}`);
    handlers.set(module.definition, module);
  }
  const seen = new Set<string>();
  const bound: BoundOperation<S>[] = [];
  for (const definition of definitions) {
    const spec = toOperationSpec(definition, options.resourceTypes);
    if (seen.has(spec.url)) throw new RegistryError(`two definitions have the url ${spec.url}`);
    seen.add(spec.url);
    const module = handlers.get(spec.url);
    if (!module) throw new RegistryError(`definition ${spec.url} ($${spec.code}) has no handler`);
    if (module.answerToken && spec.affectsState)
      throw new RegistryError(`${spec.url} affects state, so its answers cannot be reused`);
    bound.push({
      spec,
      handle: module.handle,
      answerToken: module.answerToken,
      judgesResources: module.judgesResources,
      operatorsOnly: module.operatorsOnly,
      created: module.created,
      raw: module.raw,
    });
  }
  for (const url of handlers.keys()) {
    if (!seen.has(url)) throw new RegistryError(`handler for ${url} has no definition in definitions/`);
  }
  return new OperationRegistry(bound);
}

// ---------------------------------------------------------------------------------------------
// Reading definitions from a folder

const PARAMETER_SCHEMA = {
  type: 'object',
  required: ['name', 'use', 'min', 'max'],
  properties: {
    name: { type: 'string', pattern: '^_?[A-Za-z][A-Za-z0-9\\-_]*$' },
    use: { enum: ['in', 'out'] },
    min: { type: 'integer', minimum: 0 },
    max: { type: 'string', pattern: '^(\\*|[0-9]+)$' },
    type: { type: 'string', minLength: 1 },
    part: { type: 'array', items: { $ref: '#/$defs/parameter' } },
  },
} as const;

const DEFINITION_SCHEMA = {
  $defs: { parameter: PARAMETER_SCHEMA },
  type: 'object',
  required: ['resourceType', 'id', 'url', 'name', 'status', 'kind', 'code', 'system', 'type', 'instance'],
  properties: {
    resourceType: { const: 'OperationDefinition' },
    id: { type: 'string', pattern: '^[A-Za-z0-9\\-.]{1,64}$' },
    // A canonical: an http(s) URL, or a urn for operations this server defines itself.
    url: { type: 'string', pattern: '^(https?://|urn:)\\S+$' },
    name: { type: 'string' },
    status: { enum: ['draft', 'active', 'retired', 'unknown'] },
    kind: { enum: ['operation', 'query'] },
    code: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9\\-_]*$' },
    affectsState: { type: 'boolean' },
    system: { type: 'boolean' },
    resource: { type: 'array', items: { type: 'string', pattern: '^[A-Z][A-Za-z]+$' } },
    type: { type: 'boolean' },
    instance: { type: 'boolean' },
    parameter: { type: 'array', items: { $ref: '#/$defs/parameter' } },
  },
};

/** Loads and checks every `*.json` OperationDefinition in `dir`. */
export function loadDefinitions(dir: string): OperationDefinition[] {
  // Our own schema, known good: no meta-schema to load and check it against (start-up time).
  const validate = new Ajv({ allErrors: false, strict: true, meta: false, validateSchema: false }).compile(
    DEFINITION_SCHEMA,
  );
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  return files.map((file) => {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    } catch (err) {
      throw new RegistryError(`${file}: not valid JSON (${(err as Error).message})`);
    }
    if (!validate(json)) {
      const error = validate.errors?.[0];
      throw new RegistryError(
        `${file}: not a usable OperationDefinition (${error?.instancePath || '/'} ${error?.message})`,
      );
    }
    const definition = json as unknown as OperationDefinition;
    if (!definition.system && !definition.type && !definition.instance) {
      throw new RegistryError(`${file}: allows no level at all (system, type or instance)`);
    }
    if ((definition.type || definition.instance) && !definition.resource?.length) {
      throw new RegistryError(`${file}: allows type or instance level but names no resource type`);
    }
    return definition;
  });
}
