import type { Resource } from 'fhir/r4';
import {
  DateTime,
  Interval,
  Library,
  PatientContext,
  Repository,
  type PatientObject,
  type TerminologyProvider,
} from 'cql-execution';
import { fhirError, isFhirError } from '../fhir/errors';
import * as ElmOperators from 'cql-execution/lib/elm/expressions.js';
import type { LibraryClosure, LoadedLibrary } from './library-closure';

/**
 * The CQL side of an evaluation: the libraries of a closure compiled once per request by
 * cql-execution (the CQF reference engine for JavaScript), then expressions and functions run
 * in one patient's context. Results are cql-execution values; `toFhir` turns the FHIR objects
 * among them back into resources.
 */

/** The CQL parameter every published measure declares for the period asked for. */
const MEASUREMENT_PERIOD = 'Measurement Period';

interface ExpressionDef {
  context?: string;
  execute(ctx: PatientContext): Promise<unknown>;
}

interface FunctionDef {
  parameters: { name: string }[];
  expression: { execute(ctx: unknown): Promise<unknown> };
}

/** One patient's evaluation: the context that caches its expressions' results. */
export interface CqlSubject {
  context: PatientContext;
}

export class CqlRunner {
  private readonly library: Library;
  private readonly parameters: Record<string, unknown>;
  private readonly now = DateTime.fromJSDate(new Date(), 0);

  constructor(
    closure: LibraryClosure,
    private readonly codes: TerminologyProvider,
    period: { start: string; end: string },
  ) {
    this.library = compiled(closure);
    this.parameters = {};
    if (this.library.parameters[MEASUREMENT_PERIOD] !== undefined) {
      this.parameters[MEASUREMENT_PERIOD] = new Interval(
        DateTime.parse(period.start),
        DateTime.parse(period.end),
        true,
        true,
      );
    }
  }

  subject(patient: PatientObject): CqlSubject {
    return { context: new PatientContext(this.library, patient, this.codes, this.parameters, this.now) };
  }

  /** Whether `name` (or `Alias.name`) is a definition of the main library or of one it includes. */
  has(name: string): boolean {
    return this.find(name) !== undefined;
  }

  /** Whether `name` (or `Alias.name`) is a function of the library (a measure observation's). */
  hasFunction(name: string): boolean {
    const [alias, local] = splitName(this.library, name);
    const lib = alias ? (this.library.includes[alias] as Library) : this.library;
    return ((lib.getFunction(local) as FunctionDef[] | undefined) ?? []).some((f) => Array.isArray(f.parameters));
  }

  /** The value of a definition, for this subject. */
  async value(subject: CqlSubject, name: string): Promise<unknown> {
    const found = this.find(name);
    if (!found)
      throw fhirError('ERR_MEASURE_EVALUATION', {
        expression: name,
        reason: 'no definition of that name in the library',
      });
    const ctx = found.alias ? subject.context.getLibraryContext(found.alias) : subject.context;
    if ('execute' in found.def) return guarded(name, () => (found.def as ExpressionDef).execute(ctx as PatientContext));
    return this.call(subject, name, []);
  }

  /** Calls a function of the library (a measure observation) with these arguments. */
  async call(subject: CqlSubject, name: string, args: unknown[]): Promise<unknown> {
    const [alias, local] = splitName(this.library, name);
    const lib = alias ? (this.library.includes[alias] as Library) : this.library;
    const defs = ((lib.getFunction(local) as FunctionDef[] | undefined) ?? []).filter(
      (f) => Array.isArray(f.parameters) && f.parameters.length === args.length,
    );
    const def = defs[defs.length - 1];
    if (!def) {
      if (args.length === 0 && this.has(name)) return this.value(subject, name);
      throw fhirError('ERR_MEASURE_EVALUATION', {
        expression: name,
        reason: `no function of that name taking ${args.length} argument(s)`,
      });
    }
    const base = alias ? subject.context.getLibraryContext(alias) : subject.context;
    const child = base.childContext();
    def.parameters.forEach((p, i) => child.set(p.name, args[i]));
    return guarded(name, () => def.expression.execute(child));
  }

