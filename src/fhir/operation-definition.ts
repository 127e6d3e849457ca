import type { OperationDefinition, OperationDefinitionParameter } from 'fhir/r4';
import { R4_RESOURCE_TYPES } from './r4-resource-types';

/** One parameter of an operation, as the parameter layer uses it. */
export interface ParamSpec {
  name: string;
  min: number;
  /** Infinity for '*'. */
  max: number;
  /** As written in the definition ('1', '*'), for messages. */
  maxText: string;
  /** Declared type; undefined for a parameter made of parts. */
  type?: string;
  /** The parts of a parameter made of parts. */
  part: ParamSpec[];
  /** Path of the parameter for messages, e.g. `property.value`. */
  path: string;
}

/** An OperationDefinition reduced to what routing and parameter handling need. */
export interface OperationSpec {
  url: string;
  id: string;
  code: string;
  system: boolean;
  /** Whether the type level is allowed (R4 `OperationDefinition.type`). */
  typeLevel: boolean;
  instance: boolean;
  /**
   * The resource types the type and instance levels apply to (R4 `OperationDefinition.resource`),
   * with the abstract `Resource` and `DomainResource` standing for every type they cover.
   */
  resources: string[];
  affectsState: boolean;
  inputs: ParamSpec[];
  outputs: ParamSpec[];
  /** True when the only output is `return`: the answer is that resource itself. */
  returnsResource: boolean;
  definition: OperationDefinition;
}

/** The R4 resource types that are not DomainResources. */
const NOT_DOMAIN_RESOURCES = new Set(['Binary', 'Bundle', 'Parameters']);

/**
 * The concrete types a definition's `resource` list names: `Resource` is every type the server
 * knows, `DomainResource` every one of those but Binary, Bundle and Parameters.
 */
export function concreteResourceTypes(
  named: readonly string[],
  known: readonly string[] = R4_RESOURCE_TYPES,
): string[] {
  const out = new Set<string>();
  for (const type of named) {
    if (type === 'Resource') {
      for (const k of known) out.add(k);
    } else if (type === 'DomainResource') {
      for (const k of known) if (!NOT_DOMAIN_RESOURCES.has(k)) out.add(k);
    } else {
      out.add(type);
    }
  }
  return [...out];
}

export function toOperationSpec(
  definition: OperationDefinition,
  knownTypes: readonly string[] = R4_RESOURCE_TYPES,
): OperationSpec {
  const params = definition.parameter ?? [];
  const inputs = params.filter((p) => p.use === 'in').map((p) => toParamSpec(p, ''));
  const outputs = params.filter((p) => p.use === 'out').map((p) => toParamSpec(p, ''));
  return {
    url: definition.url ?? '',
    id: definition.id ?? definition.code,
    code: definition.code,
    system: definition.system,
    typeLevel: definition.type,
    instance: definition.instance,
    resources: concreteResourceTypes(definition.resource ?? [], knownTypes),
    affectsState: definition.affectsState === true,
    inputs,
    outputs,
    returnsResource: outputs.length === 1 && outputs[0].name === 'return',
    definition,
  };
}

function toParamSpec(p: OperationDefinitionParameter, prefix: string): ParamSpec {
  const path = prefix ? `${prefix}.${p.name}` : p.name;
  return {
    name: p.name,
    min: p.min,
    max: p.max === '*' ? Infinity : Number(p.max),
    maxText: p.max,
    type: p.type,
    part: (p.part ?? []).map((child) => toParamSpec(child, path)),
    path,
  };
}

/** The levels an operation may be invoked at, for messages. */
export function levelsOf(spec: OperationSpec): string[] {
  const levels: string[] = [];
  if (spec.system) levels.push('system');
  if (spec.typeLevel) levels.push('type');
  if (spec.instance) levels.push('instance');
  return levels;
}
