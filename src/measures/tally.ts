import type { Coding } from 'fhir/r4';
import { addInto, type Members } from './scoring';

/** Running totals of one group over the subjects evaluated so far, overall and per stratum. */

interface Stratum {
  /** Per stratifier part (one, or one per component): the codings of the value. */
  parts: Coding[][];
  members: Members;
  observations: Map<string, number>;
}

export class GroupTally {
  readonly members: Members = new Map();
  readonly observations = new Map<string, number>();
  /** Per stratifier, its strata by value key. */
  readonly strata: Map<string, Stratum>[];

  constructor(stratifiers: number) {
    this.strata = Array.from({ length: stratifiers }, () => new Map());
  }

  add(members: Members, observations: Map<string, number>, strata: { key: string; parts: Coding[][] }[]): void {
    addInto(this.members, members);
    for (const [k, v] of observations) this.observations.set(k, v);
    strata.forEach((value, i) => {
      let stratum = this.strata[i].get(value.key);
      if (!stratum)
        this.strata[i].set(value.key, (stratum = { parts: value.parts, members: new Map(), observations: new Map() }));
      addInto(stratum.members, members);
      for (const [k, v] of observations) stratum.observations.set(k, v);
    });
  }
}

/** Supplemental data values and how many subjects had each, per supplemental data element. */
export class SupplementalTally {
  readonly values: Map<string, { coding: Coding; count: number }>[];

  constructor(elements: number) {
    this.values = Array.from({ length: elements }, () => new Map());
  }

  add(element: number, codings: Coding[]): void {
    for (const coding of codings) {
      const key = `${coding.system ?? ''}|${coding.code}`;
      const known = this.values[element].get(key);
      if (known) known.count++;
      else this.values[element].set(key, { coding, count: 1 });
    }
  }
}
