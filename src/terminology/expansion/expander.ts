import type {
  CodeSystem,
  ValueSet,
  ValueSetComposeInclude,
  ValueSetComposeIncludeConcept,
  ValueSetExpansionParameter,
} from 'fhir/r4';
import { FilterNotSupportedError, type CodeSystemProvider, type ConceptHandle } from '../providers/provider';
import { filterOp, MAX_IMPORT_DEPTH, pinImport, resolveImport } from '../compose';
import { TerminologyError, txIssue } from '../issues';
import { message } from '../messages';
import { compareVersions } from '../versions';
import { canonicalOf, type ValidationEnv } from '../membership/state';
import { INTERNAL_LIMIT, type ExpandOptions } from './options';
import { TextFilter } from './text-filter';
import { expansionCodeSystem, statusWarning } from './code-systems';
import { decideVersioning } from './versioning';
import { flatten, memberKey, type Collected, type ImportedExpansion, type Member, type Nesting } from './members';

/**
 * Enumerates a value set's members under a size limit and a time budget. Collecting is cheap
 * (references to concepts); what a member looks like in the answer (display, designations,
 * properties) is worked out later, and only for the members that are returned.
 */

export class ValueSetExpander {
  private readonly byKey = new Map<string, Member>();
  private readonly members: Member[] = [];
  private readonly roots: Member[] = [];
  private readonly excluded = new Set<string>();
  private readonly excludedSystems = new Set<string>();
  private readonly parameters: ValueSetExpansionParameter[] = [];
  private readonly importedProperties: { code: string; uri?: string }[] = [];
  /** Why the expansion is not closed (a fragment was used), for valueset-unclosed. */
  private readonly unclosed: string[] = [];
  private totalUnknown = false;
  private canBeHierarchy: boolean;
  private readonly filter: TextFilter;
  private hasExclusions = false;
  /** One system appears at several versions: members are told apart by version too. */
  private doingVersion = false;
  /** An exclude of another version of the included system excludes those codes in every version. */
  private excludeAcrossVersions = false;

  constructor(
    private readonly env: ValidationEnv,
    private readonly options: ExpandOptions,
    private readonly valueSet: ValueSet,
    private readonly nesting: Nesting = { chain: [], imports: new Map() },
  ) {
    this.canBeHierarchy = !options.excludeNested;
    this.filter = new TextFilter(options.filter);
  }

  async collect(): Promise<Collected> {
    const compose = this.valueSet.compose;
    if (compose?.lockedDate) {
      throw new TerminologyError(txIssue('LOCKED_DATE_NOT_SUPPORTED', [canonicalOf(this.valueSet)]), 400);
    }
    if (!compose && this.valueSet.expansion) {
      // A value set defined by its expansion only: its members are the entries listed.
      for (const entry of flatten(this.valueSet.expansion.contains ?? [])) {
        await this.env.pacer.step();
        if (!entry.system || !entry.code) continue;
        const { contains: _nested, ...flat } = entry;
        const key = this.key(entry.system, entry.version, entry.code);
        if (!this.byKey.has(key))
          this.push({
            key,
            system: entry.system,
            version: entry.version,
            code: entry.code,
            imported: flat,
            children: [],
          });
      }
      this.canBeHierarchy = false;
    }
    if (compose) {
      this.hasExclusions = (compose.exclude ?? []).length > 0;
      const versioning = decideVersioning(compose, this.env.params);
      this.doingVersion = versioning.doingVersion;
      this.excludeAcrossVersions = versioning.excludeAcrossVersions;
      if (versioning.versionsMatch) this.addParameter({ name: 'versionsMatch', valueBoolean: true });
      for (const [i, set] of (compose.exclude ?? []).entries())
        await this.excludeSet(set, `ValueSet.compose.exclude[${i}]`);
      const includes = [...compose.include].sort((a, b) =>
        a.system === b.system && a.version && b.version ? -compareVersions(a.version, b.version) : 0,
      );
      for (const set of includes)
        await this.includeSet(set, `ValueSet.compose.include[${compose.include.indexOf(set)}]`);
    }
    return {
      members: this.members,
      roots: this.roots,
      hierarchical: this.canBeHierarchy,
      parameters: this.parameters,
      importedProperties: this.importedProperties,
      unclosed: this.unclosed,
      totalUnknown: this.totalUnknown,
    };
  }

