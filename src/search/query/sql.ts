import { INDEX_TABLES, type IndexKind } from '../../storage/index-schema';
import { SHARED_TYPES, SYSTEM_PROJECT, type StoreReader } from '../../storage/store';
import { MAX_INSTANT, MIN_INSTANT } from '../values';
import type {
  Criterion,
  DateValue,
  NumberValue,
  QuantityValue,
  ReferenceValue,
  ScalarType,
  SortKey,
  StringValue,
  TokenValue,
  TypedValue,
  UriValue,
} from './criteria';
import { SORT_COLUMN, isTextSort, normalize, escapeLike, abovePrefixes, restrictsType } from './sql-values';

/**
 * Criteria as SQL that both backends run (`?` placeholders, row values, byte-wise text
 * comparison). Each criterion is a condition on a `resources` row: its `rid` is (or is not) among
 * the rows an index table matches. Terminology criteria arrive here already resolved to codes.
 */

/** What a terminology criterion became: the (system, code) pairs that match, or "any code" for a system. */
export interface ResolvedCodes {
  pairs: { system: string | null; code: string }[];
}

type CriterionOf<K extends Criterion['kind']> = Extract<Criterion, { kind: K }>;

const TABLE_OF: Record<ScalarType, IndexKind> = {
  string: 'string',
  token: 'token',
  date: 'date',
  number: 'number',
  quantity: 'quantity',
  reference: 'reference',
  uri: 'uri',
};

/** Above every string a FHIR value holds (byte-wise): the end of a prefix range. */
const TEXT_MAX = '\u{10FFFF}';

export class SqlBuilder {
  private readonly values: unknown[] = [];
  private aliases = 0;

  /**
   * @param project every row the statement reads belongs to this project: each index and resources
   * alias is filtered by it (the lookup indexes lead with the project, so this costs nothing);
   * rows of the shared definition types may also be the system scope's, unless `ownOnly`.
   */
  constructor(
    readonly project: string,
    private readonly resolved: Map<Criterion, ResolvedCodes> = new Map(),
    private readonly ownOnly = false,
  ) {}

  /**
   * A placeholder for a value. Pieces of SQL are built in whatever order is convenient, so the
   * placeholder names its value; `finish` turns the text into `?` placeholders with the values in
   * the order they appear.
   */
  bind(value: unknown): string {
    this.values.push(value);
    return `\u0001${this.values.length - 1}\u0001`;
  }

  /** Runs a statement built with this builder's placeholders. */
  run<R extends object>(store: StoreReader, sql: string): Promise<R[]> {
    const finished = this.finish(sql);
    return store.query<R>(finished.sql, finished.params);
  }

  /** The statement with `?` placeholders, and its parameters in order. */
  finish(sql: string): { sql: string; params: unknown[] } {
    const params: unknown[] = [];
    const text = sql.replace(/\u0001(\d+)\u0001/g, (_, i: string) => {
      params.push(this.values[Number(i)]);
      return '?';
    });
    return { sql: text, params };
  }

  private alias(prefix: string): string {
    return `${prefix}${++this.aliases}`;
  }

  /** The rows of alias `x` in the builder's project, of one of `types` (all types when none). */
  scoped(x: string, types: string[]): string {
    const type = this.typeFilter(`${x}.type`, types);
    return `${this.projectFilter(x, types)}${type === '1 = 1' ? '' : ` AND ${type}`}`;
  }

  /** The project's rows, and the system scope's of the shared definition types among `types` (all when none). */
  private projectFilter(x: string, types: string[]): string {
    const own = `${x}.project = ${this.bind(this.project)}`;
    if (this.ownOnly || this.project === SYSTEM_PROJECT) return own;
    const shared = types.length === 0 ? SHARED_TYPES : types.filter((t) => SHARED_TYPES.includes(t));
    if (shared.length === 0) return own;
    if (shared.length === types.length)
      return `${x}.project IN (${this.bind(this.project)}, ${this.bind(SYSTEM_PROJECT)})`;
    return `(${own} OR (${x}.project = ${this.bind(SYSTEM_PROJECT)} AND ${x}.type IN (${shared.map((t) => this.bind(t)).join(', ')})))`;
  }

  /** `r.type = ?`, or `IN` for several types; nothing for all types. */
  typeFilter(column: string, types: string[]): string {
    if (types.length === 0) return '1 = 1';
    if (types.length === 1) return `${column} = ${this.bind(types[0])}`;
    return `${column} IN (${types.map((t) => this.bind(t)).join(', ')})`;
  }

