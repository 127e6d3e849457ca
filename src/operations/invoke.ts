import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import type { OperationCall } from '../rest/operations';
import { fhirError } from '../fhir/errors';
import { readParameters, readQuery, type OperationInput } from '../fhir/parameters';
import { OutputError, writeOutput } from '../fhir/parameters-output';
import { ID_PATTERN } from '../storage/repository';
import type { Level, OperationContext, RawHandler, RawOutput } from './operation';
import type { BoundOperation, OperationRegistry } from './registry';

/**
 * Running an operation without HTTP: what every operation request becomes (the HTTP routes add
 * only their answer cache), and what a batch or transaction entry (`POST Patient/$validate`) or a
 * bot's client runs. Input is read and checked against the definition, the handler runs with the
 * request's context, and its output is checked against the definition.
 */

/** The call shape is the REST core's (it runs operations through this invoker, injected). */
export type { OperationCall };

export interface InvokerDeps<S> {
  registry: OperationRegistry<S>;
  services: S;
  /** Checks resources given as parameters before any handler sees them (except handlers that judge them). */
  checkResource: (resource: Resource, at: string) => void;
  /** Reads the resource an instance-level call names, in the request's project; throws a FhirError when there is none. */
  readInstance: (type: string, id: string, ctx: RequestContext) => Promise<Resource>;
  /** Says whether the request may run this operation (scopes, roles); throws a FhirError when not. */
  authorize?: (op: BoundOperation<S>, call: OperationCall, ctx: RequestContext) => void;
}

export class OperationInvoker<S> {
  constructor(private readonly deps: InvokerDeps<S>) {}

  /** The operation bound at this place, or the error that says why there is none. */
  find(code: string, level: Level, type?: string): BoundOperation<S> {
    const op = this.deps.registry.find(code, level, type);
    if (!op) throw this.deps.registry.unknown(code, level, type);
    return op;
  }

  /** Throws when the request may not run this operation (before a reused answer is sent, too). */
  authorize(op: BoundOperation<S>, call: OperationCall, ctx: RequestContext): void {
    this.deps.authorize?.(op, call, ctx);
  }

  /** The token under which an answer of this call may be reused, or undefined when it may not. */
  async answerToken(op: BoundOperation<S>, ctx: RequestContext): Promise<string | undefined> {
    return op.answerToken ? op.answerToken(this.deps.services, ctx) : undefined;
  }

  /** Runs the operation the call names: its output, and whether that is a resource it created (201 and Location). */
  async run(call: OperationCall, ctx: RequestContext): Promise<{ output: Resource; created: boolean }> {
    const op = this.find(call.code, call.level, call.type);
    return { output: await this.invoke(call, ctx, op), created: op.created === true };
  }

  async invoke(call: OperationCall, ctx: RequestContext, bound?: BoundOperation<S>): Promise<Resource> {
    const op = bound ?? this.find(call.code, call.level, call.type);
    const { spec } = op;
    if (op.raw) throw fhirError('ERR_OP_RAW', { code: spec.code });
    this.deps.authorize?.(op, call, ctx);
    const strict = ctx.prefer.handling === 'strict';
    let input: OperationInput;
    if (call.method === 'GET') {
      if (spec.affectsState)
        throw fhirError('ERR_OP_GET_AFFECTS_STATE', { code: spec.code }, { headers: { allow: 'POST' } });
      input = readQuery(call.query, spec, { strict });
    } else {
      if (call.body === undefined) throw fhirError('ERR_BODY_MISSING', {});
      input = readParameters(call.body, spec, { strict, checkResource: this.checkerFor(op), query: call.query });
    }
    const context = await this.context(call, ctx);
    return run(op, input, context, ctx);
  }

  /** Runs a raw operation: its handler reads the request body and writes the answer itself. */
  async invokeRaw(
    call: OperationCall & { contentType?: string },
    ctx: RequestContext,
    op: BoundOperation<S>,
  ): Promise<RawOutput> {
    this.deps.authorize?.(op, call, ctx);
    if (call.method === 'GET' && op.spec.affectsState)
      throw fhirError('ERR_OP_GET_AFFECTS_STATE', { code: op.spec.code }, { headers: { allow: 'POST' } });
    const context = await this.context(call, ctx);
    return (op.raw as RawHandler<S>)(
      { method: call.method, query: call.query, body: call.body, contentType: call.contentType },
      context,
    );
  }

  private checkerFor(op: BoundOperation<S>) {
    return op.judgesResources ? undefined : this.deps.checkResource;
  }

  /** What a handler knows of its call (the instance it is about is read first). */
  private async context(call: OperationCall, ctx: RequestContext): Promise<OperationContext<S>> {
    const strict = ctx.prefer.handling === 'strict';
    let target: Resource | undefined;
    if (call.level === 'instance') {
      const id = call.id ?? '';
      if (!ID_PATTERN.test(id)) throw fhirError('ERR_RESOURCE_ID_INVALID', { id: id.slice(0, 100) });
      target = await this.deps.readInstance(call.type as string, id, ctx);
    }
    const context: OperationContext<S> = {
      invoke: async (code, body, defaults = {}) => {
        const other = this.find(code, call.level, call.type);
        this.deps.authorize?.(other, { ...call, code }, ctx);
        const otherInput = readParameters(body, other.spec, { strict, checkResource: this.checkerFor(other) });
        for (const [name, value] of Object.entries(defaults)) {
          if (!(name in otherInput) && other.spec.inputs.some((p) => p.name === name)) otherInput[name] = value;
        }
        return run(other, otherInput, context, ctx);
      },
      services: this.deps.services,
      request: ctx,
      log: ctx.log,
      level: call.level,
      resourceType: call.type,
      target,
      requestId: ctx.requestId,
      acceptLanguage: call.acceptLanguage,
      headers: call.headers,
      deadline: ctx.deadline,
    };
    return context;
  }
}

async function run<S>(
  op: BoundOperation<S>,
  input: OperationInput,
  context: OperationContext<S>,
  ctx: RequestContext,
): Promise<Resource> {
  const output = await op.handle(input, context);
  try {
    return writeOutput(output, op.spec);
  } catch (err) {
    if (!(err instanceof OutputError)) throw err;
    ctx.log.error({ operation: op.spec.url, reason: err.message }, 'operation output breaks its definition');
    throw fhirError('ERR_OP_OUTPUT', { code: op.spec.code });
  }
}
