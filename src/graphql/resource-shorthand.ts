import {
  getNamedType,
  isCompositeType,
  isObjectType,
  isInterfaceType,
  isUnionType,
  Kind,
  type ArgumentNode,
  type DocumentNode,
  type FieldNode,
  type GraphQLCompositeType,
  type GraphQLObjectType,
  type GraphQLSchema,
  type GraphQLUnionType,
  type InlineFragmentNode,
  type SelectionNode,
  type SelectionSetNode,
} from 'graphql';
import type { Budget } from '../context/budget';

/**
 * `Reference.resource` written as graphql.html writes it, made into plain GraphQL before validation.
 * The field's type is a union of every resource type, so GraphQL itself only takes fields under a
 * type condition (`resource { ... on Patient { birthDate } }`); the page also writes
 *  - `resource(type: Patient) { birthDate }`: the fields go under `... on Patient`;
 *  - `resource { active }`: the fields go under a type condition for each resource type that has
 *    them all (with the arguments and sub-selections used), so whichever type the target is answers;
 *  - two `resource(type: ...)` beside each other: one `resource` holding both type conditions (GraphQL
 *    refuses two fields of one name with different arguments).
 * Anything else is left for validation to judge (an unknown type name is refused there).
 * Each selection rewritten is a step of `budget`: `resource { extension { valueReference { resource
 * ... } } }` multiplies by the ~140 types that have the fields at every level it nests.
 */
export function expandResourceShorthand(document: DocumentNode, schema: GraphQLSchema, budget: Budget): DocumentNode {
  const definitions = document.definitions.map((definition) => {
    if (definition.kind === Kind.OPERATION_DEFINITION) {
      const root = schema.getRootType(definition.operation);
      return root
        ? { ...definition, selectionSet: rewriteSet(definition.selectionSet, root, { schema, budget }) }
        : definition;
    }
    if (definition.kind === Kind.FRAGMENT_DEFINITION) {
      const type = schema.getType(definition.typeCondition.name.value);
      return isCompositeType(type)
        ? { ...definition, selectionSet: rewriteSet(definition.selectionSet, type, { schema, budget }) }
        : definition;
    }
    return definition;
  });
  return { ...document, definitions };
}

interface Rewrite {
  schema: GraphQLSchema;
  budget: Budget;
}

function rewriteSet(set: SelectionSetNode, parent: GraphQLCompositeType, rewrite: Rewrite): SelectionSetNode {
  const { schema } = rewrite;
  rewrite.budget.spend(set.selections.length);
  const selections = set.selections.map((selection): SelectionNode => {
    if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : parent;
      return isCompositeType(type)
        ? { ...selection, selectionSet: rewriteSet(selection.selectionSet, type, rewrite) }
        : selection;
    }
    if (selection.kind !== Kind.FIELD || !selection.selectionSet) return selection;
    const definition =
      isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[selection.name.value] : undefined;
    const type = definition ? getNamedType(definition.type) : undefined;
    if (!isCompositeType(type)) return selection;
    const field = isUnionType(type) ? typedResource(selection, type) : selection;
    return { ...field, selectionSet: rewriteSet(field.selectionSet as SelectionSetNode, type, rewrite) };
  });
  return { ...set, selections: mergeResources(selections, parent) };
}

/** A `resource` selection's plain fields put under the type conditions they belong to. */
function typedResource(field: FieldNode, union: GraphQLUnionType): FieldNode {
  const set = field.selectionSet as SelectionSetNode;
  const plain = set.selections.filter((s): s is FieldNode => s.kind === Kind.FIELD && s.name.value !== '__typename');
  if (plain.length === 0) return field;
  const rest = set.selections.filter((s) => !plain.includes(s as FieldNode));
  const named = typeArgument(field);
  const types = named
    ? [named]
    : union
        .getTypes()
        .filter((type) => plain.every((f) => fits(f, type)))
        .map((type) => type.name);
  if (types.length === 0) return field;
  const fragments = types.map((name): InlineFragmentNode => ({
    kind: Kind.INLINE_FRAGMENT,
    typeCondition: { kind: Kind.NAMED_TYPE, name: { kind: Kind.NAME, value: name } },
    selectionSet: { kind: Kind.SELECTION_SET, selections: plain },
  }));
  return { ...field, selectionSet: { ...set, selections: [...rest, ...fragments] } };
}

/** Whether a type has the field with the arguments and the kind of selection used. */
function fits(field: FieldNode, type: GraphQLObjectType): boolean {
  const definition = type.getFields()[field.name.value];
  if (!definition) return false;
  if ((field.arguments ?? []).some((a) => !definition.args.some((d) => d.name === a.name.value))) return false;
  return Boolean(field.selectionSet) === isCompositeType(getNamedType(definition.type));
}

function typeArgument(field: FieldNode): string | undefined {
  const value = field.arguments?.find((a) => a.name.value === 'type')?.value;
  return value && (value.kind === Kind.STRING || value.kind === Kind.ENUM) ? value.value : undefined;
}

/** Several unaliased `resource(type: ...)` beside each other become one `resource` with all their type conditions. */
function mergeResources(selections: SelectionNode[], parent: GraphQLCompositeType): SelectionNode[] {
  if (!isObjectType(parent) || !isUnionType(getNamedType(parent.getFields().resource?.type))) return selections;
  const typed = selections.filter(
    (s): s is FieldNode =>
      s.kind === Kind.FIELD &&
      s.name.value === 'resource' &&
      !s.alias &&
      typeArgument(s) !== undefined &&
      Boolean(s.selectionSet),
  );
  if (typed.length < 2) return selections;
  const optional = typed.flatMap((f) => f.arguments ?? []).find((a) => a.name.value === 'optional');
  const args: ArgumentNode[] = optional ? [optional] : [];
  const merged: FieldNode = {
    kind: Kind.FIELD,
    name: { kind: Kind.NAME, value: 'resource' },
    arguments: args,
    selectionSet: {
      kind: Kind.SELECTION_SET,
      selections: typed.flatMap((f) => (f.selectionSet as SelectionSetNode).selections),
    },
  };
  const first = selections.indexOf(typed[0]);
  return selections.flatMap((s, index) => (index === first ? [merged] : typed.includes(s as FieldNode) ? [] : [s]));
}
