import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { levelsOf } from '../../fhir/operation-definition';
import { FHIR_JSON } from '../../fhir/outcome';
import { OutputError, readParameters, readQuery, writeOutput, type OperationInput } from '../../fhir/parameters';
import type { Level, OperationContext } from '../../operations/operation';
import type { BoundOperation, OperationRegistry } from '../../operations/registry';
import { ID_PATTERN } from '../../storage/repository';
import type { AnswerCache } from '../answer-cache';
import { rawBodyOf } from '../fhir-json';

export interface OperationRouteDeps<S> {
  base: string;
  /** Where answers of operations with an answer token are kept. */
  answers: AnswerCache;
  /** Checks resources given as parameters before any handler sees them. */
  checkResource: (resource: Resource, at: string) => void;
  registry: OperationRegistry<S>;
  services: S;
  operationTimeoutMs: number;
  /** Reads the resource an instance-level call names; throws a FhirError when there is none. */
  readInstance: (type: string, id: string) => Promise<Resource>;
}

/** Headers an operation may honour, passed through to its context. */
const PASSED_HEADERS = ['x-too-costly-threshold', 'prefer'];

/**
 * Routes come from the registry, never by hand: every level a definition allows, POST always,
 * GET unless the definition affects state (checked per request, to answer 405 rather than 404).
 */
export function registerOperationRoutes<S>(app: FastifyInstance, deps: OperationRouteDeps<S>): void {
  for (const op of deps.registry.operations) {
    const { spec } = op;
    if (spec.system) route(app, deps, op, `${deps.base}/$${spec.code}`, 'system');
    for (const type of spec.resources) {
      if (spec.typeLevel) route(app, deps, op, `${deps.base}/${type}/$${spec.code}`, 'type', type);
      if (spec.instance) route(app, deps, op, `${deps.base}/${type}/:id/$${spec.code}`, 'instance', type);
    }
  }
}

function route<S>(app: FastifyInstance, deps: OperationRouteDeps<S>, op: BoundOperation<S>, url: string, level: Level, type?: string) {
  app.route({
    method: ['GET', 'POST'],
    url,
    handler: async (request, reply) => {
      const token = op.answerToken ? await op.answerToken(deps.services) : undefined;
      const key = token === undefined ? undefined : answerKey(request);
      if (key !== undefined) {
        const known = deps.answers.get(key, token as string);
        if (known !== undefined) return reply.type(FHIR_JSON).send(known);
      }
      const body = await invoke(deps, op, request, level, type);
      if (key === undefined) return reply.type(FHIR_JSON).send(body);
      const text = JSON.stringify(body);
      deps.answers.set(key, token as string, text);
      return reply.type(FHIR_JSON).send(text);
    },
  });
}

async function invoke<S>(
  deps: OperationRouteDeps<S>,
  op: BoundOperation<S>,
  request: FastifyRequest,
  level: Level,
  type: string | undefined,
): Promise<Resource> {
  const { spec } = op;
  const strict = /handling\s*=\s*strict/i.test(String(request.headers.prefer ?? ''));
  let input;
  if (request.method === 'GET' || request.method === 'HEAD') {
    if (spec.affectsState) throw fhirError('ERR_OP_GET_AFFECTS_STATE', { code: spec.code }, { headers: { allow: 'POST' } });
    input = readQuery(request.query as Record<string, string | string[]>, spec, { strict });
  } else {
    if (request.body === undefined) throw fhirError('ERR_BODY_MISSING', {});
    input = readParameters(request.body, spec, {
      strict,
      checkResource: op.judgesResources ? undefined : deps.checkResource,
      query: request.query as Record<string, string | string[]>,
    });
  }
  let target: Resource | undefined;
  if (level === 'instance') {
    const id = (request.params as { id: string }).id;
    if (!ID_PATTERN.test(id)) throw fhirError('ERR_RESOURCE_ID_INVALID', { id });
    target = await deps.readInstance(type as string, id);
  }
  const ctx: OperationContext<S> = {
    invoke: async (code, body, defaults = {}) => {
      const other = deps.registry.find(code, level, type);
      if (!other) throw fhirError('ERR_OP_UNKNOWN', { code, where: type ? `for ${type}` : 'on this server' });
      const otherInput = readParameters(body, other.spec, { strict, checkResource: other.judgesResources ? undefined : deps.checkResource });
      for (const [name, value] of Object.entries(defaults)) {
        if (!(name in otherInput) && other.spec.inputs.some((p) => p.name === name)) otherInput[name] = value;
      }
      return run(other, otherInput, ctx, request);
    },
    services: deps.services,
    log: request.log,
    level,
    resourceType: type,
    target,
    requestId: request.id,
    acceptLanguage: headerValue(request, 'accept-language'),
    headers: Object.fromEntries(PASSED_HEADERS.map((name) => [name, headerValue(request, name)])),
    deadline: Date.now() + deps.operationTimeoutMs,
  };
  return run(op, input, ctx, request);
}

async function run<S>(op: BoundOperation<S>, input: OperationInput, ctx: OperationContext<S>, request: FastifyRequest): Promise<Resource> {
  const output = await op.handle(input, ctx);
  try {
    return writeOutput(output, op.spec);
  } catch (err) {
    if (!(err instanceof OutputError)) throw err;
    request.log.error({ operation: op.spec.url, reason: err.message }, 'operation output breaks its definition');
    throw fhirError('ERR_OP_OUTPUT', { code: op.spec.code });
  }
}

/**
 * Everything of a request that can change an operation's answer: method, URL (path with the
 * instance id, and query), the headers handlers see, and the body as it was sent. Undefined
 * when the body is not known as text (nothing is reused then).
 */
function answerKey(request: FastifyRequest): string | undefined {
  const headers = [headerValue(request, 'accept-language'), ...PASSED_HEADERS.map((name) => headerValue(request, name))].join('\u0001');
  const head = `${request.method} ${request.url}\u0001${headers}`;
  if (request.method === 'GET' || request.method === 'HEAD') return head;
  const raw = rawBodyOf(request);
  return raw === undefined ? undefined : `${head}\u0001${raw}`;
}

function headerValue(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}
