import { DirectiveLocation, GraphQLDirective, GraphQLNonNull, GraphQLScalarType, GraphQLString } from 'graphql';

/**
 * The scalars and directives of the FHIR GraphQL schema (R4 graphql.html): any JSON, a resource
 * given to a mutation, search values and ids as the page writes them, and `@flatten` and its kin.
 */

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
export function resourceInput(type: string): GraphQLScalarType {
  const check = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw new TypeError(`${type}Input must be a ${type} resource (a JSON object)`);
    const found = (value as { resourceType?: unknown }).resourceType;
    if (found !== undefined && found !== type)
      throw new TypeError(`${type}Input must be a ${type} resource, not ${String(found).slice(0, 64)}`);
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
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : undefined;
}

function tokenLiteral(ast: Literal): string | undefined {
  return ast.kind === 'StringValue' ||
    ast.kind === 'EnumValue' ||
    ast.kind === 'IntValue' ||
    ast.kind === 'FloatValue' ||
    ast.kind === 'BooleanValue'
    ? String(ast.value)
    : undefined;
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
export const FHIR_DIRECTIVES = [
  new GraphQLDirective({ name: 'flatten', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'first', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'singleton', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({
    name: 'slice',
    locations: [DirectiveLocation.FIELD],
    args: { path: { type: new GraphQLNonNull(GraphQLString) } },
  }),
];
