import {
  GraphQLBoolean,
  GraphQLFloat,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  GraphQLDirective,
  DirectiveLocation,
  specifiedDirectives,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLOutputType,
} from 'graphql';
import type { ElementInfo, ElementModel } from '../fhir/model/model';
import type { FieldResolvers, GraphQLRequestState } from './resolvers';

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

const INTEGER_TYPES = new Set(['integer', 'positiveInt', 'unsignedInt']);

/** Any JSON value (a resource given to a mutation; the content of an element without a known type). */
export const JsonScalar = new GraphQLScalarType({
  name: 'JSON',
  description: 'Any JSON value',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast) => literalValue(ast),
});

/**
 * `PatientInput` and its kind: the resource a mutation takes, as R4 graphql.html names it. A scalar
 * holding the resource's JSON rather than a generated input type per element (150 more types
 * for a schema already large), so a client can declare `$res: PatientInput!` as the page shows;
 * the REST core validates the content as for any write.
 */
function resourceInput(type: string): GraphQLScalarType {
  const check = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError(`${type}Input must be a ${type} resource (a JSON object)`);
    const found = (value as { resourceType?: unknown }).resourceType;
    if (found !== undefined && found !== type) throw new TypeError(`${type}Input must be a ${type} resource, not ${String(found).slice(0, 64)}`);
    return { ...value, resourceType: type };
  };
  return new GraphQLScalarType({
    name: `${type}Input`,
    description: `A ${type} resource, as its FHIR JSON`,
    serialize: (value) => value,
    parseValue: check,
    parseLiteral: (ast) => check(literalValue(ast)),
  });
}

type Literal = Parameters<NonNullable<GraphQLScalarType['parseLiteral']>>[0];

function literalValue(ast: Literal): unknown {
  switch (ast.kind) {
    case 'StringValue':
    case 'EnumValue':
      return ast.value;
    case 'BooleanValue':
      return ast.value;
    case 'IntValue':
    case 'FloatValue':
      return Number(ast.value);
    case 'NullValue':
      return null;
    case 'ListValue':
      return ast.values.map((v) => literalValue(v));
    case 'ObjectValue':
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literalValue(f.value)]));
    default:
      return undefined;
  }
}

/**
 * A search or filter value: a string, or a bare name as graphql.html writes them (`name(use:
 * official)`); a list is the values ORed (`_id: [1, 2, example]`), the search's comma, each value's
 * own commas escaped.
 */
export const TokenScalar = new GraphQLScalarType({
  name: 'Token',
  description: 'A string; a bare name is taken as a string too, a list as its values ORed',
  serialize: (value) => value,
  parseValue: (value) => (Array.isArray(value) ? orOf(value.map(tokenValue)) : tokenValue(value)),
  parseLiteral: (ast) => (ast.kind === 'ListValue' ? orOf(ast.values.map(tokenLiteral)) : tokenLiteral(ast)),
});

function tokenValue(value: unknown): string | undefined {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
}

function tokenLiteral(ast: Literal): string | undefined {
  return ast.kind === 'StringValue' || ast.kind === 'EnumValue' || ast.kind === 'IntValue' || ast.kind === 'FloatValue' || ast.kind === 'BooleanValue' ? String(ast.value) : undefined;
}

/** Values as one search value, ORed; undefined (refused) when one is not a value or there are none. */
function orOf(values: (string | undefined)[]): string | undefined {
  if (values.length === 0 || values.some((v) => v === undefined)) return undefined;
  return (values as string[]).map((v) => v.replace(/[\\,$|]/g, (c) => `\\${c}`)).join(',');
}

/**
 * GraphQL's `ID`, also taking a bare name as graphql.html writes ids (`Patient(id: example)`):
 * the page's queries use that form, and a FHIR id is always a valid GraphQL name or number.
 */
