import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import { OutputError, readParameters, readQuery, writeOutput, type OperationInput } from '../fhir/parameters';
import { ID_PATTERN } from '../storage/repository';
import type { Level, OperationContext } from './operation';
import type { BoundOperation, OperationRegistry } from './registry';

/**
 * Running an operation without HTTP: what a batch or transaction entry (`POST Patient/$validate`)
 * becomes, and what the operation routes do after their own caching. Input is read and checked
 * against the definition exactly as for a request, the handler runs with the same context, and
 * its output is checked against the definition.
 */

export interface OperationCall {
  code: string;
  level: Level;
  type?: string;
  id?: string;
  method: 'GET' | 'POST';
  query: Record<string, string | string[]>;
  body?: unknown;
  /** The request headers operations honour (lower-case names). */
  headers: Record<string, string | undefined>;
  acceptLanguage?: string;
}

export interface InvokerDeps<S> {
  registry: OperationRegistry<S>;
  services: S;
  checkResource: (resource: Resource, at: string) => void;
  readInstance: (type: string, id: string) => Promise<Resource>;
}

export class OperationInvoker<S> {
  constructor(private readonly deps: InvokerDeps<S>) {}

  /** The operation bound at this place, or the error that says why there is none. */
  find(code: string, level: Level, type?: string): BoundOperation<S> {
    const op = this.deps.registry.find(code, level, type);
    if (!op) throw this.deps.registry.unknown(code, level, type);
    return op;
  }

  async invoke(call: OperationCall, ctx: RequestContext): Promise<Resource> {
    const op = this.find(call.code, call.level, call.type);
    const { spec } = op;
    const strict = ctx.prefer.handling === 'strict';
    let input: OperationInput;
    if (call.method === 'GET') {
      if (spec.affectsState) throw fhirError('ERR_OP_GET_AFFECTS_STATE', { code: spec.code }, { headers: { allow: 'POST' } });
      input = readQuery(call.query, spec, { strict });
    } else {
      if (call.body === undefined) throw fhirError('ERR_BODY_MISSING', {});
      input = readParameters(call.body, spec, { strict, checkResource: this.deps.checkResource });
    }
    let target: Resource | undefined;
    if (call.level === 'instance') {
      const id = call.id ?? '';
      if (!ID_PATTERN.test(id)) throw fhirError('ERR_RESOURCE_ID_INVALID', { id: id.slice(0, 100) });
      target = await this.deps.readInstance(call.type as string, id);
    }
    const context: OperationContext<S> = {
      invoke: async (code, body, defaults = {}) => {
        const other = this.find(code, call.level, call.type);
        const otherInput = readParameters(body, other.spec, { strict, checkResource: this.deps.checkResource });
        for (const [name, value] of Object.entries(defaults)) {
          if (!(name in otherInput) && other.spec.inputs.some((p) => p.name === name)) otherInput[name] = value;
        }
        return run(other, otherInput, context, ctx);
      },
      services: this.deps.services,
      log: ctx.log,
      level: call.level,
      resourceType: call.type,
      target,
      requestId: ctx.requestId,
      acceptLanguage: call.acceptLanguage,
      headers: call.headers,
      deadline: ctx.deadline,
    };
    return run(op, input, context, ctx);
  }
}

async function run<S>(op: BoundOperation<S>, input: OperationInput, context: OperationContext<S>, ctx: RequestContext): Promise<Resource> {
  const output = await op.handle(input, context);
  try {
    return writeOutput(output, op.spec);
  } catch (err) {
    if (!(err instanceof OutputError)) throw err;
    ctx.log.error({ operation: op.spec.url, reason: err.message }, 'operation output breaks its definition');
    throw fhirError('ERR_OP_OUTPUT', { code: op.spec.code });
  }
}
