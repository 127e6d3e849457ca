import {
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  specifiedDirectives,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
} from 'graphql';
import type { ElementModel } from '../fhir/model/model';
import type { GraphQLRequestState } from './request-state';
import type { FieldResolvers } from './resolvers';
import { FHIR_DIRECTIVES, IdScalar, JsonScalar, resourceInput, TokenScalar } from './scalars';
import { SchemaTypes } from './schema-types';

/**
 * The GraphQL schema of R4 `graphql.html`, generated from the element model (the R4
 * StructureDefinitions and our own resource types): an object type per resource, datatype and
 * backbone element, primitives with their `_name` extension form, choice elements as one field per
 * type (`valueQuantity`), `Reference.resource`, reverse references as lists and connections
 * (`ObservationList(_reference: subject)`, `ConditionConnection(_reference: patient)`) from the types
 * that can point at the resource, and at the root `Patient(id)`, `PatientList(<search parameters>)`,
 * `PatientConnection(...)` and the mutations `PatientCreate`, `PatientUpdate`, `PatientDelete`.
 * Built once per set of search parameters.
 */

export interface SchemaSources {
  model: ElementModel;
  resourceTypes: readonly string[];
  /** The search parameter codes of a type. */
  searchParams(type: string): string[];
  /** The types a type's reference search parameters may point at (`Resource`: any). */
  referenceTargets(type: string): ReadonlySet<string>;
  resolvers: FieldResolvers;
}

export interface FhirSchemas {
  system: GraphQLSchema;
  instance(type: string): GraphQLSchema;
}

type FieldMap = GraphQLFieldConfigMap<unknown, GraphQLRequestState>;

/** Search parameter names as GraphQL names: `-` becomes `_` (graphql.html). */
export function argName(code: string): string {
  return code.replace(/-/g, '_');
}

export function buildSchema(sources: SchemaSources): FhirSchemas {
  const resourceTypes = [...sources.resourceTypes].sort();
  const types = new SchemaTypes({ ...sources, resourceTypes });
  const query: FieldMap = {};
  const mutation: FieldMap = {};
  for (const type of resourceTypes) {
    Object.assign(query, queryFields(type, types, sources));
    Object.assign(mutation, mutationFields(type, types, sources));
  }
  const system = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: query }),
    mutation: new GraphQLObjectType({ name: 'Mutation', fields: mutation }),
    directives: [...specifiedDirectives, ...FHIR_DIRECTIVES],
    types: [JsonScalar, TokenScalar, IdScalar],
  });
  const instances = new Map<string, GraphQLSchema>();
  return {
    system,
    // At instance level the resource itself is the root (graphql.html): its type is the query type.
    instance: (type) => {
      let schema = instances.get(type);
      if (!schema) {
        schema = new GraphQLSchema({
          query: types.resourceObject(type),
          directives: [...specifiedDirectives, ...FHIR_DIRECTIVES],
          types: [JsonScalar],
        });
        instances.set(type, schema);
      }
      return schema;
    },
  };
}

/** `Patient(id)`, `PatientList(<search parameters>)` and `PatientConnection(...)` at the root. */
function queryFields(type: string, types: SchemaTypes, sources: SchemaSources): FieldMap {
  const { resolvers } = sources;
  return {
    [type]: {
      type: types.resourceObject(type),
      args: { id: { type: new GraphQLNonNull(IdScalar) } },
      resolve: resolvers.read(type),
    },
    [`${type}List`]: {
      type: new GraphQLList(types.resourceObject(type)),
      args: searchArgs(type, sources),
      resolve: resolvers.list(type),
    },
    [`${type}Connection`]: {
      type: types.connection(type),
      args: searchArgs(type, sources),
      resolve: resolvers.connection(type),
    },
  };
}

/** `PatientCreate(res)`, `PatientUpdate(id, res)` and `PatientDelete(id)`. */
function mutationFields(type: string, types: SchemaTypes, sources: SchemaSources): FieldMap {
  const { resolvers } = sources;
  // Task.input's backbone type is already `TaskInput`: that one type keeps the plain JSON scalar.
  const input = sources.model.element(type, 'input') ? JsonScalar : resourceInput(type);
  const id = { type: new GraphQLNonNull(IdScalar) };
  return {
    [`${type}Create`]: {
      type: types.resourceObject(type),
      args: { res: { type: new GraphQLNonNull(input) } },
      resolve: resolvers.create(type),
    },
    [`${type}Update`]: {
      type: types.resourceObject(type),
      args: { id, res: { type: new GraphQLNonNull(input) } },
      resolve: resolvers.update(type),
    },
    [`${type}Delete`]: { type: types.resourceObject(type), args: { id }, resolve: resolvers.remove(type) },
  };
}

/** A root list's or connection's arguments: the type's search parameters and the result parameters. */
function searchArgs(type: string, sources: SchemaSources): GraphQLFieldConfigArgumentMap {
  const args: GraphQLFieldConfigArgumentMap = {};
  for (const code of sources.searchParams(type)) args[argName(code)] = { type: TokenScalar };
  for (const name of ['_count', '_offset']) args[name] = { type: GraphQLInt };
  for (const name of ['_sort', '_id', '_lastUpdated', '_tag', '_profile', '_security', '_has', '_filter'])
    args[name] ??= { type: TokenScalar };
  // Evaluated on the matches (after paging, for a connection).
  args.fhirpath = { type: GraphQLString };
  // `_cursor` as the page's query writes it, `cursor` as its linked example and its prose do.
  args._cursor = { type: GraphQLString };
  args.cursor = { type: GraphQLString };
  return args;
}