  private key(system: string, version: string | undefined, code: string): string {
    return this.doingVersion && !this.env.params.versionsMatch
      ? `${system}|${version ?? ''}\u0000${code}`
      : memberKey(system, code);
  }

  // -------------------------------------------------------------------------------------------
  // includes

  private async includeSet(set: ValueSetComposeInclude, path: string): Promise<void> {
    const { pacer } = this.env;
    if (set.valueSet || set.concept || (set.filter ?? []).length > 1) this.canBeHierarchy = false;
    const imports: ImportedExpansion[] = [];
    for (const url of set.valueSet ?? []) imports.push(await this.importValueSet(url));
    if (!set.system) {
      if (imports.length === 0) return;
      const [first, ...others] = imports;
      for (const member of first.members) {
        if (pacer.due()) await pacer.pause();
        if (others.every((o) => o.keys.has(member.key))) this.addImported(member);
      }
      this.importPropertyDefinitions(first);
      return;
    }
    const cs = this.codeSystem(set.system, set.version);
    const passesImports = (code: string) => imports.every((i) => i.keys.has(memberKey(cs.url, code)));
    if (!cs.enumerable && !set.concept) {
      await this.includeFromBasis(cs, set, path, passesImports);
      return;
    }
    if (!set.concept && !set.filter) {
      this.checkSize(cs);
      // Depth first, in the order of the hierarchy, on a stack of its own: a hierarchy thousands
      // deep must not take the call stack with it.
      const visited = new Set<ConceptHandle>();
      const stack: { node: ConceptHandle; parent: Member | undefined }[] = [];
      const pushAll = (nodes: ConceptHandle[], parent: Member | undefined) => {
        for (let i = nodes.length - 1; i >= 0; i--) stack.push({ node: nodes[i], parent });
      };
      pushAll(cs.roots(), undefined);
      for (let next = stack.pop(); next; next = stack.pop()) {
        const { node, parent } = next;
        if (visited.has(node)) {
          this.canBeHierarchy = false;
          continue;
        }
        visited.add(node);
        if (pacer.due()) await pacer.pause();
        let here = parent;
        const selectable =
          !(this.options.excludeNotForUI && cs.isAbstract(node)) &&
          !(this.env.params.activeOnly && cs.isInactive(node));
        if (selectable && passesImports(node.code) && this.passesText(cs, node)) {
          here = this.add(cs, node, undefined, this.filter.isEmpty ? parent : undefined) ?? parent;
        }
        pushAll(cs.children(node), here);
      }
    }
    for (const listed of set.concept ?? []) {
      if (pacer.due()) await pacer.pause();
      const node = cs.locate(listed.code);
      if (!node || (this.env.params.activeOnly && cs.isInactive(node)) || !passesImports(node.code)) continue;
      const texts = [listed.display, ...(listed.designation ?? []).map((d) => d.value)];
      if (!this.filter.isEmpty && !this.filter.passes(listed.code, ...texts) && !this.passesText(cs, node)) continue;
      this.add(cs, node, listed, undefined);
    }
    if (set.filter && set.filter.length > 0) {
      const filters = set.filter.map((f, i) => this.compileFilter(cs, f, `${path}.filter[${i}]`));
      const [first, ...others] = filters;
      for (const node of first.scansAll ? cs.all() : first.members()) {
        if (pacer.due()) await pacer.pause();
        if (first.scansAll && !first.contains(node)) continue;
        if (this.env.params.activeOnly && cs.isInactive(node)) continue;
        if (!others.every((f) => f.contains(node)) || !passesImports(node.code) || !this.passesText(cs, node)) continue;
        const parentNode = cs.parents(node)[0];
        const parent = parentNode ? this.byKey.get(this.key(cs.url, cs.version, parentNode.code)) : undefined;
        if (!cs.hasHierarchy) this.canBeHierarchy = false;
        this.add(cs, node, undefined, parent);
      }
    }
  }

