import type { Coding } from 'fhir/r4';
import type { InvariantEnv, InvariantResult } from '../invariants';
import type { ValidationIssue } from '../issues';
import type { ProfileSession } from '../library';
import type { BoundConstraint, Constraint, ElementNode, TypeRef } from '../model';
import { nativeInvariant } from '../native-invariants';
import { checkBundleEntry, checkReference, isObject } from '../resource-rules';
import type { BindingCheck } from '../terminology-port';
import type { Cursor } from './cursor';
import type { Walk } from '../walker';

/**
 * What the walk checks of an element besides its structure: its invariants (the element's own,
 * those of the definition giving its children, its type's), the rules of its type (references,
 * a Bundle entry) and the coded values it holds that a binding asks to be checked.
 */

export interface PendingBinding extends BindingCheck {
  strength: 'required' | 'extensible';
  expression: string;
}

/** A user's invariant to evaluate at one place: the expression as written for the engine. */
export interface PendingInvariant {
  constraint: Constraint;
  expression: string;
  focus: unknown;
  base: string;
  env: InvariantEnv;
  path: string;
}

/** Where one invariant is evaluated: `primitive` names the property when it is on a primitive of the focus. */
export interface InvariantPlace {
  base: string;
  env: InvariantEnv;
  path: string;
  primitive?: string;
}

/** The element at a place, the definition giving its children (`provider`) and its type. */
export interface ConstrainedElement {
  node: ElementNode;
  provider: ElementNode;
  type: TypeRef;
}

/** `primitive`: the constraint is on a primitive property of the focus, evaluated on each of its values. */
function invariantExpression(constraint: Constraint, primitive: string | undefined): string {
  return primitive ? `\`${primitive}\`.all(${constraint.expression})` : constraint.expression;
}

export function checkConstraints(
  walk: Walk,
  value: Record<string, unknown>,
  element: ConstrainedElement,
  cursor: Cursor,
): void {
  for (const { constraint, base } of constraintsFor(walk.session, element)) {
    evaluateInvariant(walk, constraint, value, { base, env: cursor.env, path: cursor.path });
  }
}

/** The element's own constraints, those of the definition giving its children, and its type's. */
function constraintsFor(session: ProfileSession, { node, provider, type }: ConstrainedElement): BoundConstraint[] {
  // Keyed by the provider when it is another node, else by the type (whose own invariants apply).
  const cache = (node.constraintsByType ??= new Map());
  const key: ElementNode | string = provider !== node ? provider : type.code;
  let list = cache.get(key);
  if (!list) {
    const out: BoundConstraint[] = [];
    const seen = new Set<string>();
    const add = (from: ElementNode) => {
      for (const c of from.constraints) {
        if (seen.has(c.key)) continue;
        seen.add(c.key);
        out.push({ constraint: c, base: basePath(from) });
      }
    };
    add(node);
    if (provider !== node) add(provider);
    else if (node.path.includes('.')) {
      const typeBase = session.base(type.code);
      if (typeBase) add(typeBase.root);
    }
    list = out;
    cache.set(key, list);
  }
  return list;
}

/** One invariant at one place. */
export function evaluateInvariant(
  walk: Walk,
  constraint: Constraint,
  focus: Record<string, unknown>,
  place: InvariantPlace,
): void {
  const { base, env, path, primitive } = place;
  if (constraint.user) {
    // A user's invariant may take any time: the validator evaluates these after the walk, bounded.
    if (walk.invariants) {
      walk.userInvariants.push({
        constraint,
        expression: invariantExpression(constraint, primitive),
        focus,
        base,
        env,
        path,
      });
    }
    return;
  }
  const native = nativeInvariant(constraint);
  let result = native?.(focus, env);
  if (!result && walk.invariants)
    result = walk.invariants.check(invariantExpression(constraint, primitive), focus, base, env);
  if (result) walk.invariantResult(constraint, path, result);
}

/** The issue an invariant's result makes, if any. */
export function invariantIssue(
  constraint: Constraint,
  path: string,
  result: InvariantResult,
): ValidationIssue | undefined {
  if (result.ok === true) return undefined;
  if (result.ok === false) {
    return {
      severity: constraint.severity,
      code: 'invariant',
      message: `Constraint failed: ${constraint.key}: '${constraint.human}'`,
      expression: path,
      source: constraint.key,
    };
  }
  return {
    severity: 'warning',
    code: 'invariant',
    message: `Constraint ${constraint.key} could not be evaluated: ${result.reason}`,
    expression: path,
    source: constraint.key,
  };
}

export function checkTypeRules(
  walk: Walk,
  value: Record<string, unknown>,
  node: ElementNode,
  type: TypeRef,
  cursor: Cursor,
): void {
  const { path } = cursor;
  const terminology = walk.options.terminology && node.binding;
  switch (type.code) {
    case 'Reference':
      checkReference(value, type, path, cursor.scope, walk.referencing);
      return;
    case 'CodeableConcept':
      if (terminology) {
        const codings = Array.isArray(value.coding) ? value.coding.filter(isObject).map(codingOf) : [];
        if (codings.length > 0) collectBinding(walk, node, { kind: 'CodeableConcept', codings, path });
        else if (node.binding?.strength === 'required' && node.binding.valueSet) {
          walk.error(
            'code-invalid',
            path,
            `No code provided, and a code is required from the value set '${node.binding.valueSet}'`,
          );
        }
      }
      return;
    case 'Coding':
      if (terminology) collectBinding(walk, node, { kind: 'Coding', codings: [codingOf(value)], path });
      return;
    case 'Quantity':
      if (terminology && typeof value.code === 'string') {
        collectBinding(walk, node, {
          kind: 'Coding',
          codings: [{ system: value.system as string | undefined, code: value.code }],
          path,
        });
      }
      return;
    default:
      if (node.path === 'Bundle.entry') checkBundleEntry(value, path, walk);
  }
}

/** Coded values found at `path`, to check against the node's binding after the walk. */
export interface CodedValues {
  kind: PendingBinding['kind'];
  codings: Coding[];
  path: string;
}

export function collectBinding(walk: Walk, node: ElementNode, coded: CodedValues): void {
  const b = node.binding;
  if (!b?.valueSet || (b.strength !== 'required' && b.strength !== 'extensible')) return;
  if (coded.codings.every((c) => c.code === undefined)) return;
  walk.bindings.push({
    valueSet: b.valueSet,
    strength: b.strength,
    kind: coded.kind,
    codings: coded.codings,
    expression: coded.path,
  });
}

function basePath(node: ElementNode): string {
  return node.path.replace(/\[x\]/g, '');
}

function codingOf(value: Record<string, unknown>): Coding {
  const coding: Coding = {};
  if (typeof value.system === 'string') coding.system = value.system;
  if (typeof value.version === 'string') coding.version = value.version;
  if (typeof value.code === 'string') coding.code = value.code;
  return coding;
}
