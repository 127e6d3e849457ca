import { createRequire } from 'node:module';

/**
 * The few parts of @lhncbc/ucum-lhc (NLM's UCUM library; it ships no types) this server uses:
 * parsing a unit expression, and the names of units and prefixes. Loaded on first use.
 */

export interface UcumUnit {
  name_: string;
  isMetric_: boolean;
  dim_?: { dimVec_: number[] | null } | null;
}

interface UcumUtils {
  getSpecifiedUnit(
    expression: string,
    mode: 'validate',
    suggest: boolean,
  ): { unit: UcumUnit | null; retMsg?: string[] };
}

interface UcumPrefix {
  name_: string;
}

export interface UcumLibrary {
  parse(expression: string): { unit: UcumUnit | null; messages: string[] };
  unit(code: string): UcumUnit | undefined;
  prefix(code: string): UcumPrefix | undefined;
}

let library: UcumLibrary | undefined;

export function ucumLibrary(): UcumLibrary {
  if (!library) {
    const require = createRequire(import.meta.url);
    const pkg = require('@lhncbc/ucum-lhc') as {
      UcumLhcUtils: { getInstance(): UcumUtils };
      UnitTables: { getInstance(): { getUnitByCode(code: string): UcumUnit | undefined } };
    };
    const prefixes = (
      require('@lhncbc/ucum-lhc/source-cjs/prefixTables.js') as {
        PrefixTables: { getInstance(): { getPrefixByCode(code: string): UcumPrefix | undefined | null } };
      }
    ).PrefixTables.getInstance();
    const utils = pkg.UcumLhcUtils.getInstance();
    const units = pkg.UnitTables.getInstance();
    library = {
      parse(expression) {
        const found = utils.getSpecifiedUnit(expression, 'validate', false);
        return { unit: found.unit ?? null, messages: found.retMsg ?? [] };
      },
      unit: (code) => units.getUnitByCode(code) ?? undefined,
      prefix: (code) => prefixes.getPrefixByCode(code) ?? undefined,
    };
  }
  return library;
}
