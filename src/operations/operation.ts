import type { Parameters, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import type { OperationInput, OperationOutput } from '../fhir/parameters';

/** What a handler may log through; pino's logger fits. */
export interface OperationLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export type Level = 'system' | 'type' | 'instance';

/**
 * Everything a handler knows of its invocation. Handlers never see the HTTP request: what they
 * need of it (language, request id) is here, already read.
 */
export interface OperationContext<S> {
  services: S;
  /** The request the operation serves: its project (everything it reads or writes is in it), base URL, Prefer. */
  request: RequestContext;
  log: OperationLog;
  level: Level;
  /** The resource type in the URL, at type and instance level. */
  resourceType?: string;
  /** The resource an instance-level call is about, read before the handler runs. */
  target?: Resource;
  requestId: string;
  /** Accept-Language, when the client sent one. */
  acceptLanguage?: string;
  /** Other request headers an operation honours (lower-case names), e.g. x-too-costly-threshold. */
  headers: Record<string, string | undefined>;
  /** Epoch milliseconds after which long work stops with too-costly. */
  deadline: number;
  /**
   * Runs another operation at this same level and place, as if its Parameters had been POSTed:
   * read and checked against that operation's definition, with `defaults` filling names the body
   * leaves out. Answers what that operation answers; throws what it would throw.
   */
  invoke(code: string, body: Parameters, defaults?: OperationInput): Promise<Resource>;
}

export type OperationHandler<S, I = OperationInput, O = OperationOutput> = (
  input: I,
  ctx: OperationContext<S>,
) => O | Promise<O>;

/**
 * For read-only operations whose answer depends only on the request and on state the services
 * can name: a token for that state now (e.g. a content generation), or undefined when answers
 * must not be reused. While the token is unchanged, an identical request gets the same answer
 * without running the handler.
 */
export type AnswerToken<S> = (services: S, request: RequestContext) => Promise<string | undefined>;

/**
 * What a raw operation is given: the request's body as sent (parsed when JSON, text otherwise) and
 * its query. For operations whose protocol is not Parameters in, Parameters out (GraphQL).
 */
export interface RawInput {
  method: 'GET' | 'POST';
  query: Record<string, string | string[]>;
  body: unknown;
  contentType?: string;
}

export interface RawOutput {
  status: number;
  contentType: string;
  body: unknown;
}

export type RawHandler<S> = (input: RawInput, ctx: OperationContext<S>) => Promise<RawOutput>;

/** An operation's code, bound to its OperationDefinition by canonical URL. */
export interface OperationModule<S> {
  definition: string;
  handle: OperationHandler<S>;
  /** Takes and answers bodies of its own kind (the definition still gives its routes and levels). */
  raw?: RawHandler<S>;
  answerToken?: AnswerToken<S>;
  /**
   * Resources given as parameters reach the handler as sent, without the structural check every
   * other operation's resource inputs get: the handler's job is to judge them ($validate).
   */
  judgesResources?: boolean;
  /** Only the server's operators may run it (it acts beyond one project: a new project, the system scope). */
  operatorsOnly?: boolean;
  /** Its answer is a resource it created: 201, with Location. */
  created?: boolean;
}

/** Declares a raw operation (see RawInput): the route is the definition's, the protocol the handler's. */
export function defineRawOperation<S>(module: {
  definition: string;
  raw: RawHandler<S>;
  operatorsOnly?: boolean;
}): OperationModule<S> {
  return {
    ...module,
    handle: () => {
      throw new Error(`${module.definition} is a raw operation: it runs through invokeRaw`);
    },
  };
}

/**
 * Declares an operation with typed input and output. The types follow the definition's
 * parameter names; the registry checks the names against the definition at boot.
 */
export function defineOperation<S, I extends object, O extends object>(module: {
  definition: string;
  handle: OperationHandler<S, I, O>;
  answerToken?: AnswerToken<S>;
  judgesResources?: boolean;
  operatorsOnly?: boolean;
  created?: boolean;
}): OperationModule<S> {
  return module as unknown as OperationModule<S>;
}

/** The resource an instance-level call is about, when it is of this type. */
export function targetOf<T extends Resource>(ctx: OperationContext<unknown>, type: T['resourceType']): T | undefined {
  return ctx.target?.resourceType === type ? (ctx.target as T) : undefined;
}

export type { OperationInput };