  /**
   * All of a terminology that cannot be listed (a grammar), or a filter on it: the codes of the
   * value set that stands for it (its expansion basis) that the filters keep, in an expansion
   * marked unclosed. Without such a value set the expansion cannot be done.
   */
  private async includeFromBasis(
    cs: CodeSystemProvider,
    set: ValueSetComposeInclude,
    path: string,
    passesImports: (code: string) => boolean,
  ): Promise<void> {
    const basis = cs.expansionBasis ? this.env.resolver.valueSet(cs.expansionBasis) : undefined;
    if (!basis) throw new TerminologyError(txIssue('CODESYSTEM_NOT_ENUMERABLE', [cs.url]), 422);
    const filters = (set.filter ?? []).map((f, i) => this.compileFilter(cs, f, `${path}.filter[${i}]`));
    if (filters.length === 0) {
      this.totalUnknown = true;
      this.noteStatus(basis);
    }
    this.canBeHierarchy = false;
    this.unclosed.push(message('CODESYSTEM_GRAMMAR_BASIS', cs.url, cs.expansionBasis));
    for (const include of basis.compose?.include ?? []) {
      if (include.system !== cs.url) continue;
      for (const listed of include.concept ?? []) {
        await this.env.pacer.step();
        const node = cs.locate(listed.code);
        if (!node || !filters.every((f) => f.contains(node)) || !passesImports(node.code) || !this.passesText(cs, node))
          continue;
        this.add(cs, node, undefined, undefined);
      }
    }
  }

  private compileFilter(
    cs: CodeSystemProvider,
    f: NonNullable<ValueSetComposeInclude['filter']>[number],
    path: string,
  ) {
    const op = filterOp(f);
    if (f.value === undefined || f.value === '') {
      throw new TerminologyError(
        txIssue('UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE', [cs.url, f.property, op], { path }),
        400,
      );
    }
    try {
      return cs.filter(f.property, op, f.value);
    } catch (err) {
      if (!(err instanceof FilterNotSupportedError)) throw err;
      throw new TerminologyError(
        txIssue('FILTER_NOT_UNDERSTOOD', [f.property, op, f.value, canonicalOf(this.valueSet), cs.url]),
        400,
      );
    }
  }

  private passesText(cs: CodeSystemProvider, node: ConceptHandle): boolean {
    if (this.filter.isEmpty) return true;
    return this.filter.passes(node.code, ...cs.designations(node).map((d) => d.value));
  }

  /** Adds a member; answers it, or undefined when it is excluded or already there. */
  private add(
    cs: CodeSystemProvider,
    concept: ConceptHandle,
    listed: ValueSetComposeIncludeConcept | undefined,
    parent: Member | undefined,
  ): Member | undefined {
    if (cs.isInactive(concept) && this.valueSet.compose?.inactive === false) return undefined;
    const key = this.key(cs.url, cs.version, concept.code);
    if (this.isExcluded(cs.url, cs.version, concept.code)) return undefined;
    if (this.byKey.has(key)) {
      this.canBeHierarchy = false;
      return undefined;
    }
    const member: Member = {
      key,
      system: cs.url,
      version: cs.version,
      code: concept.code,
      cs,
      concept,
      listed,
      parent,
      children: [],
      showVersion: this.doingVersion,
    };
    this.push(member);
    return member;
  }

  /** A member of an imported value set, taken over as it is (but not its place in a hierarchy). */
  private addImported(member: Member): void {
    const key = this.key(member.system, member.version, member.code);
    if (this.byKey.has(key) || this.isExcluded(member.system, member.version, member.code)) return;
    this.push({ ...member, key, parent: undefined, children: [] });
  }

