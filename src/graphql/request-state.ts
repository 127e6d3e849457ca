import type DataLoader from 'dataloader';
import { GraphQLError } from 'graphql';
import type { Resource } from 'fhir/r4';
import type { Budget } from '../context/budget';
import type { RequestContext } from '../context/request-context';
import { fhirError, isFhirError } from '../fhir/errors';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import type { FhirRequest } from '../rest/fhir-request';
import type { SearchHandler } from '../search/search-service';

/**
 * What the resolvers share: the services they read and write through, the limits of one query,
 * the state of one request (its budget, its searches, the holders of contained resources), and
 * the ways a field stops: too costly, out of time, a FHIR error as a GraphQL error.
 */

export interface GraphQLDataDeps {
  search: SearchHandler;
  /** A RESTful interaction (mutations). */
  handle(request: FhirRequest, ctx: RequestContext): Promise<{ status: number; body?: Resource }>;
  read(type: string, id: string, ctx: RequestContext): Promise<Resource>;
  /** The search parameter codes of a type (to map GraphQL argument names back). */
  searchParams(type: string): string[];
  /** Where `fhirpath:` arguments are evaluated, bounded (they are the client's expressions). */
  fhirpath: Pick<FhirPathPool, 'evaluate'>;
}

export interface GraphQLLimits {
  /** Searches (lists, connections, reverse references, reference batches) one query may run. */
  searches: number;
  /** Largest `_count` of one list. */
  maxCount: number;
}

/** Per request: its context, the batch loader of references, and what it has spent. */
export interface GraphQLRequestState {
  ctx: RequestContext;
  /** Local references (`#id`) of resources with contained ones, to the resource holding them. */
  containers: WeakMap<object, Resource>;
  references: DataLoader<string, Resource | null>;
  searches: number;
  /** The request's time, shared with the work before and after execution. */
  budget: Budget;
  /** Set when the time ran out during execution: every field after it is null, and the answer too-costly. */
  overrun: boolean;
}

/**
 * Notes where the local references (`#id`) of a resource with contained resources point from, so
 * that `resource` can follow them (a field's resolver sees only its own object). Resources without
 * contained ones cost nothing.
 */
export function remember(state: GraphQLRequestState, resource: Resource): Resource {
  const contained = (resource as { contained?: Resource[] }).contained;
  if (!contained?.length) return resource;
  const stack: unknown[] = [resource];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!node || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    const reference = (node as { reference?: unknown }).reference;
    if (typeof reference === 'string' && reference.startsWith('#')) state.containers.set(node, resource);
    for (const value of Object.values(node)) if (value && typeof value === 'object') stack.push(value);
  }
  return resource;
}

/** Where a `fhirpath` argument is evaluated: the bounded pool, until the request's deadline. */
export interface FhirPathFilter {
  pool: Pick<FhirPathPool, 'evaluate'>;
  deadline: number;
}

/**
 * The items for which a `fhirpath` argument, when given, is true (a non-empty result without
 * `false`). The expression is the client's: it is evaluated in the pool's workers, all items in
 * one batch, and one that runs out of time ends the query with too-costly.
 */
export async function byFhirPath<T>(items: T[], expression: unknown, filter: FhirPathFilter): Promise<T[]> {
  if (typeof expression !== 'string' || items.length === 0) return items;
  const answers = await filter.pool.evaluate(
    items.map((focus) => ({ expression, focus })),
    { deadline: filter.deadline },
  );
  return items.filter((_, i) => {
    const answer = answers[i];
    if (answer.ok) return answer.summary.length > 0 && !answer.summary.hasFalse;
    if (answer.error === 'invalid') throw new GraphQLError(`The fhirpath '${expression.slice(0, 100)}' is not valid`);
    throw asGraphQLError(
      fhirError('ERR_OP_TOO_COSTLY', {
        what: `The fhirpath '${expression.slice(0, 100)}' was stopped: ${answer.message}`,
      }),
    );
  });
}

/**
 * A field's value, the event loop given back first when this slice of the budget is spent:
 * element fields resolve without I/O, so graphql-js would run a large answer in one stretch.
 */
export function paced<T>(state: GraphQLRequestState, value: T): T | null | Promise<T | null> {
  if (state.overrun) return null;
  if (!state.budget.due()) return value;
  return state.budget.pause().then(
    () => value,
    () => {
      state.overrun = true;
      return null;
    },
  );
}

/** One more search for this query: refused past the limit, or when the time budget is spent. */
export function spendSearch(state: GraphQLRequestState, limits: GraphQLLimits): void {
  checkBudget(state);
  if (++state.searches > limits.searches) throw tooCostly(`more than ${limits.searches} searches in one query`);
}

export function checkBudget(state: GraphQLRequestState): void {
  if (Date.now() > state.ctx.deadline) throw tooCostly('the time budget of the request is spent');
}

function tooCostly(reason: string): GraphQLError {
  return new GraphQLError(`The query is too costly: ${reason}`, {
    extensions: {
      outcome: {
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'error', code: 'too-costly', details: { text: reason } }],
      },
    },
  });
}

export function rethrow(err: unknown): never {
  throw asGraphQLError(err);
}

/** A FhirError as a GraphQL error carrying its OperationOutcome. */
export function asGraphQLError(err: unknown): GraphQLError {
  if (err instanceof GraphQLError) return err;
  if (isFhirError(err))
    return new GraphQLError(err.outcome.issue[0]?.details?.text ?? err.message, {
      extensions: { outcome: err.outcome, status: err.status },
    });
  throw err;
}
