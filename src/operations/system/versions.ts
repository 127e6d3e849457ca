import type { AppServices } from '../../services';
import { defineOperation } from '../operation';

/** `$versions`: the FHIR versions this endpoint speaks (major.minor), and its default. */
export interface VersionsOutput {
  version: string[];
  default: string;
}

export const versions = defineOperation<AppServices, Record<string, never>, VersionsOutput>({
  definition: 'http://hl7.org/fhir/OperationDefinition/CapabilityStatement-versions',
  handle: () => ({ version: ['4.0'], default: '4.0' }),
});
