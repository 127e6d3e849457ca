import type { ValueSet } from 'fhir/r4';
import type { BuiltInTerminology } from './registry';
import { bcp47 } from './bcp47';
import { hgvs } from './hgvs';
import { iso3166 } from './iso3166';
import { iso4217 } from './iso4217';
import { mimeTypes } from './mime';
import { UCUM, UCUM_COMMON, ucum } from './ucum';

/**
 * The terminologies this server knows without a CodeSystem resource for them. `findValueSet`
 * reads the bundled content, for what a provider takes from a FHIR value set (UCUM's common
 * unit names).
 */
export function builtInTerminologies(findValueSet: (url: string) => ValueSet | undefined): BuiltInTerminology[] {
  let common: Map<string, string> | undefined;
  const commonUnitNames = () => {
    if (!common) {
      common = new Map();
      for (const include of findValueSet(UCUM_COMMON)?.compose?.include ?? []) {
        if (include.system !== UCUM) continue;
        for (const c of include.concept ?? []) if (c.display && !common.has(c.code)) common.set(c.code, c.display);
      }
    }
    return common;
  };
  return [ucum(commonUnitNames), bcp47, iso3166, iso4217, mimeTypes, hgvs];
}