  private push(member: Member): void {
    if (this.members.length >= INTERNAL_LIMIT) this.tooCostly(INTERNAL_LIMIT);
    this.byKey.set(member.key, member);
    this.members.push(member);
    if (member.parent) member.parent.children.push(member);
    else this.roots.push(member);
  }

  // -------------------------------------------------------------------------------------------
  // excludes

  private async excludeSet(set: ValueSetComposeInclude, path: string): Promise<void> {
    const { pacer } = this.env;
    const imports: ImportedExpansion[] = [];
    for (const url of set.valueSet ?? []) imports.push(await this.importValueSet(url));
    if (!set.system) {
      const [first, ...others] = imports;
      for (const member of first?.members ?? []) {
        if (pacer.due()) await pacer.pause();
        if (others.every((o) => o.keys.has(member.key)))
          this.excluded.add(this.key(member.system, member.version, member.code));
      }
      return;
    }
    const cs = this.codeSystem(set.system, set.version);
    const passesImports = (code: string) => imports.every((i) => i.keys.has(memberKey(cs.url, code)));
    const exclude = (code: string) => this.excluded.add(this.key(cs.url, cs.version, code));
    const needsListing =
      (set.filter ?? []).length > 0 || (!set.concept && (imports.length > 0 || this.excludeAcrossVersions));
    if (!cs.enumerable && needsListing) throw new TerminologyError(txIssue('CODESYSTEM_NOT_ENUMERABLE', [cs.url]), 422);
    if (!set.concept && !set.filter) {
      if (imports.length === 0 && !this.excludeAcrossVersions)
        this.excludedSystems.add(this.doingVersion ? `${cs.url}|${cs.version ?? ''}` : cs.url);
      else {
        for (const node of cs.all()) {
          if (pacer.due()) await pacer.pause();
          if (passesImports(node.code)) exclude(node.code);
        }
      }
    }
    for (const listed of set.concept ?? []) {
      if (pacer.due()) await pacer.pause();
      const node = cs.locate(listed.code);
      if (node && passesImports(node.code)) exclude(node.code);
    }
    if (set.filter && set.filter.length > 0) {
      const filters = set.filter.map((f, i) => this.compileFilter(cs, f, `${path}.filter[${i}]`));
      const [first, ...others] = filters;
      for (const node of first.scansAll ? cs.all() : first.members()) {
        if (pacer.due()) await pacer.pause();
        if (first.scansAll && !first.contains(node)) continue;
        if (others.every((f) => f.contains(node)) && passesImports(node.code)) exclude(node.code);
      }
    }
  }

  private isExcluded(system: string, version: string | undefined, code: string): boolean {
    if (this.excludedSystems.has(system) || this.excludedSystems.has(`${system}|${version ?? ''}`)) return true;
    return this.excluded.has(this.key(system, version, code));
  }

  // -------------------------------------------------------------------------------------------
  // code systems and imported value sets

  private codeSystem(system: string, stated: string | undefined): CodeSystemProvider {
    const provider = expansionCodeSystem(system, stated, this.env);
    this.noteStatus(provider.resource);
    this.noteUsedCodeSystem(provider);
    return provider;
  }

  private noteUsedCodeSystem(cs: CodeSystemProvider): void {
    const canonical = cs.version ? `${cs.url}|${cs.version}` : cs.url;
    this.addParameter({ name: 'used-codesystem', valueUri: canonical });
    for (const s of cs.supplements) this.addParameter({ name: 'used-supplement', valueUri: s });
    if (cs.content === 'fragment') {
      this.addParameter({ name: 'used-fragment', valueUri: canonical });
      this.unclosed.push(`This extension is based on a fragment of the code system ${cs.url}`);
    }
  }

  /** warning-deprecated, -withdrawn, -retired, -experimental, -draft for what the expansion relies on. */
  noteStatus(resource: ValueSet | CodeSystem | undefined): void {
    const name = resource && statusWarning(resource, this.valueSet);
    if (name && resource) this.addParameter({ name, valueUri: canonicalOf(resource) });
  }

