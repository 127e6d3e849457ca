import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import type { FhirResponse } from './fhir-request';

/**
 * The operation interaction of the REST core: what HTTP, a Bundle entry and a bot's client all
 * come through (Medplum's fhirrouter, where `$graphql` is one route among the others). The answer
 * is shaped here, once: a resource the operation created is 201 with its Location, and `_graphql`
 * runs a query on the output (graphql.html, Operations).
 */

/**
 * An operation request as the REST core passes it to the runner it is given (src/operations
 * implements the runner; the REST core never imports it): the code, the level and its target,
 * the query or body, and the headers operations honour.
 */
export interface OperationCall {
  code: string;
  level: 'system' | 'type' | 'instance';
  type?: string;
  id?: string;
  method: 'GET' | 'POST';
  query: Record<string, string | string[]>;
  body?: unknown;
  /** The request headers operations honour (lower-case names). */
  headers: Record<string, string | undefined>;
  acceptLanguage?: string;
}

/** What runs operations: their invoker (input, authorization, handler, output), bound once they exist. */
export interface OperationDoor {
  invoker: {
    /** Runs the operation; its output, and whether the output is a resource it created. */
    run(call: OperationCall, ctx: RequestContext): Promise<{ output: Resource; created: boolean }>;
  };
  /** Runs a request's `_graphql` on an operation's output; absent: `_graphql` is ignored. */
  graphqlOver?: GraphQLOver;
}

/** Runs a GraphQL query on an operation's output, the output being the root: the answer's status and `{data, errors}`. */
export type GraphQLOver = (
  query: string,
  output: Resource,
  ctx: RequestContext,
) => Promise<{ status: number; body: unknown }>;

export async function operationResponse(
  door: OperationDoor,
  call: OperationCall,
  ctx: RequestContext,
): Promise<FhirResponse> {
  const { output, created } = await door.invoker.run(call, ctx);
  // `_graphql`: the answer is the query run on the output; a failed operation answers its OperationOutcome.
  const shaping = call.query._graphql;
  if (door.graphqlOver && shaping !== undefined) {
    const shaped = await door.graphqlOver(Array.isArray(shaping) ? (shaping[0] ?? '') : shaping, output, ctx);
    return { status: shaped.status, headers: {}, json: shaped.body };
  }
  if (created && output.id) {
    const location = `${ctx.baseUrl}/${output.resourceType}/${output.id}/_history/${output.meta?.versionId ?? 1}`;
    return { status: 201, headers: { location }, body: output };
  }
  return { status: 200, headers: {}, body: output };
}