  /** A condition on the resources row `r` (of one of `types`). */
  criterion(c: Criterion, r: string, types: string[]): string {
    switch (c.kind) {
      case 'id':
        return `${r}.id ${c.not ? 'NOT ' : ''}IN (${c.ids.map((id) => this.bind(id)).join(', ')})`;
      case 'value':
        return this.valueCriterion(c, r, types);
      case 'missing': {
        const table = c.paramType === 'composite' ? undefined : TABLE_OF[c.paramType];
        if (!table) return '1 = 1';
        const x = this.alias('x');
        return `${r}.rid ${c.missing ? 'NOT ' : ''}IN (SELECT ${x}.rid FROM ${INDEX_TABLES[table].name} ${x} WHERE ${this.scoped(x, types)} AND ${x}.param = ${this.bind(c.index)})`;
      }
      case 'terminology':
        return this.terminologyCriterion(c, r, types);
      case 'composite':
        return this.compositeCriterion(c, r, types);
      case 'chain':
        return this.chainCriterion(c, r, types);
      case 'has':
        return this.hasCriterion(c, r, types);
      case 'any':
      case 'all':
        return `(${c.of.map((sub) => this.criterion(sub, r, types)).join(c.kind === 'any' ? ' OR ' : ' AND ')})`;
      case 'compartment':
        return this.compartmentCriterion(c, r);
      default:
        return '1 = 0';
    }
  }

  private valueCriterion(c: CriterionOf<'value'>, r: string, types: string[]): string {
    const table = TABLE_OF[c.paramType];
    const x = this.alias('x');
    const negate = c.modifier === 'not';
    const matches = c.values.map((v) => this.value(x, v, c.modifier)).join(' OR ');
    return `${r}.rid ${negate ? 'NOT ' : ''}IN (SELECT ${x}.rid FROM ${INDEX_TABLES[table].name} ${x} WHERE ${this.scoped(x, types)} AND ${x}.param = ${this.bind(c.index)} AND (${matches}))`;
  }

  private terminologyCriterion(c: CriterionOf<'terminology'>, r: string, types: string[]): string {
    const codes = this.resolved.get(c);
    const negate = c.modifier === 'not-in';
    if (!codes || codes.pairs.length === 0) return negate ? '1 = 1' : '1 = 0';
    const x = this.alias('x');
    const bySystem = new Map<string | null, string[]>();
    for (const p of codes.pairs) bySystem.set(p.system, [...(bySystem.get(p.system) ?? []), p.code]);
    const matches = [...bySystem]
      .map(
        ([system, list]) =>
          `(${system === null ? `${x}.system IS NULL` : `${x}.system = ${this.bind(system)}`} AND ${x}.code IN (${list.map((code) => this.bind(code)).join(', ')}))`,
      )
      .join(' OR ');
    return `${r}.rid ${negate ? 'NOT ' : ''}IN (SELECT ${x}.rid FROM search_token ${x} WHERE ${this.scoped(x, types)} AND ${x}.param = ${this.bind(c.index)} AND (${matches}))`;
  }

  private compositeCriterion(c: CriterionOf<'composite'>, r: string, types: string[]): string {
    const tuples = c.values.map((tuple) => {
      const aliases = tuple.map(() => this.alias('c'));
      const tables = c.components.map((t, i) => `${INDEX_TABLES[TABLE_OF[t]].name} ${aliases[i]}`);
      const joins = aliases
        .slice(1)
        .map((a) => `${a}.rid = ${aliases[0]}.rid${c.tied ? ` AND ${a}.grp = ${aliases[0]}.grp` : ''}`);
      const conditions = tuple.map(
        (v, i) => `${aliases[i]}.param = ${this.bind(c.indexes[i])} AND (${this.value(aliases[i], v, undefined)})`,
      );
      return `SELECT ${aliases[0]}.rid FROM ${tables.join(', ')} WHERE ${this.scoped(aliases[0], types)} AND ${[...joins, ...conditions].join(' AND ')}`;
    });
    return `${r}.rid IN (${tuples.join(' UNION ')})`;
  }

  private chainCriterion(c: CriterionOf<'chain'>, r: string, types: string[]): string {
    const x = this.alias('x');
    const t = this.alias('t');
    const inner = this.criterion(c.next, t, c.targetTypes);
    // Index rows exist only for live resources, so a criterion with index rows needs no deleted check.
    const targets = restrictsType(c.next)
      ? `${t}.project = ${this.bind(this.project)} AND ${inner}`
      : `${this.scoped(t, c.targetTypes)} AND ${t}.deleted = FALSE AND ${inner}`;
    return `${r}.rid IN (SELECT ${x}.rid FROM search_reference ${x} WHERE ${this.scoped(x, types)} AND ${x}.param = ${this.bind(c.index)}
          AND (${x}.target_type, ${x}.target_id) IN (SELECT ${t}.type, ${t}.id FROM resources ${t} WHERE ${targets}))`;
  }

