import { randomUUID } from 'node:crypto';
import type { Extension, ValueSet, ValueSetExpansionContains, ValueSetExpansionParameter } from 'fhir/r4';
import { requireSupplements, valueSetEnv, type EngineContext } from './validate-code';
import { entryFor, PropertyDeclarations } from './expansion/entries';
import { ValueSetExpander } from './expansion/expander';
import { ownStatusParameters, type Collected, type Member } from './expansion/members';
import type { ExpandOptions } from './expansion/options';
import type { ValidationEnv } from './membership/state';
import { echoLanguages } from './languages';

/** Copied from the value set into its expansion; the definition (compose and the like) is not. */
const DEFINITION_ONLY = [
  'id',
  'meta',
  'text',
  'compose',
  'purpose',
  'description',
  'contact',
  'copyright',
  'publisher',
  'extension',
  'contained',
];

/**
 * ValueSet/$expand as the engine sees it: the value set with an `expansion`, paged, within the
 * size limit (too-costly beyond it) and the request's time budget.
 */
export async function expandValueSet(
  valueSet: ValueSet,
  options: ExpandOptions,
  ctx: EngineContext,
): Promise<ValueSet> {
  const { params } = ctx;
  const env = valueSetEnv(valueSet, ctx);

  const result: ValueSet = { resourceType: 'ValueSet' } as ValueSet;
  for (const [k, v] of Object.entries(valueSet)) {
    if (k === 'resourceType' || k === 'expansion') continue;
    if (options.includeDefinition || !DEFINITION_ONLY.includes(k))
      (result as unknown as Record<string, unknown>)[k] = v;
  }
  if (valueSet.expansion && !valueSet.compose) {
    result.expansion = valueSet.expansion;
    return result;
  }

  const expander = new ValueSetExpander(env, options, valueSet);
  const collected = await collectOnce(expander, valueSet, options, ctx, env);
  requireSupplements(env);

  const { count, offset } = options;
  const total = collected.members.length;
  if (count === undefined && total > options.limit) expander.tooCostly(options.limit);
  // A page that starts inside the list cannot show where its first entries hang.
  // Nor is a hierarchy deeper than a client can parse given as one.
  const hierarchical =
    collected.hierarchical &&
    !(offset !== undefined && offset > 0) &&
    (count === undefined || count > total) &&
    nestingDepth(collected.members) <= MAX_NESTING;

  const parameters: ValueSetExpansionParameter[] = [];
  const add = (p: ValueSetExpansionParameter) => parameters.push(p);
  if (options.filter) add({ name: 'filter', valueString: options.filter });
  const echoedText =
    options.displayLanguage ?? options.acceptLanguage ?? (params.displayLanguages ?? params.httpLanguages)?.source;
  const echoedLanguage = echoedText === undefined ? undefined : echoLanguages(echoedText);
  if (echoedLanguage) add({ name: 'displayLanguage', valueCode: echoedLanguage });
  for (const d of options.designations) add({ name: 'designation', valueString: d });
  if (options.excludeNested !== undefined) add({ name: 'excludeNested', valueBoolean: options.excludeNested });
  if (params.activeOnlyGiven) add({ name: 'activeOnly', valueBoolean: params.activeOnly });
  if (options.includeDesignations !== undefined)
    add({ name: 'includeDesignations', valueBoolean: options.includeDesignations });
  if (options.includeDefinition !== undefined)
    add({ name: 'includeDefinition', valueBoolean: options.includeDefinition });
  if (options.excludeNotForUI !== undefined) add({ name: 'excludeNotForUI', valueBoolean: options.excludeNotForUI });
  if (options.excludePostCoordinated !== undefined)
    add({ name: 'excludePostCoordinated', valueBoolean: options.excludePostCoordinated });
  if (offset !== undefined) add({ name: 'offset', valueInteger: offset });
  if (count !== undefined) add({ name: 'count', valueInteger: count });
  for (const rule of params.versionRules) {
    if (rule.valueSet || !params.usedRules.has(rule)) continue;
    const name =
      rule.mode === 'override'
        ? 'force-system-version'
        : rule.mode === 'check'
          ? 'check-system-version'
          : 'system-version';
    add({ name, valueUri: `${rule.system}|${rule.version}` });
  }
  parameters.push(...collected.parameters);
  for (const p of ownStatusParameters(valueSet))
    if (!parameters.some((q) => q.name === p.name && q.valueUri === p.valueUri)) add(p);

  const declarations = new PropertyDeclarations();
  for (const p of collected.importedProperties) declarations.declare(p.code, p.uri);
  const usedSupplements = new Set<string>();
  const entryContext = {
    options,
    languages: params.workingLanguages(),
    declarations,
    valueSetLanguage: valueSet.language,
    usedSupplements,
  };
  const build = (member: Member): ValueSetExpansionContains => {
    const entry = entryFor(member, entryContext);
    if (hierarchical && member.children.length > 0) entry.contains = member.children.map(build);
    return entry;
  };
  const list = hierarchical ? collected.roots : collected.members;
  const start = offset ?? 0;
  const page = list.slice(start, count === undefined ? undefined : start + count);
  const contains: ValueSetExpansionContains[] = [];
  for (const member of page) {
    contains.push(build(member));
    if (env.pacer.due()) await env.pacer.pause();
  }
  for (const s of new Set([...env.usedSupplements, ...usedSupplements])) {
    const noted = parameters.some(
      (p) => p.name === 'used-supplement' && (p.valueUri === s || p.valueUri?.startsWith(`${s}|`)),
    );
    if (!noted) add({ name: 'used-supplement', valueUri: s });
  }

  const expansion: NonNullable<ValueSet['expansion']> = {
    identifier: `urn:uuid:${randomUUID()}`,
    timestamp: new Date().toISOString(),
  };
  if (!collected.totalUnknown) expansion.total = total;
  if (offset !== undefined || count !== undefined) expansion.offset = start;
  if (parameters.length > 0) expansion.parameter = parameters;
  const declared: Extension[] = [];
  if (collected.unclosed.length > 0) {
    declared.push({ url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed', valueBoolean: true });
    for (const reason of new Set(collected.unclosed))
      declared.push({ url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed-reason', valueString: reason });
  }
  declared.push(...declarations.toExtensions());
  if (declared.length > 0) expansion.extension = declared;
  if (contains.length > 0) expansion.contains = contains;
  result.expansion = expansion;
  return result;
}

/**
 * The members of a value set for these options, worked out once per state of the content: a
 * second page of the same expansion only slices and renders. Not reused when the request
 * brings version rules or supplements (they change what resolves, and are recorded per request).
 */
async function collectOnce(
  expander: ValueSetExpander,
  valueSet: ValueSet,
  options: ExpandOptions,
  ctx: EngineContext,
  env: ValidationEnv,
): Promise<Collected> {
  const { params } = ctx;
  if (params.versionRules.length > 0 || params.supplements.size > 0) return await expander.collect();
  const pagedWithinLimit = options.count !== undefined && options.count + (options.offset ?? 0) <= options.limit;
  const key = JSON.stringify([
    options.filter ?? '',
    options.excludeNested === true,
    options.excludeNotForUI === true,
    params.activeOnly,
    params.versionsMatch,
    params.versionsMatchGiven,
    options.limit,
    pagedWithinLimit,
  ]);
  const known = ctx.resolver.memo.get<{ collected: Collected; usedSupplements: string[] }>(valueSet, key);
  if (known) {
    for (const s of known.usedSupplements) env.usedSupplements.add(s);
    return known.collected;
  }
  const collected = await expander.collect();
  // Weighed by its members (the bulk of what it holds).
  ctx.resolver.memo.set(
    valueSet,
    key,
    { collected, usedSupplements: [...env.usedSupplements] },
    collected.members.length + 1,
  );
  return collected;
}

/** Levels of `contains` an expansion nests at most; a deeper hierarchy is given flat. */
export const MAX_NESTING = 20;

/** How deep the members hang (parents are collected before their children). */
function nestingDepth(members: Member[]): number {
  const depths = new Map<Member, number>();
  let deepest = 0;
  for (const member of members) {
    const depth = member.parent ? (depths.get(member.parent) ?? 0) + 1 : 0;
    depths.set(member, depth);
    if (depth > deepest) deepest = depth;
  }
  return deepest;
}