  /** The records the subject's retrieves returned so far (across libraries). */
  evaluatedRecords(subject: CqlSubject): Resource[] {
    const contexts = [
      subject.context,
      ...Object.values(subject.context.library_context as Record<string, PatientContext>),
    ];
    return contexts.flatMap((c) =>
      (c.evaluatedRecords as unknown[]).map(toFhir).filter((r): r is Resource => r !== undefined),
    );
  }

  private find(name: string): { alias?: string; def: ExpressionDef | FunctionDef[] } | undefined {
    const own = this.library.expressions[name] as ExpressionDef | undefined;
    if (own) return { def: own };
    const [alias, local] = splitName(this.library, name);
    if (!alias) return undefined;
    const def = (this.library.includes[alias] as Library).expressions[local] as ExpressionDef | undefined;
    return def ? { alias, def } : undefined;
  }
}

/** Compiled libraries by the identities of their closure (expression trees hold no patient state). */
const compiledLibraries = new Map<string, Library>();
const MAX_COMPILED = 32;

function compiled(closure: LibraryClosure): Library {
  const key = closure.all.map((l) => l.identity).join('\u0001');
  let library = compiledLibraries.get(key);
  if (library) return library;
  for (const l of closure.all) checkOperators(l);
  const data = Object.fromEntries(closure.all.map((l) => [l.canonical, l.elm]));
  try {
    library = new Library(closure.main.elm, new Repository(data));
  } catch (err) {
    throw fhirError('ERR_MEASURE_ELM_INVALID', { library: closure.main.canonical, reason: messageOf(err) });
  }
  if (compiledLibraries.size >= MAX_COMPILED) compiledLibraries.delete(compiledLibraries.keys().next().value as string);
  compiledLibraries.set(key, library);
  return library;
}

/**
 * cql-execution builds an operator it does not know as null (and the definition then answers
 * null, silently): an ELM node whose type is neither an operator it implements nor a type
 * specifier is refused up front, naming it.
 */
function checkOperators(library: LoadedLibrary): void {
  const known = ElmOperators as unknown as Record<string, unknown>;
  const visit = (value: unknown, where: string): void => {
    if (Array.isArray(value)) return value.forEach((v) => visit(v, where));
    if (typeof value !== 'object' || value === null) return;
    const node = value as Record<string, unknown>;
    const type = node.type;
    if (typeof type === 'string' && typeof known[type] !== 'function' && !type.endsWith('TypeSpecifier')) {
      throw fhirError('ERR_MEASURE_ELM_INVALID', {
        library: library.canonical,
        reason: `'${where}' uses the operator '${type.slice(0, 60)}', which the CQL engine does not implement`,
      });
    }
    for (const [k, v] of Object.entries(node)) if (k !== 'annotation') visit(v, where);
  };
  for (const def of library.elm.library.statements?.def ?? [])
    visit((def as { expression?: unknown }).expression, def.name);
}

/** `SDE.SDE Sex` -> ['SDE', 'SDE Sex'] when SDE is an include's alias; else [undefined, name]. */
function splitName(library: Library, name: string): [string | undefined, string] {
  const dot = name.indexOf('.');
  if (dot > 0 && library.includes[name.slice(0, dot)] !== undefined)
    return [name.slice(0, dot), name.slice(dot + 1).replace(/^"(.*)"$/, '$1')];
  return [undefined, name];
}

async function guarded(expression: string, work: () => Promise<unknown>): Promise<unknown> {
  try {
    return await work();
  } catch (err) {
    if (isFhirError(err)) throw err;
    throw fhirError('ERR_MEASURE_EVALUATION', { expression, reason: messageOf(err) });
  }
}

function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.slice(0, 300);
}

/** The resource behind a cql-exec-fhir object, or undefined for any other value. */
export function toFhir(value: unknown): Resource | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const json = (value as { _json?: unknown })._json;
  if (typeof json === 'object' && json !== null && typeof (json as Resource).resourceType === 'string')
    return json as Resource;
  return undefined;
}