  private hasCriterion(c: CriterionOf<'has'>, r: string, types: string[]): string {
    const x = this.alias('x');
    const o = this.alias('o');
    const inner = c.next ? this.criterion(c.next, o, [c.type]) : '1 = 1';
    const sources =
      c.next && restrictsType(c.next)
        ? `${o}.project = ${this.bind(this.project)} AND ${inner}`
        : `${this.scoped(o, [c.type])} AND ${o}.deleted = FALSE AND ${inner}`;
    // With one type searched the target type is a constant, and the subquery is not correlated.
    const targetType = types.length === 1 ? this.bind(types[0]) : `${r}.type`;
    return `${r}.id IN (SELECT ${x}.target_id FROM search_reference ${x} WHERE ${this.scoped(x, [c.type])} AND ${x}.param = ${this.bind(c.index)} AND ${x}.target_type = ${targetType}
          AND ${x}.rid IN (SELECT ${o}.rid FROM resources ${o} WHERE ${sources}))`;
  }

  private compartmentCriterion(c: CriterionOf<'compartment'>, r: string): string {
    if (c.byType.length === 0) return '1 = 0';
    const x = this.alias('x');
    const byType = c.byType.map(
      ([type, indexes]) =>
        `(${x}.type = ${this.bind(type)} AND ${x}.param IN (${indexes.map((p) => this.bind(p)).join(', ')}))`,
    );
    return `${r}.rid IN (SELECT ${x}.rid FROM search_reference ${x} WHERE ${x}.project = ${this.bind(this.project)} AND (${byType.join(' OR ')})
          AND ${x}.target_type = ${this.bind(c.targetType)} AND ${x}.target_id = ${this.bind(c.targetId)})`;
  }

  /** Whether the index row `x` holds a value that matches. */
  value(x: string, v: TypedValue, modifier: string | undefined): string {
    switch (v.type) {
      case 'string':
        return this.string(x, v.value, modifier);
      case 'token':
        return this.token(x, v.value, modifier);
      case 'date':
        return this.range(x, v.value, 'date');
      case 'number':
        return this.range(x, v.value, 'number');
      case 'quantity':
        return this.quantity(x, v.value);
      case 'reference':
        return this.reference(x, v.value);
      case 'uri':
        return this.uri(x, v.value, modifier);
      default:
        return '1 = 0';
    }
  }

  private string(x: string, v: StringValue, modifier: string | undefined): string {
    if (modifier === 'exact') return `${x}.exact = ${this.bind(v.text)}`;
    const norm = normalize(v.text);
    if (modifier === 'contains') return `${x}.norm LIKE ${this.bind(`%${escapeLike(norm)}%`)} ESCAPE '\\'`;
    return this.prefix(`${x}.norm`, norm);
  }

  private prefix(column: string, prefix: string): string {
    return `(${column} >= ${this.bind(prefix)} AND ${column} < ${this.bind(prefix + TEXT_MAX)})`;
  }

  private token(x: string, v: TokenValue, modifier: string | undefined): string {
    if (modifier === 'text') {
      const words = normalize(v.code ?? '');
      return `(${x}.text LIKE ${this.bind(`${escapeLike(words)}%`)} ESCAPE '\\' OR ${x}.text LIKE ${this.bind(`% ${escapeLike(words)}%`)} ESCAPE '\\')`;
    }
    const parts: string[] = [];
    if (v.code !== undefined) parts.push(`${x}.code = ${this.bind(v.code)}`);
    if (v.system === null) parts.push(`${x}.system IS NULL`);
    else if (v.system !== undefined) parts.push(`${x}.system = ${this.bind(v.system)}`);
    return parts.length > 0 ? `(${parts.join(' AND ')})` : '1 = 1';
  }

