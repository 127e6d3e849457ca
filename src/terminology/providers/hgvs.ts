import type { BuiltInTerminology } from './registry';
import { BuiltInProvider, describe, type BuiltInConcept } from './base';

/**
 * HGVS variant nomenclature (`http://varnomen.hgvs.org`): a grammar over reference sequences,
 * so its codes cannot be listed and an expansion of all of it is refused. A code is accepted when
 * it has the shape of an HGVS description, `<reference>:<type>.<change>` with a versioned
 * reference sequence (NM_004006.2:c.4375C>T, NC_000023.11:g.33038255C>A); the change itself is not
 * checked against the sequence (that needs the sequence databases this server does not hold).
 */

export const HGVS = 'http://varnomen.hgvs.org';
const SHAPE = /^(?:[A-Z]{1,2}_\d+\.\d+|LRG_\d+(?:t\d+|p\d+)?)(?:\([A-Za-z0-9_.-]+\))?:[cgmnopr]\.\S+$/;

class HgvsProvider extends BuiltInProvider {
  readonly enumerable = false;

  locate(code: string): BuiltInConcept | undefined {
    return SHAPE.test(code) ? { code, display: code } : undefined;
  }
}

export const hgvs: BuiltInTerminology = {
  resource: describe({ url: HGVS, name: 'HGVS', title: 'Human Genome Variation Society nomenclature' }),
  create() {
    return new HgvsProvider(this.resource);
  },
};
