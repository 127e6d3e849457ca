import type { BuiltInTerminology } from './registry';
import { describe, TableProvider, type BuiltInConcept } from './base';

/**
 * ISO 4217 currency codes (`urn:iso:std:iso:4217`): the codes and English names Node's ICU data
 * holds (Intl), so the table follows the runtime's CLDR release rather than a copy kept here.
 */

export const ISO_4217 = 'urn:iso:std:iso:4217';

function concepts(): BuiltInConcept[] {
  const names = new Intl.DisplayNames(['en'], { type: 'currency', fallback: 'none' });
  return Intl.supportedValuesOf('currency').map((code) => ({ code, display: names.of(code) ?? code }));
}

export const iso4217: BuiltInTerminology = {
  resource: describe({ url: ISO_4217, name: 'Currencies', title: 'ISO 4217 Currency Codes' }),
  create() {
    return new TableProvider(this.resource, concepts());
  },
};
