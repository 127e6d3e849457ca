import {
  execute,
  GraphQLError,
  Kind,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ASTVisitor,
} from 'graphql';
import type { OperationOutcome, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import type { ElementModel } from '../search/model/model';
import { applyDirectives, prepareDirectives } from './directives';
import { expandResourceShorthand } from './resource-shorthand';
import { fieldResolvers, referenceLoader, remember, type GraphQLDataDeps, type GraphQLLimits, type GraphQLRequestState } from './resolvers';
import { buildSchema, type FhirSchemas } from './schema';

/**
 * FHIR GraphQL (R4 graphql.html) without HTTP: a request (query, variables, operationName) in, a
 * status and `{data, errors}` out. Limits refuse before anything runs: depth, an estimated cost
 * (fields times the lists above them), and at run time the searches per query and the request's
 * time budget. A syntax, validation or limit error is 400 with the OperationOutcome in each
 * error's `extensions`; a resolver's error is an entry of `errors` beside the data (200).
 */

export interface GraphQLRequest {
  query?: unknown;
  variables?: unknown;
  operationName?: unknown;
}

export interface GraphQLAnswer {
  status: number;
  body: { data?: unknown; errors?: unknown[] };
}

export interface GraphQLOptions {
  maxDepth: number;
  /** The largest estimated cost: each field counts once per item of the lists above it. */
  maxCost: number;
  limits: GraphQLLimits;
  introspection: boolean;
}

export const DEFAULT_GRAPHQL_OPTIONS: GraphQLOptions = {
  maxDepth: 12,
  maxCost: 100_000,
  limits: { searches: 200, maxCount: 1000 },
  introspection: true,
};

/** How many items a list is counted as when the query does not say (`_count`). */
const ASSUMED_LIST_SIZE = 20;

export interface GraphQLServiceDeps extends GraphQLDataDeps {
  model: ElementModel;
  resourceTypes: readonly string[];
  /** The types a type's reference search parameters may point at (`Resource`: any). */
  referenceTargets(type: string): ReadonlySet<string>;
  /** Changes when the search parameters do (the schema is built again then). */
  revision: () => number;
}

export class GraphQLService {
  private built?: { revision: number; schemas: FhirSchemas };

  constructor(
    private readonly deps: GraphQLServiceDeps,
    private readonly options: GraphQLOptions = DEFAULT_GRAPHQL_OPTIONS,
  ) {}

  /** The schemas (built on first use, again when search parameters change). */
  schemas(): FhirSchemas {
    const revision = this.deps.revision();
    if (!this.built || this.built.revision !== revision) {
      const resolvers = fieldResolvers(this.deps, this.options.limits);
      this.built = {
        revision,
        schemas: buildSchema({ model: this.deps.model, resourceTypes: this.deps.resourceTypes, searchParams: (type) => this.deps.searchParams(type), referenceTargets: (type) => this.deps.referenceTargets(type), resolvers }),
      };
    }
    return this.built.schemas;
  }

  async run(request: GraphQLRequest, ctx: RequestContext, options: { method: 'GET' | 'POST'; target?: Resource }): Promise<GraphQLAnswer> {
    if (typeof request.query !== 'string' || request.query.trim() === '') return refused('invalid', 'query is required (a GraphQL document)');
    const variables = request.variables ?? undefined;
    if (variables !== undefined && (typeof variables !== 'object' || variables === null || Array.isArray(variables))) return refused('invalid', 'variables must be a JSON object');
    if (request.operationName !== undefined && request.operationName !== null && typeof request.operationName !== 'string') return refused('invalid', 'operationName must be a string');
    const schema = options.target ? this.schemas().instance(options.target.resourceType) : this.schemas().system;
    let document: DocumentNode;
    try {
      document = prepareDirectives(expandResourceShorthand(parse(request.query, { maxTokens: 50_000 }), schema));
    } catch (err) {
      return refusedWith([err as GraphQLError], 'invalid');
    }
    const rules = [...specifiedRules, depthLimit(this.options.maxDepth), costLimit(this.options.maxCost), ...(this.options.introspection ? [] : [noIntrospection])];
    const errors = validate(schema, document, rules, { maxErrors: 20 });
    if (errors.length > 0) return refusedWith(errors, errors.some((e) => e.extensions?.code === 'too-costly') ? 'too-costly' : 'invalid');
    const operation = chosenOperation(document, request.operationName as string | undefined);
    if (!operation) return refused('invalid', request.operationName ? `the document has no operation named '${String(request.operationName)}'` : 'the document has several operations; name one (operationName)');
    if (operation.operation === 'mutation' && options.method === 'GET') return { status: 405, body: { errors: [errorEntry('not-supported', 'mutations change data: send them with POST')] } };
    if (operation.operation === 'subscription') return refused('not-supported', 'subscriptions are not supported over $graphql');

    const state: GraphQLRequestState = { ctx, searches: 0, containers: new WeakMap(), references: undefined as unknown as GraphQLRequestState['references'] };
    state.references = referenceLoader(this.deps, () => state, this.options.limits);
    if (options.target) remember(state, options.target);
    const result = await execute({
      schema,
      document,
      rootValue: options.target ?? {},
      contextValue: state,
      variableValues: variables as Record<string, unknown> | undefined,
      operationName: request.operationName as string | undefined,
    });
    const shaped = result.data ? applyDirectives(result.data as Record<string, unknown>, operation.selectionSet, fragmentsOf(document), variables as Record<string, unknown> | undefined) : undefined;
    const body: GraphQLAnswer['body'] = { data: shaped ? shaped.data : result.data };
    const answerErrors = [...(result.errors ?? []).map(resolverError), ...(shaped?.errors ?? []).map((text) => errorEntry('invalid', text))];
    if (answerErrors.length) body.errors = answerErrors;
    return { status: 200, body };
  }
}

function chosenOperation(document: DocumentNode, name: string | undefined): OperationDefinitionNode | undefined {
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (name) return operations.find((o) => o.name?.value === name);
  return operations.length === 1 ? operations[0] : undefined;
}

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  return new Map(document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]));
}

