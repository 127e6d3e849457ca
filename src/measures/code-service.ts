import type { ValueSet as FhirValueSet } from 'fhir/r4';
import { Code, ValueSet, type TerminologyProvider } from 'cql-execution';
import { fhirError } from '../fhir/errors';
import type { TerminologyService, TerminologySession } from '../terminology/service';
import type { LoadedLibrary } from './library-closure';

/**
 * cql-execution's terminology provider over this server's own terminology engine: every value
 * set the libraries name is resolved by canonical (url, and version when the ELM pins one) among
 * the project's stored and the bundled value sets, and expanded by the engine's expander (a value
 * set published with only an expansion, as VSAC's are, is taken as expanded). Expansions are
 * prepared before any patient is evaluated, so a missing value set fails the request up front.
 */

export interface CodeServiceOptions {
  terminology: TerminologyService;
  project: string;
  /** Throws when the request's time is spent. */
  checkBudget: () => void;
}

/** Expanded value sets kept per project and terminology state (the state token changes when content does). */
const prepared = new Map<string, Map<string, ValueSet>>();
const MAX_PREPARED = 64;

export async function codeServiceFor(
  libraries: LoadedLibrary[],
  options: CodeServiceOptions,
): Promise<TerminologyProvider> {
  const token = await options.terminology.stateToken(options.project);
  const cacheKey = `${options.project}\u0000${token}`;
  let sets = prepared.get(cacheKey);
  if (!sets) {
    sets = new Map();
    if (prepared.size >= MAX_PREPARED) prepared.delete(prepared.keys().next().value as string);
    prepared.set(cacheKey, sets);
  }
  const session = await options.terminology.session({ project: options.project, checkBudget: options.checkBudget });
  for (const library of libraries) {
    for (const def of library.elm.library.valueSets?.def ?? []) {
      const key = keyOf(def.id, def.version);
      if (sets.has(key)) continue;
      const valueSet = session.resolver.valueSet(def.id, def.version);
      if (!valueSet) {
        throw fhirError('ERR_MEASURE_INVALID', {
          measure: library.canonical,
          reason: `the value set '${def.id}${def.version ? `|${def.version}` : ''}' ("${def.name}") is not known to this server`,
        });
      }
      sets.set(
        key,
        new IndexedValueSet(
          def.id,
          def.version ?? valueSet.version,
          await codesOf(valueSet, session, library.canonical),
        ),
      );
    }
  }
  const known = sets;
  return {
    findValueSetsByOid: (oid) => [...known.entries()].filter(([k]) => k.startsWith(`${oid}|`)).map(([, v]) => v),
    findValueSet: (oid, version) => known.get(keyOf(oid, version)) ?? known.get(keyOf(oid)) ?? null,
  };
}

/**
 * A value set whose membership test is a lookup: cql-execution's own compares a code with each
 * member in turn, which for value sets of thousands of codes tested against every record of a
 * patient dominates an eCQM's run time. Strings (CQL's `'x' in "VS"`) keep the engine's rules.
 */
class IndexedValueSet extends ValueSet {
  private readonly index: Set<string>;

  constructor(oid: string, version: string | undefined, codes: Code[]) {
    super(oid, version, codes);
    this.index = new Set(codes.map((c) => `${c.system}|${c.code}`));
  }

  /** Whether the code is a member (used to leave out records before they are wrapped). */
  mayContain(system: string | undefined, code: string): boolean {
    return this.index.has(`${system}|${code}`);
  }

  override hasMatch(code: unknown): boolean {
    const codes = flatten(code);
    if (codes.some((c) => typeof c === 'string')) return super.hasMatch(code);
    return codes.some((c) => this.index.has(`${(c as Code).system}|${(c as Code).code}`));
  }
}

/** A code, a concept's codes, or a list of either, as one list (as cql-execution's toCodeList). */
function flatten(value: unknown): unknown[] {
  if (value === null || value === undefined) return [];
  if (Array.isArray(value)) return value.flatMap(flatten);
  if (typeof value === 'object' && Array.isArray((value as { codes?: unknown }).codes))
    return flatten((value as { codes: unknown[] }).codes);
  return [value];
}

function keyOf(url: string, version?: string): string {
  return `${url}|${version ?? ''}`;
}

/**
 * The value set's codes: its expansion, or (for a value set the engine cannot expand because its
 * code system is not loaded here: SNOMED CT, CPT) the codes it lists by hand, which is all
 * membership needs; otherwise membership is undecidable here (the terminology service's one rule)
 * and the measure cannot be evaluated.
 */
async function codesOf(valueSet: FhirValueSet, session: TerminologySession, library: string): Promise<Code[]> {
  const members = await session.memberCodes(valueSet);
  if ('undecidable' in members) {
    throw fhirError('ERR_MEASURE_INVALID', {
      measure: library,
      reason: `the value set '${valueSet.url}' cannot be expanded: ${members.undecidable}`,
    });
  }
  return members.codes.map((c) => new Code(c.code as string, c.system, c.version, c.display));
}
