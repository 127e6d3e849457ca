import type { BuiltInTerminology } from './registry';
import { FilterNotSupportedError, type ConceptFilter, type Designation } from './provider';
import { message } from '../messages';
import { BuiltInProvider, DISPLAY_USE, describe, type BuiltInConcept } from './base';
import { describeExpression, firstUnknownUnit, withoutAnnotationText } from './ucum-expression';
import { ucumLibrary, type UcumUnit } from './ucum-library';

/**
 * UCUM (`http://unitsofmeasure.org`, version 2.2): every valid UCUM expression is a code, checked
 * by NLM's @lhncbc/ucum-lhc. The display is the expression itself; $lookup adds it in words
 * ("(milligram) / (deciliter)") and, where the FHIR value set of common units names it, that
 * name. The one filter is `canonical = <unit>`: the units of the same dimension (kg and g/mol are
 * `g`; mL is `m3`). A grammar: all of UCUM cannot be listed, so an expansion is made from the
 * common units value set and marked unclosed.
 */

export const UCUM = 'http://unitsofmeasure.org';
export const UCUM_COMMON = 'http://hl7.org/fhir/ValueSet/ucum-common';
const SYNONYM_USE = { system: 'http://snomed.info/sct', code: '900000000000013009' };
/** UCUM's base units, in the order of a dimension vector. */
const BASE_UNITS = ['m', 's', 'g', 'rad', 'K', 'C', 'cd'];

interface UnitConcept extends BuiltInConcept {
  readonly unit: UcumUnit;
}

class UcumProvider extends BuiltInProvider<UnitConcept> {
  readonly enumerable = false;
  override readonly expansionBasis = UCUM_COMMON;
  private readonly found = new Map<string, UnitConcept | null>();

  constructor(
    resource: BuiltInTerminology['resource'],
    /** Names the common-units value set gives its codes, read when first needed. */
    private readonly commonNames: () => Map<string, string>,
  ) {
    super(resource);
  }

  locate(code: string): UnitConcept | undefined {
    let concept = this.found.get(code);
    if (concept === undefined) {
      const { unit } =
        code.trim() === code && code !== '' ? ucumLibrary().parse(withoutAnnotationText(code)) : { unit: null };
      concept = unit ? { code, display: code, unit } : null;
      if (this.found.size > 10_000) this.found.clear();
      this.found.set(code, concept);
    }
    return concept ?? undefined;
  }

  override designations(concept: UnitConcept): Designation[] {
    const list = super.designations(concept);
    list.push({
      language: 'en',
      use: DISPLAY_USE,
      value: describeExpression(ucumLibrary(), concept.code),
      status: 'active',
      isDisplay: false,
    });
    const common = this.commonNames().get(concept.code);
    if (common) list.push({ language: 'en', use: SYNONYM_USE, value: common, status: 'active', isDisplay: false });
    return list;
  }

  explainUnknown(code: string): string | undefined {
    const unknown = firstUnknownUnit(ucumLibrary(), withoutAnnotationText(code));
    const reason = unknown
      ? message('UCUM_UNKNOWN_UNIT', unknown.unit, unknown.at)
      : (ucumLibrary().parse(withoutAnnotationText(code)).messages[0] ?? '').trim();
    return reason ? message('UCUM_INVALID_EXPRESSION', code, reason) : undefined;
  }

  override filter(property: string, op: string, value: string): ConceptFilter<UnitConcept> {
    const wanted = property === 'canonical' && op === '=' ? this.locate(value) : undefined;
    if (!wanted) throw new FilterNotSupportedError(property, op, value);
    const dimension = canonicalForm(wanted.unit);
    return {
      contains: (c) => canonicalForm(c.unit) === dimension,
      members: () => [],
      explain: (c) => message('UCUM_CANONICAL_MISMATCH', c.code, canonicalForm(c.unit), value),
    };
  }
}

/** The unit's dimension in base units (`m3`, `g.m-3`), or '' where the library gives none. */
function canonicalForm(unit: UcumUnit): string {
  const vector = unit.dim_?.dimVec_;
  if (!vector) return '';
  return BASE_UNITS.map((symbol, i) => ({ symbol, power: vector[i] ?? 0 }))
    .filter((b) => b.power !== 0)
    .sort((a, b) => a.symbol.localeCompare(b.symbol))
    .map((b) => (b.power === 1 ? b.symbol : `${b.symbol}${b.power}`))
    .join('.');
}

export function ucum(commonNames: () => Map<string, string>): BuiltInTerminology {
  return {
    resource: describe({ url: UCUM, version: '2.2', name: 'UCUM', title: 'Unified Code for Units of Measure' }),
    create() {
      return new UcumProvider(this.resource, commonNames);
    },
  };
}
