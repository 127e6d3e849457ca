import type { Patient } from 'fhir/r4';

/**
 * FHIRPath that costs the engine about a minute (and gigabytes) on a 150 KB resource: the hostile
 * input of the FHIRPath budget tests (subscriptions, stored invariants, hardening).
 */

/** A Patient of about 150 KB: 3,300 names of two given names each. */
export function largePatient(names = 3300): Patient {
  return {
    resourceType: 'Patient',
    name: Array.from({ length: names }, (_, i) => ({ family: `Family${i}`, given: [`Given${i}`, `Other${i}`] })),
  };
}

/** Over `largePatient()`: 3,300 x 6,600 items built, a cross product. `variable` is `current` (criteria) or `resource` (invariants). */
export function crossProduct(variable: 'current' | 'resource'): string {
  return `name.select(%${variable}.name.given).count() > 0`;
}
