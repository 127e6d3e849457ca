import {
  GraphQLBoolean,
  GraphQLFloat,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  GraphQLUnionType,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLOutputType,
} from 'graphql';
import type { ElementInfo, ElementModel } from '../fhir/model/model';
import type { GraphQLRequestState } from './request-state';
import type { FieldResolvers } from './resolvers';
import { IdScalar, JsonScalar, TokenScalar } from './scalars';

/**
 * The object types of the FHIR GraphQL schema, each made once on first use: datatypes and
 * backbone elements (their fields from the element model), resource types (their elements, then
 * the reverse references from the types that can point at them), the `Resource` union and the
 * connection types. Fields are thunks, so a type exists before the types it refers to are made.
 */

type FieldMap = GraphQLFieldConfigMap<unknown, GraphQLRequestState>;

/** What the types are made from (src/graphql/schema.ts's SchemaSources without the root's needs). */
interface TypeSources {
  model: ElementModel;
  /** Every resource type, sorted. */
  resourceTypes: readonly string[];
  /** The types a type's reference search parameters may point at (`Resource`: any). */
  referenceTargets(type: string): ReadonlySet<string>;
  resolvers: FieldResolvers;
}

/** Where an element's field sits: the type (or resource) it is in, its path there and the names it gives a backbone type. */
interface ElementSite {
  root: string;
  path: string;
  typeName: string;
  base: string;
  info: ElementInfo;
}

const INTEGER_TYPES = new Set(['integer', 'positiveInt', 'unsignedInt']);

export class SchemaTypes {
  private readonly objects = new Map<string, GraphQLObjectType>();
  private readonly resourceObjects = new Map<string, GraphQLObjectType>();
  private readonly connections = new Map<string, GraphQLObjectType>();
  private readonly listArgCache = new Map<string, GraphQLFieldConfigArgumentMap>();
  private readonly reverseArgCache = new Map<string, GraphQLFieldConfigArgumentMap>();
  private readonly targetsOf = new Map<string, ReadonlySet<string>>();
  private readonly elementBase: GraphQLObjectType;
  private union: GraphQLUnionType | undefined;

  constructor(private readonly sources: TypeSources) {
    this.elementBase = new GraphQLObjectType({
      name: 'ElementBase',
      description: 'The id and extensions of a primitive value (its `_name` form)',
      fields: () => ({
        id: { type: GraphQLString },
        extension: { type: new GraphQLList(this.objectType('Extension')) },
      }),
    });
  }

  // -------------------------------------------------------------------------------------------
  // Datatypes and backbone elements

  /** A datatype's object type (`HumanName`, `Extension`, `Element`). */
  objectType(code: string): GraphQLObjectType {
    let found = this.objects.get(code);
    if (!found) {
      found = new GraphQLObjectType({ name: code, fields: () => this.fieldsOf(code, '', code) });
      this.objects.set(code, found);
    }
    return found;
  }

  private backbone(root: string, path: string, name: string): GraphQLObjectType {
    let found = this.objects.get(name);
    if (!found) {
      found = new GraphQLObjectType({ name, fields: () => this.fieldsOf(root, path, name) });
      this.objects.set(name, found);
    }
    return found;
  }

  /** Fields of a type (or of a backbone element at `prefix` within it). */
  private fieldsOf(root: string, prefix: string, typeName: string): FieldMap {
    const { resolvers } = this.sources;
    const fields: FieldMap = {};
    for (const [name, info] of childElements(this.sources.model, root, prefix)) {
      const path = prefix ? `${prefix}.${name}` : name;
      const choice = name.endsWith('[x]');
      const base = choice ? name.slice(0, -3) : name;
      for (const code of info.types.length > 0 ? info.types : ['JSON']) {
        const fieldName = choice ? base + code[0].toUpperCase() + code.slice(1) : base;
        fields[fieldName] = this.elementField(code, fieldName, { root, path, typeName, base, info });
        if (this.isPrimitive(code)) {
          fields[`_${fieldName}`] = {
            type: info.array ? new GraphQLList(this.elementBase) : this.elementBase,
            resolve: resolvers.element(`_${fieldName}`, info.array),
          };
        }
      }
    }
    if (root === 'Reference' && prefix === '') {
      fields.resource = {
        type: this.resourceUnion(),
        args: { optional: { type: GraphQLBoolean }, type: { type: TokenScalar } },
        resolve: resolvers.reference,
      };
    }
    return fields;
  }

  /** One element's field for one of its types; a list of non-primitives takes the list arguments. */
  private elementField(
    code: string,
    fieldName: string,
    at: ElementSite,
  ): GraphQLFieldConfig<unknown, GraphQLRequestState> {
    const { root, path, info } = at;
    const type = this.elementType(code, at);
    const listed = info.array ? new GraphQLList(type) : type;
    const field: GraphQLFieldConfig<unknown, GraphQLRequestState> = {
      type: listed,
      resolve: this.sources.resolvers.element(fieldName, info.array),
    };
    if (info.array && !this.isPrimitive(code))
      field.args =
        code === 'BackboneElement' || code === 'Element' ? this.listArgs(root, path) : this.listArgs(code, '');
    return field;
  }

