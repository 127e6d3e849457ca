import type { Parameters, ParametersParameter, Resource } from 'fhir/r4';
import { acceptsType, isPrimitiveType, isValidPrimitive, valueKeyOfType } from './datatypes';
import type { OperationSpec, ParamSpec } from './operation-definition';
import { isObject, isResourceType, TypedValue, type OperationOutput } from './parameters';

/** Writing an operation's output as its definition says: Parameters entries, or the `return` resource. */

/** Why an output breaks its definition; the caller logs it and answers 500. */
export class OutputError extends Error {}

export function writeOutput(output: OperationOutput, spec: OperationSpec): Resource {
  if (spec.returnsResource) {
    const value = output.return;
    if (!isObject(value) || typeof value.resourceType !== 'string') throw new OutputError("'return' is not a resource");
    return value as unknown as Resource;
  }
  const parameters: Parameters = { resourceType: 'Parameters', parameter: writeEntries(output, spec.outputs) };
  if (parameters.parameter?.length === 0) delete parameters.parameter;
  return parameters;
}

function writeEntries(output: OperationOutput, specs: ParamSpec[]): ParametersParameter[] {
  for (const name of Object.keys(output)) {
    if (output[name] !== undefined && !specs.some((p) => p.name === name)) {
      throw new OutputError(`'${name}' is not an output of the definition`);
    }
  }
  const entries: ParametersParameter[] = [];
  for (const param of specs) {
    const raw = output[param.name];
    const values = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    if (Array.isArray(raw) && param.max <= 1) throw new OutputError(`'${param.path}' is single-valued but got a list`);
    if (values.length < param.min) throw new OutputError(`'${param.path}' is required`);
    if (values.length > param.max) throw new OutputError(`'${param.path}' may occur at most ${param.maxText} time(s)`);
    for (const value of values) entries.push(writeEntry(param, value));
  }
  return entries;
}

function writeEntry(param: ParamSpec, value: unknown): ParametersParameter {
  if (param.part.length > 0) {
    if (!isObject(value)) throw new OutputError(`'${param.path}' must be an object of parts`);
    return { name: param.name, part: writeEntries(value, param.part) };
  }
  const { declared, resource, primitive, valueKey } = planOf(param);
  if (resource) {
    if (!isObject(value) || typeof value.resourceType !== 'string')
      throw new OutputError(`'${param.path}' must be a resource`);
    if (declared !== 'Resource' && declared !== 'DomainResource' && value.resourceType !== declared) {
      throw new OutputError(`'${param.path}' must be a ${declared}, not ${value.resourceType}`);
    }
    return { name: param.name, resource: value as unknown as Resource };
  }
  if (value instanceof TypedValue) {
    if (declared !== 'Element' && !acceptsType(declared, value.type)) {
      throw new OutputError(`'${param.path}' must be of type ${declared}, not ${value.type}`);
    }
    const type = value.type;
    if (isPrimitiveType(type) ? !isValidPrimitive(type, value.value) : !isObject(value.value))
      throw new OutputError(`'${param.path}' is not a valid ${type}`);
    return { name: param.name, [valueKeyOfType(type)]: value.value } as ParametersParameter;
  }
  if (declared === 'Element')
    throw new OutputError(`'${param.path}' has an open type; the handler must say which type it is`);
  if (primitive ? !isValidPrimitive(declared, value) : !isObject(value))
    throw new OutputError(`'${param.path}' is not a valid ${declared}`);
  return { name: param.name, [valueKey]: value } as ParametersParameter;
}

/** What writing a parameter of a definition needs to know of it, worked out once (outputs are written on every answer). */
interface EntryPlan {
  declared: string;
  resource: boolean;
  primitive: boolean;
  valueKey: string;
}

const plans = new WeakMap<ParamSpec, EntryPlan>();

function planOf(param: ParamSpec): EntryPlan {
  let plan = plans.get(param);
  if (!plan) {
    const declared = param.type ?? 'Element';
    plan = {
      declared,
      resource: isResourceType(declared),
      primitive: isPrimitiveType(declared),
      valueKey: valueKeyOfType(declared),
    };
    plans.set(param, plan);
  }
  return plan;
}

// ---------------------------------------------------------------------------------------------