  /**
   * Expands an imported value set (fully, for filtering) and notes it as used. Each value set is
   * expanded once per request however often it is imported: a chain of value sets each importing
   * the one below twice would otherwise double the work at every level.
   */
  private async importValueSet(url: string): Promise<ImportedExpansion> {
    const pinned = this.pinValueSet(url);
    const target = resolveImport(this.valueSet, this.env.resolver, pinned);
    const [base, version] = pinned.split('|');
    if (!target) {
      if (version) throw new TerminologyError(txIssue('VS_EXP_IMPORT_UNK_PINNED', [base, version]), 422);
      throw new TerminologyError(txIssue('Unable_to_resolve_value_Set_', [base]), 422);
    }
    const canonical = canonicalOf(target);
    const { chain, imports } = this.nesting;
    if (chain.includes(canonical) || canonical === canonicalOf(this.valueSet)) {
      const path = [...chain, canonicalOf(this.valueSet), canonical].join(', ');
      throw new TerminologyError(txIssue('VALUESET_CIRCULAR_REFERENCE', [canonical, path]), 400);
    }
    // An expansion done before cannot lead back here: its own expansion would have found the cycle.
    let imported = imports.get(target);
    if (!imported) {
      if (chain.length >= MAX_IMPORT_DEPTH) {
        throw new TerminologyError(
          txIssue('VALUESET_IMPORTS_TOO_DEEP', [canonicalOf(this.valueSet), MAX_IMPORT_DEPTH]),
          422,
        );
      }
      const innerOptions = {
        ...this.options,
        filter: undefined,
        count: undefined,
        offset: undefined,
        excludeNested: true,
        limit: INTERNAL_LIMIT,
      };
      const inner = new ValueSetExpander(this.env, innerOptions, target, {
        chain: [...chain, canonicalOf(this.valueSet)],
        imports,
      });
      const collected = await inner.collect();
      imported = {
        keys: new Set(collected.members.map((m) => m.key)),
        members: collected.members,
        properties: collected.importedProperties,
        collected,
      };
      imports.set(target, imported);
    }
    for (const p of imported.collected.parameters) this.addParameter(p);
    for (const reason of imported.collected.unclosed) this.unclosed.push(reason);
    if (!pinned.startsWith('#')) this.addParameter({ name: 'used-valueset', valueUri: canonical });
    this.noteStatus(target);
    return imported;
  }

  private importPropertyDefinitions(imported: ImportedExpansion): void {
    for (const p of imported.properties)
      if (!this.importedProperties.some((q) => q.code === p.code)) this.importedProperties.push(p);
  }

  private pinValueSet(url: string): string {
    const { pinned, byRule } = pinImport(this.env.params, url);
    if (byRule) this.addParameter({ name: 'default-valueset-version', valueUri: pinned });
    return pinned;
  }

  // -------------------------------------------------------------------------------------------

  /** The whole code system is asked for and it is larger than the limit allows: refuse before walking it. */
  private checkSize(cs: CodeSystemProvider): void {
    const { count, offset } = this.options;
    const pagedWithinLimit = count !== undefined && count + (offset ?? 0) <= this.options.limit;
    if (cs.totalCount > this.options.limit && !pagedWithinLimit && this.filter.isEmpty && !this.hasExclusions) {
      this.tooCostly(this.options.limit);
    }
  }

  tooCostly(limit: number): never {
    throw new TerminologyError(txIssue('VALUESET_TOO_COSTLY', [canonicalOf(this.valueSet), limit]), 422);
  }

  private addParameter(p: ValueSetExpansionParameter): void {
    const value = p.valueUri ?? p.valueString ?? p.valueCode ?? p.valueBoolean ?? p.valueInteger;
    const same = this.parameters.some(
      (q) =>
        q.name === p.name && (q.valueUri ?? q.valueString ?? q.valueCode ?? q.valueBoolean ?? q.valueInteger) === value,
    );
    if (!same) this.parameters.push(p);
  }
}
