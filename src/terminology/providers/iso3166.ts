import type { BuiltInTerminology } from './registry';
import { describe, TableProvider, type BuiltInConcept } from './base';
import { ISO_3166_COUNTRIES } from './data/iso3166';

/**
 * ISO 3166-1 country codes (`urn:iso:std:iso:3166`), version 2018 as the HL7 terminology ecosystem
 * serves it: every country by its alpha-2, alpha-3 and numeric code, all with the same English
 * short name, and the alpha-2 codes ISO 3166-1 leaves to users (AA, QM-QZ, XA-XZ, ZZ), named
 * "User-assigned" unless common use gives them a name (XK Kosovo, XX, XZ, ZZ).
 */

export const ISO_3166 = 'urn:iso:std:iso:3166';
export const USER_ASSIGNED = 'User-assigned';

const NAMED_USER_CODES: Record<string, string> = {
  XK: 'Kosovo',
  XX: 'Unknown',
  XZ: 'International Waters',
  ZZ: 'Unknown or Invalid Territory',
};

function userAssignedCodes(): string[] {
  const letters = (from: string, to: string) => {
    const out: string[] = [];
    for (let c = from.charCodeAt(0); c <= to.charCodeAt(0); c++) out.push(String.fromCharCode(c));
    return out;
  };
  return ['AA', ...letters('M', 'Z').map((l) => `Q${l}`), ...letters('A', 'Z').map((l) => `X${l}`), 'ZZ'];
}

function concepts(): BuiltInConcept[] {
  const list: BuiltInConcept[] = [];
  for (const line of ISO_3166_COUNTRIES.split('\n')) {
    if (!line) continue;
    const [alpha2, alpha3, numeric, name, alpha2Name] = line.split('|');
    list.push({ code: alpha2, display: alpha2Name ?? name });
    for (const code of [alpha3, numeric]) list.push({ code, display: name });
  }
  for (const code of userAssignedCodes())
    list.push({ code, display: NAMED_USER_CODES[code] ?? USER_ASSIGNED, userAssigned: true });
  return list;
}

export const iso3166: BuiltInTerminology = {
  resource: describe({
    url: ISO_3166,
    version: '2018',
    name: 'ISO3166Part1',
    title: 'ISO 3166-1 Codes for the representation of names of countries',
  }),
  create() {
    return new TableProvider(this.resource, concepts());
  },
};