  private elementType(code: string, at: ElementSite): GraphQLOutputType {
    const { model } = this.sources;
    if (code === 'BackboneElement' || code === 'Element') {
      return code === 'Element' && !elementsBelow(model, at.root, at.path)
        ? this.objectType('Element')
        : this.backbone(at.root, at.path, at.typeName + pascal(at.base));
    }
    if (code === 'Resource') return this.resourceUnion();
    if (code === 'JSON') return JsonScalar;
    if (this.isPrimitive(code)) return primitive(code);
    if (model.isComplexType(code)) return this.objectType(code);
    return JsonScalar;
  }

  private isPrimitive(code: string): boolean {
    return /^[a-z]/.test(code) && !this.sources.model.isComplexType(code);
  }

  /**
   * A list of elements is filtered by the value of any of its items' primitive children (graphql.html
   * field arguments: `name(use: official)`, `extension(url: "...")`, `parameter(name: "result")`),
   * by `fhirpath`, and cut by `_offset` and `_count`. One argument map per item type.
   */
  private listArgs(root: string, prefix: string): GraphQLFieldConfigArgumentMap {
    const key = `${root}.${prefix}`;
    let args = this.listArgCache.get(key);
    if (!args) {
      args = {};
      for (const [name, info] of childElements(this.sources.model, root, prefix)) {
        const choice = name.endsWith('[x]');
        for (const code of info.types)
          if (this.isPrimitive(code)) args[choice ? name.slice(0, -3) + pascal(code) : name] = { type: TokenScalar };
      }
      Object.assign(args, {
        fhirpath: { type: GraphQLString },
        _count: { type: GraphQLInt },
        _offset: { type: GraphQLInt },
      });
      this.listArgCache.set(key, args);
    }
    return args;
  }

  // -------------------------------------------------------------------------------------------
  // Resources, the Resource union and connections

  /** A resource type's object type: `resourceType`, its elements, then its reverse references. */
  resourceObject(type: string): GraphQLObjectType {
    let found = this.resourceObjects.get(type);
    if (!found) {
      found = new GraphQLObjectType({ name: type, fields: () => this.resourceFields(type) });
      this.objects.set(type, found);
      this.resourceObjects.set(type, found);
    }
    return found;
  }

  private resourceFields(type: string): FieldMap {
    const { resolvers, resourceTypes } = this.sources;
    const fields: FieldMap = { resourceType: { type: GraphQLString }, ...this.fieldsOf(type, '', type) };
    // Reverse references: resources of another type that point here through one of their
    // parameters, as a list or as a connection (without `_cursor`: a cursor is followed at the root).
    // Only types with a reference parameter that can point here: every pair would cost 22,000
    // fields of arguments per kind (about 70 MB), nearly all of them to answer nothing.
    for (const other of resourceTypes.filter((other) => this.canPointAt(other, type))) {
      fields[`${other}List`] = {
        type: new GraphQLList(this.resourceObject(other)),
        args: this.reverseArgs(other),
        resolve: resolvers.reverse(other),
      };
      fields[`${other}Connection`] = {
        type: this.connection(other),
        args: this.reverseArgs(other),
        resolve: resolvers.reverseConnection(other),
      };
    }
    return fields;
  }

  /**
   * Reverse references take `_reference` and the result parameters (_count, _sort, ...), not every
   * search parameter of the type: a full set on every pair of resource types would make a schema
   * of half a million arguments, built in seconds. Other criteria go in a list's own search.
   */
  private reverseArgs(type: string): GraphQLFieldConfigArgumentMap {
    let args = this.reverseArgCache.get(type);
    if (!args) {
      args = { _reference: { type: new GraphQLNonNull(TokenScalar) } };
      for (const name of ['_count', '_offset']) args[name] = { type: GraphQLInt };
      for (const name of ['_sort', '_id', '_lastUpdated', '_tag', '_profile']) args[name] = { type: TokenScalar };
      args.fhirpath = { type: GraphQLString };
      this.reverseArgCache.set(type, args);
    }
    return args;
  }

  private canPointAt(from: string, to: string): boolean {
    let targets = this.targetsOf.get(from);
    if (!targets) {
      targets = this.sources.referenceTargets(from);
      this.targetsOf.set(from, targets);
    }
    return targets.has(to) || targets.has('Resource');
  }

  private resourceUnion(): GraphQLUnionType {
    this.union ??= new GraphQLUnionType({
      name: 'Resource',
      types: () => this.sources.resourceTypes.map((type) => this.resourceObject(type)),
      resolveType: (value: unknown) => (value as { resourceType?: string }).resourceType,
    });
    return this.union;
  }

  /** `PatientConnection`: a page of a search with its paging links, the matches as edges. */
  connection(type: string): GraphQLObjectType {
    let found = this.connections.get(type);
    if (!found) {
      const edge = new GraphQLObjectType({
        name: `${type}ConnectionEdge`,
        fields: () => ({
          mode: { type: GraphQLString },
          score: { type: GraphQLFloat },
          resource: { type: this.resourceObject(type) },
        }),
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
      this.connections.set(type, found);
    }
    return found;
  }
}

function primitive(code: string): GraphQLOutputType {
  if (code === 'boolean') return GraphQLBoolean;
  if (INTEGER_TYPES.has(code)) return GraphQLInt;
  if (code === 'decimal') return GraphQLFloat;
  if (code === 'id') return IdScalar;
  return GraphQLString;
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