export const IdScalar = new GraphQLScalarType({
  name: 'ID',
  description: 'A resource id; a bare name is taken as the id too',
  serialize: (value) => (typeof value === 'string' || typeof value === 'number' ? String(value) : undefined),
  parseValue: (value) => {
    if (typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value))) return String(value);
    throw new TypeError('An ID is a string');
  },
  parseLiteral: (ast) => {
    if (ast.kind === 'StringValue' || ast.kind === 'EnumValue' || ast.kind === 'IntValue') return ast.value;
    throw new TypeError('An ID is a string or a bare name');
  },
});

/** The FHIR directives of graphql.html, declared so that queries using them validate. */
const FHIR_DIRECTIVES = [
  new GraphQLDirective({ name: 'flatten', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'first', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'singleton', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'slice', locations: [DirectiveLocation.FIELD], args: { path: { type: new GraphQLNonNull(GraphQLString) } } }),
];

/** Search parameter names as GraphQL names: `-` becomes `_` (graphql.html). */
export function argName(code: string): string {
  return code.replace(/-/g, '_');
}

export function buildSchema(sources: SchemaSources): FhirSchemas {
  const { model, resolvers } = sources;
  const resourceTypes = [...sources.resourceTypes].sort();
  const objects = new Map<string, GraphQLObjectType>();
  const elementBase = new GraphQLObjectType({
    name: 'ElementBase',
    description: 'The id and extensions of a primitive value (its `_name` form)',
    fields: () => ({ id: { type: GraphQLString }, extension: { type: new GraphQLList(objectType('Extension')) } }),
  });

  const searchArgs = (type: string, extra: GraphQLFieldConfigArgumentMap = {}): GraphQLFieldConfigArgumentMap => {
    const args: GraphQLFieldConfigArgumentMap = { ...extra };
    for (const code of sources.searchParams(type)) args[argName(code)] = { type: TokenScalar };
    for (const name of ['_count', '_offset']) args[name] = { type: GraphQLInt };
    for (const name of ['_sort', '_id', '_lastUpdated', '_tag', '_profile', '_security', '_has', '_filter']) args[name] ??= { type: TokenScalar };
    // Evaluated on the matches (after paging, for a connection).
    args.fhirpath = { type: GraphQLString };
    // `_cursor` as the page's query writes it, `cursor` as its linked example and its prose do.
    args._cursor = { type: GraphQLString };
    args.cursor = { type: GraphQLString };
    return args;
  };

  // Reverse references take `_reference` and the result parameters (_count, _sort, ...), not every
  // search parameter of the type: a full set on every pair of resource types would make a schema
  // of half a million arguments, built in seconds. Other criteria go in a list's own search.
  const reverseArgCache = new Map<string, GraphQLFieldConfigArgumentMap>();
  const reverseArgs = (type: string): GraphQLFieldConfigArgumentMap => {
    let args = reverseArgCache.get(type);
    if (!args) {
      args = { _reference: { type: new GraphQLNonNull(TokenScalar) } };
      for (const name of ['_count', '_offset']) args[name] = { type: GraphQLInt };
      for (const name of ['_sort', '_id', '_lastUpdated', '_tag', '_profile']) args[name] = { type: TokenScalar };
      args.fhirpath = { type: GraphQLString };
      reverseArgCache.set(type, args);
    }
    return args;
  };

  const primitive = (code: string): GraphQLOutputType => {
    if (code === 'boolean') return GraphQLBoolean;
    if (INTEGER_TYPES.has(code)) return GraphQLInt;
    if (code === 'decimal') return GraphQLFloat;
    if (code === 'id') return IdScalar;
    return GraphQLString;
  };

  const isPrimitive = (code: string) => /^[a-z]/.test(code) && !model.isComplexType(code);

  /** Fields of a type (or of a backbone element at `prefix` within it). */
  const fieldsOf = (root: string, prefix: string, typeName: string): GraphQLFieldConfigMap<unknown, GraphQLRequestState> => {
    const fields: GraphQLFieldConfigMap<unknown, GraphQLRequestState> = {};
    const elements = childElements(model, root, prefix);
    for (const [name, info] of elements) {
      const path = prefix ? `${prefix}.${name}` : name;
      const choice = name.endsWith('[x]');
      const base = choice ? name.slice(0, -3) : name;
      for (const code of info.types.length > 0 ? info.types : ['JSON']) {
        const fieldName = choice ? base + code[0].toUpperCase() + code.slice(1) : base;
        let type: GraphQLOutputType;
        if (code === 'BackboneElement' || code === 'Element') type = code === 'Element' && !elementsBelow(model, root, path) ? objectType('Element') : backbone(root, path, typeName + pascal(base));
        else if (code === 'Resource') type = resourceUnion();
        else if (code === 'JSON') type = JsonScalar;
        else if (isPrimitive(code)) type = primitive(code);
        else if (model.isComplexType(code)) type = objectType(code);
        else type = JsonScalar;
        const listed = info.array ? new GraphQLList(type) : type;
        const field: GraphQLFieldConfig<unknown, GraphQLRequestState> = { type: listed, resolve: resolvers.element(fieldName, info.array) };
        if (info.array && !isPrimitive(code)) field.args = code === 'BackboneElement' || code === 'Element' ? listArgs(root, path) : listArgs(code, '');
        fields[fieldName] = field;
        if (isPrimitive(code)) fields[`_${fieldName}`] = { type: info.array ? new GraphQLList(elementBase) : elementBase, resolve: resolvers.element(`_${fieldName}`, info.array) };
      }
    }
    if (root === 'Reference' && prefix === '') {
      fields.resource = { type: resourceUnion(), args: { optional: { type: GraphQLBoolean }, type: { type: TokenScalar } }, resolve: resolvers.reference };
    }
    return fields;
  };

  // A list of elements is filtered by the value of any of its items' primitive children (graphql.html
  // field arguments: `name(use: official)`, `extension(url: "...")`, `parameter(name: "result")`),
  // by `fhirpath`, and cut by `_offset` and `_count`. One argument map per item type.
  const listArgCache = new Map<string, GraphQLFieldConfigArgumentMap>();
  const listArgs = (root: string, prefix: string): GraphQLFieldConfigArgumentMap => {
    const key = `${root}.${prefix}`;
    let args = listArgCache.get(key);
    if (!args) {
      args = {};
      for (const [name, info] of childElements(model, root, prefix)) {
        const choice = name.endsWith('[x]');
        for (const code of info.types) if (isPrimitive(code)) args[choice ? name.slice(0, -3) + pascal(code) : name] = { type: TokenScalar };
      }
      Object.assign(args, { fhirpath: { type: GraphQLString }, _count: { type: GraphQLInt }, _offset: { type: GraphQLInt } });
      listArgCache.set(key, args);
    }
    return args;
  };

  function objectType(code: string): GraphQLObjectType {
    let found = objects.get(code);
    if (!found) {
      found = new GraphQLObjectType({ name: code, fields: () => fieldsOf(code, '', code) });
      objects.set(code, found);
    }
    return found;
  }

  function backbone(root: string, path: string, name: string): GraphQLObjectType {
    let found = objects.get(name);
    if (!found) {
      found = new GraphQLObjectType({ name, fields: () => fieldsOf(root, path, name) });
      objects.set(name, found);
    }
    return found;
  }

  const targetsOf = new Map<string, ReadonlySet<string>>();
  const canPointAt = (from: string, to: string) => {
    let targets = targetsOf.get(from);
    if (!targets) {
      targets = sources.referenceTargets(from);
      targetsOf.set(from, targets);
    }
    return targets.has(to) || targets.has('Resource');
  };

  const resourceObjects = new Map<string, GraphQLObjectType>();
  function resourceObject(type: string): GraphQLObjectType {
    let found = resourceObjects.get(type);
    if (!found) {
      found = new GraphQLObjectType({
        name: type,
        fields: () => {
          const fields: GraphQLFieldConfigMap<unknown, GraphQLRequestState> = { resourceType: { type: GraphQLString }, ...fieldsOf(type, '', type) };
          // Reverse references: resources of another type that point here through one of their
          // parameters, as a list or as a connection (without `_cursor`: a cursor is followed at the root).
          // Only types with a reference parameter that can point here: every pair would cost 22,000
          // fields of arguments per kind (about 70 MB), nearly all of them to answer nothing.
          for (const other of resourceTypes.filter((other) => canPointAt(other, type))) {
            fields[`${other}List`] = { type: new GraphQLList(resourceObject(other)), args: reverseArgs(other), resolve: resolvers.reverse(other) };
            fields[`${other}Connection`] = { type: connection(other), args: reverseArgs(other), resolve: resolvers.reverseConnection(other) };
          }
          return fields;
        },
      });
      objects.set(type, found);
      resourceObjects.set(type, found);
    }
    return found;
  }

  let union: GraphQLUnionType | undefined;
  function resourceUnion(): GraphQLUnionType {
    union ??= new GraphQLUnionType({
      name: 'Resource',
      types: () => resourceTypes.map(resourceObject),
      resolveType: (value: unknown) => (value as { resourceType?: string }).resourceType,
    });
    return union;
  }

  const connections = new Map<string, GraphQLObjectType>();
  function connection(type: string): GraphQLObjectType {
    let found = connections.get(type);
    if (!found) {
      const edge = new GraphQLObjectType({
        name: `${type}ConnectionEdge`,
        fields: () => ({ mode: { type: GraphQLString }, score: { type: GraphQLFloat }, resource: { type: resourceObject(type) } }),
      });
      found = new GraphQLObjectType({
        name: `${type}Connection`,
        fields: {
          count: { type: GraphQLInt },
          offset: { type: GraphQLInt },
          pagesize: { type: GraphQLInt },
          first: { type: GraphQLString },
          previous: { type: GraphQLString },
          next: { type: GraphQLString },
          last: { type: GraphQLString },
          edges: { type: new GraphQLList(edge) },
        },
      });
      connections.set(type, found);
    }
    return found;
  }

  const query: GraphQLFieldConfigMap<unknown, GraphQLRequestState> = {};
  const mutation: GraphQLFieldConfigMap<unknown, GraphQLRequestState> = {};
  for (const type of resourceTypes) {
    query[type] = { type: resourceObject(type), args: { id: { type: new GraphQLNonNull(IdScalar) } }, resolve: resolvers.read(type) };
    query[`${type}List`] = { type: new GraphQLList(resourceObject(type)), args: searchArgs(type), resolve: resolvers.list(type) };
    query[`${type}Connection`] = { type: connection(type), args: searchArgs(type), resolve: resolvers.connection(type) };
    // Task.input's backbone type is already `TaskInput`: that one type keeps the plain JSON scalar.
    const input = model.element(type, 'input') ? JsonScalar : resourceInput(type);
    mutation[`${type}Create`] = { type: resourceObject(type), args: { res: { type: new GraphQLNonNull(input) } }, resolve: resolvers.create(type) };
    mutation[`${type}Update`] = { type: resourceObject(type), args: { id: { type: new GraphQLNonNull(IdScalar) }, res: { type: new GraphQLNonNull(input) } }, resolve: resolvers.update(type) };
    mutation[`${type}Delete`] = { type: resourceObject(type), args: { id: { type: new GraphQLNonNull(IdScalar) } }, resolve: resolvers.remove(type) };
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
        schema = new GraphQLSchema({ query: resourceObject(type), directives: [...specifiedDirectives, ...FHIR_DIRECTIVES], types: [JsonScalar] });
        instances.set(type, schema);
      }
      return schema;
    },
  };
}

export interface FhirSchemas {
  system: GraphQLSchema;
  instance(type: string): GraphQLSchema;
}

/** The direct children of an element (or of the type, prefix ''). */
function childElements(model: ElementModel, root: string, prefix: string): [string, ElementInfo][] {
  if (prefix === '') return model.topLevel(root);
  const start = `${prefix}.`;
  return model
    .paths(root)
    .filter(([name]) => name.startsWith(start) && !name.slice(start.length).includes('.'))
    .map(([name, info]): [string, ElementInfo] => [name.slice(start.length), info]);
}

function elementsBelow(model: ElementModel, root: string, path: string): boolean {
  return model.paths(root).some(([name]) => name.startsWith(`${path}.`));
}

function pascal(name: string): string {
  return name[0].toUpperCase() + name.slice(1);
}
