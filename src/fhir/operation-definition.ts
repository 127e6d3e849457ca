import type { OperationDefinition, OperationDefinitionParameter } from 'fhir/r4';

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
  /** The resource types the type and instance levels apply to (R4 `OperationDefinition.resource`). */
  resources: string[];
  affectsState: boolean;
  inputs: ParamSpec[];
  outputs: ParamSpec[];
  /** True when the only output is `return`: the answer is that resource itself. */
  returnsResource: boolean;
  definition: OperationDefinition;
}

export function toOperationSpec(definition: OperationDefinition): OperationSpec {
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
    resources: [...(definition.resource ?? [])],
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
