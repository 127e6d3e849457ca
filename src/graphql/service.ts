import {
  execute,
  GraphQLError,
  Kind,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type ValidationContext,
  type ASTVisitor,
  type GraphQLSchema,
} from 'graphql';
import type { OperationOutcome, Resource } from 'fhir/r4';
import { Budget } from '../context/budget';
import type { RequestContext } from '../context/request-context';
import { isFhirError } from '../fhir/errors';
import type { ElementModel } from '../fhir/model/model';
import { applyDirectives, conditionVariables, prepareDirectives } from './directives';
import { checkDocument, type DocumentLimits } from './document-limits';
import { expandResourceShorthand } from './resource-shorthand';
import { remember, type GraphQLDataDeps, type GraphQLLimits, type GraphQLRequestState } from './request-state';
import { fieldResolvers, referenceLoader } from './resolvers';
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

interface GraphQLOptions extends DocumentLimits {
  /** Steps of the work on the document before it runs (expanding, measuring): about one per selection. */
  maxDocumentSteps: number;
  limits: GraphQLLimits;
  introspection: boolean;
}

const DEFAULT_GRAPHQL_OPTIONS: GraphQLOptions = {
  maxDepth: 12,
  maxCost: 100_000,
  // About 100 ms of graphql-js's validation at its slowest (fields of one name, each with fields).
  maxPairs: 100_000,
  maxDocumentSteps: 200_000,
  limits: { searches: 200, maxCount: 1000 },
  introspection: true,
};

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
        schemas: buildSchema({
          model: this.deps.model,
          resourceTypes: this.deps.resourceTypes,
          searchParams: (type) => this.deps.searchParams(type),
          referenceTargets: (type) => this.deps.referenceTargets(type),
          resolvers,
        }),
      };
    }
    return this.built.schemas;
  }

  async run(
    request: GraphQLRequest,
    ctx: RequestContext,
    options: { method: 'GET' | 'POST'; target?: Resource },
  ): Promise<GraphQLAnswer> {
    const malformed = malformedRequest(request);
    if (malformed) return malformed;
    const variables = (request.variables ?? undefined) as Record<string, unknown> | undefined;
    const schema = options.target ? this.schemas().instance(options.target.resourceType) : this.schemas().system;
    const prepared = await this.prepare(request.query as string, schema, ctx);
    if ('status' in prepared) return prepared;
    const { document, conditions } = prepared;
    const rules = [...specifiedRules, ...(this.options.introspection ? [] : [noIntrospection])];
    const errors = validate(schema, document, rules, { maxErrors: 20 });
    if (errors.length > 0) return refusedWith(errors, 'invalid');
    const operation = chosenOperation(document, request.operationName as string | undefined);
    if (!operation)
      return refused(
        'invalid',
        request.operationName
          ? `the document has no operation named '${String(request.operationName)}'`
          : 'the document has several operations; name one (operationName)',
      );
    if (operation.operation === 'mutation' && options.method === 'GET')
      return {
        status: 405,
        body: { errors: [errorEntry('not-supported', 'mutations change data: send them with POST')] },
      };
    if (operation.operation === 'subscription')
      return refused('not-supported', 'subscriptions are not supported over $graphql');
    const unset = unsetCondition(operation, conditions, variables);
    if (unset) return refused('invalid', unset);
    return this.execute(
      {
        schema,
        document,
        operation,
        operationName: request.operationName as string | undefined,
        variables,
        target: options.target,
      },
      ctx,
    );
  }

  /**
   * The document parsed, its resource shorthand expanded and its directives prepared, then measured.
   * The document is measured before graphql-js validates it: validation is quadratic (and worse,
   * through fragments) in repeated fields, and holds the event loop while it runs.
   */
  private async prepare(
    query: string,
    schema: GraphQLSchema,
    ctx: RequestContext,
  ): Promise<GraphQLAnswer | { document: DocumentNode; conditions: Set<string> }> {
    const budget = Budget.of(ctx, 'the GraphQL query', this.options.maxDocumentSteps);
    try {
      // The event loop is given back between the steps: each is linear, but a large document takes a while.
      // 20,000 tokens is some 5,000 fields: validating that many already takes a few hundred ms.
      const parsed = parse(query, { maxTokens: 20_000 });
      await budget.pause();
      const { document, names: conditions } = conditionVariables(
        prepareDirectives(expandResourceShorthand(parsed, schema, budget)),
      );
      await budget.pause();
      const refusal = checkDocument(document, this.options, budget);
      if (refusal) return refused(refusal.code, refusal.text);
      await budget.pause();
      return { document, conditions };
    } catch (err) {
      if (isFhirError(err)) return refused('too-costly', err.message);
      // graphql-js parses by recursive descent: a document nested thousands deep runs out of stack there.
      if (err instanceof RangeError) return refused('too-costly', 'The document is nested too deeply');
      return refusedWith([err as GraphQLError], 'invalid');
    }
  }

  /** Runs a valid operation, then shapes its data by the FHIR directives. */
  private async execute(run: Runnable, ctx: RequestContext): Promise<GraphQLAnswer> {
    const { schema, document, operation, operationName, variables, target } = run;
    // Execution's size is bounded by the cost above; it is bounded in time, and paced, by its own budget.
    const running = Budget.of(ctx, 'the GraphQL query');
    const state: GraphQLRequestState = {
      ctx,
      searches: 0,
      budget: running,
      overrun: false,
      containers: new WeakMap(),
      references: undefined as unknown as GraphQLRequestState['references'],
    };
    state.references = referenceLoader(this.deps, () => state, this.options.limits);
    if (target) remember(state, target);
    const result = await execute({
      schema,
      document,
      rootValue: target ?? {},
      contextValue: state,
      variableValues: variables,
      operationName,
    });
    if (state.overrun) return outOfTime();
    let shaped: Awaited<ReturnType<typeof applyDirectives>> | undefined;
    try {
      shaped = result.data
        ? await applyDirectives(result.data as Record<string, unknown>, {
            set: operation.selectionSet,
            fragments: fragmentsOf(document),
            variables,
            budget: running,
          })
        : undefined;
    } catch (err) {
      if (isFhirError(err)) return outOfTime();
      throw err;
    }
    const body: GraphQLAnswer['body'] = { data: shaped ? shaped.data : result.data };
    const answerErrors = [
      ...(result.errors ?? []).map(resolverError),
      ...(shaped?.errors ?? []).map((text) => errorEntry('invalid', text)),
    ];
    if (answerErrors.length) body.errors = answerErrors;
    return { status: 200, body };
  }
}

