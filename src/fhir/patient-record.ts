/**
 * What a patient's record holds beyond its compartment: the resources of these types that the
 * compartment's resources refer to, because they are needed to read it (who, where, what). Patient
 * `$everything` and Patient/Group level Bulk export both add them, so the two agree.
 */
export const SUPPORTING_TYPES: readonly string[] = [
  'Practitioner',
  'PractitionerRole',
  'Organization',
  'Location',
  'Medication',
  'Substance',
  'HealthcareService',
  'Endpoint',
  'Group',
  'Binary',
];
