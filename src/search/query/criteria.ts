import type { Range } from '../values';

/**
 * A search as the server understands it, after parsing and before SQL: criteria (all must hold),
 * each made of values (any may match), plus how to present the result.
 */

export type Prefix = 'eq' | 'ne' | 'gt' | 'lt' | 'ge' | 'le' | 'sa' | 'eb' | 'ap';

export interface StringValue {
  text: string;
}

/** `system|code`: system undefined means any system; null means "no system" (`|code`). */
export interface TokenValue {
  system?: string | null;
  code?: string;
}

export interface DateValue {
  prefix: Prefix;
  range: Range;
}

export interface NumberValue {
  prefix: Prefix;
  value: number;
  range: Range;
}

export interface QuantityValue extends NumberValue {
  system?: string;
  code?: string;
  /** A UCUM value in canonical units, to compare with quantities in commensurable units. */
  canonical?: { code: string; value: number; range: Range };
}

export interface ReferenceValue {
  type?: string;
  id?: string;
  url?: string;
  version?: string;
}

export interface UriValue {
  value: string;
}

export type ScalarType = 'string' | 'token' | 'date' | 'number' | 'quantity' | 'reference' | 'uri';

export type TypedValue =
  | { type: 'string'; value: StringValue }
  | { type: 'token'; value: TokenValue }
  | { type: 'date'; value: DateValue }
  | { type: 'number'; value: NumberValue }
  | { type: 'quantity'; value: QuantityValue }
  | { type: 'reference'; value: ReferenceValue }
  | { type: 'uri'; value: UriValue };

export type Criterion =
  /** `_id` (the resource's own id). */
  | { kind: 'id'; ids: string[]; not: boolean }
  /** A parameter's values (any of them), with its modifier. `index` is the parameter's name in the index. */
  | { kind: 'value'; index: string; paramType: ScalarType; modifier?: string; values: TypedValue[] }
  /** `:missing=true|false`. */
  | { kind: 'missing'; index: string; paramType: ScalarType | 'composite'; missing: boolean }
  /** A token `:in`/`:not-in`/`:below`/`:above`: matched against the codes the terminology engine accepts. */
  | {
      kind: 'terminology';
      index: string;
      modifier: 'in' | 'not-in' | 'below' | 'above';
      values: { system?: string; code?: string; valueSet?: string }[];
    }
  /** Composite: each value a tuple of component values, all within one element (rows under `indexes`, sharing `grp` when `tied`). */
  | {
      kind: 'composite';
      index: string;
      indexes: string[];
      tied: boolean;
      components: ScalarType[];
      values: TypedValue[][];
    }
  /** Chaining: the reference parameter points at a resource (of one of the types) that meets `next`. */
  | { kind: 'chain'; index: string; targetTypes: string[]; next: Criterion }
  /** Reverse chaining: some resource of `type` points here through its parameter `index` and meets `next`. */
  | { kind: 'has'; type: string; index: string; next: Criterion | undefined }
  /**
   * A parameter whose rows are other parameters' (`CompiledParam.union`): `any` of their criteria
   * holds (a value found in one of them), or, for what says a value is absent (`:not`, `:not-in`,
   * `:missing=true`), `all` of theirs do.
   */
  | { kind: 'any' | 'all'; index: string; of: Criterion[] }
  /** A compartment: the resource points at `Type/id` through any of its type's parameters. */
  | { kind: 'compartment'; byType: [string, string[]][]; targetType: string; targetId: string };

export interface SortKey {
  index: string;
  /** A union parameter's: the parameters whose rows hold its values. */
  rowsOf?: string[];
  paramType: ScalarType | 'id' | 'lastUpdated';
  descending: boolean;
}

export interface Include {
  /** The type whose reference parameter is followed (`*` for any). */
  sourceType: string;
  /** The reference parameter (`*` for all of them). */
  param: string;
  targetType?: string;
  iterate: boolean;
}

export type TotalMode = 'none' | 'estimate' | 'accurate';
export type SummaryMode = 'true' | 'false' | 'text' | 'data' | 'count';

export interface SearchQuery {
  /** The types searched (one at type level; several or none = all at system level). */
  types: string[];
  criteria: Criterion[];
  sort: SortKey[];
  count: number;
  total: TotalMode;
  summary?: SummaryMode;
  elements?: string[];
  include: Include[];
  revinclude: Include[];
  /** The parameters as understood, for the self link (unknown ones left out). */
  understood: [string, string][];
}