  /**
   * Prefixes over ranges (R4 search.html): the value's range [vl, vh] against the stored [low,
   * high]. eq: stored within; gt/lt: extends beyond; ge/le: either; sa/eb: wholly after/before;
   * ap: overlaps the value widened by 10% of its distance from now (dates) or of itself (numbers).
   */
  private range(
    x: string,
    v: DateValue | NumberValue,
    kind: 'date' | 'number',
    columns = { low: `${x}.low`, high: `${x}.high` },
  ): string {
    const { low, high } = columns;
    const vl = v.range.low;
    const vh = v.range.high;
    // Dates are whole milliseconds in a BIGINT column: a fraction would not bind on PostgreSQL.
    const b = (n: number) => this.bind(kind === 'date' ? Math.round(n) : n);
    switch (v.prefix) {
      case 'eq':
        return `(${low} >= ${b(vl)} AND ${high} <= ${b(vh)})`;
      case 'ne':
        return `(${low} < ${b(vl)} OR ${high} > ${b(vh)})`;
      case 'gt':
        return `(${high} > ${b(vh)})`;
      case 'lt':
        return `(${low} < ${b(vl)})`;
      case 'ge':
        return `(${high} > ${b(vh)} OR (${low} >= ${b(vl)} AND ${high} <= ${b(vh)}))`;
      case 'le':
        return `(${low} < ${b(vl)} OR (${low} >= ${b(vl)} AND ${high} <= ${b(vh)}))`;
      case 'sa':
        return `(${low} > ${b(vh)})`;
      case 'eb':
        return `(${high} < ${b(vl)})`;
      case 'ap': {
        const center = 'value' in v ? v.value : (vl + vh) / 2;
        const slack = kind === 'date' ? Math.abs(Date.now() - center) * 0.1 : Math.abs(center) * 0.1;
        return `(${low} <= ${b(Math.min(vh + slack, kind === 'date' ? MAX_INSTANT : Number.MAX_VALUE))} AND ${high} >= ${b(Math.max(vl - slack, kind === 'date' ? MIN_INSTANT : -Number.MAX_VALUE))})`;
      }
      default:
        return '1 = 0';
    }
  }

  private quantity(x: string, v: QuantityValue): string {
    const parts: string[] = [];
    if (v.system && v.code) {
      const canonical = v.canonical;
      if (canonical) {
        // Commensurable UCUM units compare in canonical units; others by system and code.
        const inCanonical = this.range(
          x,
          { prefix: v.prefix, value: canonical.value, range: canonical.range },
          'number',
          { low: `${x}.canon_low`, high: `${x}.canon_high` },
        );
        return `((${x}.canon_code = ${this.bind(canonical.code)} AND ${inCanonical}) OR (${x}.system = ${this.bind(v.system)} AND ${x}.code = ${this.bind(v.code)} AND ${this.range(x, v, 'number')}))`;
      }
      parts.push(`${x}.system = ${this.bind(v.system)} AND ${x}.code = ${this.bind(v.code)}`);
    } else if (v.code) {
      parts.push(`(${x}.code = ${this.bind(v.code)} OR ${x}.unit = ${this.bind(v.code)})`);
    } else if (v.system) {
      parts.push(`${x}.system = ${this.bind(v.system)}`);
    }
    parts.push(this.range(x, v, 'number'));
    return `(${parts.join(' AND ')})`;
  }

  private reference(x: string, v: ReferenceValue): string {
    if (v.id !== undefined) {
      const type = v.type !== undefined ? ` AND ${x}.target_type = ${this.bind(v.type)}` : '';
      return `(${x}.target_id = ${this.bind(v.id)}${type})`;
    }
    if (v.url !== undefined) {
      const version = v.version !== undefined ? ` AND ${x}.version = ${this.bind(v.version)}` : '';
      return `(${x}.url = ${this.bind(v.url)}${version})`;
    }
    return '1 = 0';
  }

  private uri(x: string, v: UriValue, modifier: string | undefined): string {
    if (modifier === 'below')
      return `(${x}.value = ${this.bind(v.value)} OR ${this.prefix(`${x}.value`, v.value.endsWith('/') ? v.value : `${v.value}/`)})`;
    if (modifier === 'above') {
      const prefixes = abovePrefixes(v.value);
      return `${x}.value IN (${prefixes.map((p) => this.bind(p)).join(', ')})`;
    }
    return `${x}.value = ${this.bind(v.value)}`;
  }

  /** A sort key's value for the resources row `r`: missing values sort last either way. */
  sortExpression(key: SortKey, r: string): string {
    if (key.paramType === 'id') return `${r}.id`;
    const table = INDEX_TABLES[TABLE_OF[key.paramType as ScalarType] ?? 'date'].name;
    const column = SORT_COLUMN[key.paramType as ScalarType] ?? 'low';
    const s = this.alias('s');
    const fn = key.descending ? 'MAX' : 'MIN';
    const pick =
      key.descending && (key.paramType === 'date' || key.paramType === 'number' || key.paramType === 'quantity')
        ? `${s}.high`
        : `${s}.${column}`;
    const [lowest, highest] =
      key.paramType === 'date' ? [MIN_INSTANT, MAX_INSTANT] : [-Number.MAX_VALUE, Number.MAX_VALUE];
    const missing = isTextSort(key)
      ? this.bind(key.descending ? '' : TEXT_MAX)
      : this.bind(key.descending ? lowest : highest);
    const param = key.rowsOf
      ? `${s}.param IN (${key.rowsOf.map((p) => this.bind(p)).join(', ')})`
      : `${s}.param = ${this.bind(key.index)}`;
    return `COALESCE((SELECT ${fn}(${pick}) FROM ${table} ${s} WHERE ${s}.rid = ${r}.rid AND ${param}), ${missing})`;
  }
}