/** Refuses selection sets nested deeper than `max` (fragments followed). */
function depthLimit(max: number) {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(node) {
      const fragments = new Map(context.getDocument().definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]));
      const depth = depthOf(node.selectionSet, fragments, new Set());
      if (depth > max) context.reportError(new GraphQLError(`The query is nested ${depth} levels deep; at most ${max} are allowed`, { nodes: [node], extensions: { code: 'too-costly' } }));
    },
  });
}

function depthOf(set: SelectionSetNode | undefined, fragments: Map<string, FragmentDefinitionNode>, seen: Set<string>): number {
  if (!set) return 0;
  let deepest = 0;
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) deepest = Math.max(deepest, selection.selectionSet ? 1 + depthOf(selection.selectionSet, fragments, seen) : 0);
    else if (selection.kind === Kind.INLINE_FRAGMENT) deepest = Math.max(deepest, depthOf(selection.selectionSet, fragments, seen));
    else if (!seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      deepest = Math.max(deepest, depthOf(fragments.get(selection.name.value)?.selectionSet, fragments, seen));
      seen.delete(selection.name.value);
    }
  }
  return deepest;
}

/** Refuses queries whose estimated cost (each field once per item of the lists above it) is over `max`. */
function costLimit(max: number) {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(node) {
      const fragments = new Map(context.getDocument().definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]));
      const cost = costOf(node.selectionSet, fragments, 1, new Set());
      if (cost > max) context.reportError(new GraphQLError(`The query would cost about ${Math.round(cost)} (fields times list sizes); at most ${max} is allowed`, { nodes: [node], extensions: { code: 'too-costly' } }));
    },
  });
}

function costOf(set: SelectionSetNode | undefined, fragments: Map<string, FragmentDefinitionNode>, multiplier: number, seen: Set<string>): number {
  if (!set) return 0;
  let cost = 0;
  // Type conditions are alternatives (an object has one type): only the costliest type counts.
  const byType = new Map<string, number>();
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) {
      cost += multiplier;
      if (selection.selectionSet) cost += costOf(selection.selectionSet, fragments, multiplier * listSize(selection), seen);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition?.name.value;
      const own = costOf(selection.selectionSet, fragments, multiplier, seen);
      if (type === undefined) cost += own;
      else byType.set(type, (byType.get(type) ?? 0) + own);
    } else if (!seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      cost += costOf(fragments.get(selection.name.value)?.selectionSet, fragments, multiplier, seen);
      seen.delete(selection.name.value);
    }
    if (cost > Number.MAX_SAFE_INTEGER / 2) return cost;
  }
  return cost + Math.max(0, ...byType.values());
}

/** Searches count as the page they ask for; other lists as a typical size. */
function listSize(field: FieldNode): number {
  const name = field.name.value;
  if (!/(List|Connection)$/.test(name)) return 1;
  const count = field.arguments?.find((a) => a.name.value === '_count')?.value;
  if (count?.kind === Kind.INT) return Math.max(1, Number(count.value));
  return ASSUMED_LIST_SIZE;
}

function noIntrospection(context: ValidationContext): ASTVisitor {
  return {
    Field(node) {
      if (node.name.value === '__schema' || node.name.value === '__type') context.reportError(new GraphQLError('Introspection is turned off on this server', { nodes: [node] }));
    },
  };
}

/**
 * An entry of `errors`, its OperationOutcome in `extensions.resource` (where graphql.html puts it)
 * and, as this server has always answered it, `extensions.outcome`.
 */
function errorEntry(code: string, text: string, extra: Record<string, unknown> = {}) {
  const outcome: OperationOutcome = { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: code as 'invalid', details: { text } }] };
  return { message: text, ...extra, extensions: { outcome, resource: outcome } };
}

/** A resolver's error as an entry of `errors`, with its OperationOutcome (made from its message when it has none). */
function resolverError(error: GraphQLError) {
  const entry = error.toJSON();
  const outcome = (entry.extensions?.outcome as OperationOutcome | undefined) ?? errorEntry('processing', error.message).extensions.outcome;
  return { ...entry, extensions: { ...entry.extensions, outcome, resource: outcome } };
}

function refused(code: string, text: string): GraphQLAnswer {
  return { status: 400, body: { errors: [errorEntry(code, text)] } };
}

function refusedWith(errors: readonly GraphQLError[], code: string): GraphQLAnswer {
  return { status: 400, body: { errors: errors.map((e) => errorEntry(code, e.message, e.locations ? { locations: e.locations } : {})) } };
}