/** A valid operation ready to run: its schema and document, the variables, and the resource at the root (instance level). */
interface Runnable {
  schema: GraphQLSchema;
  document: DocumentNode;
  operation: OperationDefinitionNode;
  /** As the request gave it: graphql-js chooses the operation again by it. */
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
  target: Resource | undefined;
}

/** The request's own shape: a query, variables as an object, operationName as a string. */
function malformedRequest(request: GraphQLRequest): GraphQLAnswer | undefined {
  if (typeof request.query !== 'string' || request.query.trim() === '')
    return refused('invalid', 'query is required (a GraphQL document)');
  const variables = request.variables ?? undefined;
  if (variables !== undefined && (typeof variables !== 'object' || variables === null || Array.isArray(variables)))
    return refused('invalid', 'variables must be a JSON object');
  if (
    request.operationName !== undefined &&
    request.operationName !== null &&
    typeof request.operationName !== 'string'
  )
    return refused('invalid', 'operationName must be a string');
  return undefined;
}

/**
 * A variable that decides `@skip`/`@include` and has no default must be true or false: GraphQL
 * refuses null or nothing for `Boolean!` (CoerceVariableValues), and the operation is not run.
 */
function unsetCondition(
  operation: OperationDefinitionNode,
  conditions: Set<string>,
  variables: Record<string, unknown> | undefined,
): string | undefined {
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    if (!conditions.has(name) || definition.defaultValue || definition.type.kind !== Kind.NON_NULL_TYPE) continue;
    const value = variables?.[name];
    if (value === undefined || value === null)
      return `the variable $${name} decides @skip or @include, so it must be true or false; it is ${value === null ? 'null' : 'not given'}`;
  }
  return undefined;
}

function chosenOperation(document: DocumentNode, name: string | undefined): OperationDefinitionNode | undefined {
  const operations = document.definitions.filter(
    (d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION,
  );
  if (name) return operations.find((o) => o.name?.value === name);
  return operations.length === 1 ? operations[0] : undefined;
}

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  return new Map(
    document.definitions
      .filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION)
      .map((f) => [f.name.value, f]),
  );
}

function noIntrospection(context: ValidationContext): ASTVisitor {
  return {
    Field(node) {
      if (node.name.value === '__schema' || node.name.value === '__type')
        context.reportError(new GraphQLError('Introspection is turned off on this server', { nodes: [node] }));
    },
  };
}

/**
 * An entry of `errors`, its OperationOutcome in `extensions.resource` (where graphql.html puts it)
 * and, as this server has always answered it, `extensions.outcome`.
 */
function errorEntry(code: string, text: string, extra: Record<string, unknown> = {}) {
  const outcome: OperationOutcome = {
    resourceType: 'OperationOutcome',
    issue: [{ severity: 'error', code: code as 'invalid', details: { text } }],
  };
  return { message: text, ...extra, extensions: { outcome, resource: outcome } };
}

/** A resolver's error as an entry of `errors`, with its OperationOutcome (made from its message when it has none). */
function resolverError(error: GraphQLError) {
  const entry = error.toJSON();
  const outcome =
    (entry.extensions?.outcome as OperationOutcome | undefined) ??
    errorEntry('processing', error.message).extensions.outcome;
  return { ...entry, extensions: { ...entry.extensions, outcome, resource: outcome } };
}

/** The time ran out while the query ran: no partial answer (its fields would be nulls without a reason). */
function outOfTime(): GraphQLAnswer {
  return {
    status: 422,
    body: { errors: [errorEntry('too-costly', 'The query did not finish within the time budget of the request')] },
  };
}

function refused(code: string, text: string): GraphQLAnswer {
  return { status: 400, body: { errors: [errorEntry(code, text)] } };
}

function refusedWith(errors: readonly GraphQLError[], code: string): GraphQLAnswer {
  return {
    status: 400,
    body: { errors: errors.map((e) => errorEntry(code, e.message, e.locations ? { locations: e.locations } : {})) },
  };
}
