import { unpackPackage } from '../../content/fhir-package';
import { importPackage } from '../../content/package-import';
import { fhirError } from '../../fhir/errors';
import type { AppServices } from '../../services';
import { defineOperation } from '../operation';
import { SYSTEM_PROJECT } from '../../storage/store';

/** `$import-package` (this server's own): an IG package, sent in the request, loaded into storage. */
export interface ImportPackageInput {
  /** The .tgz, base64-encoded. */
  package: string;
}

export interface ImportPackageOutput {
  name: string;
  version: string;
  loaded: { type: string; created: number; updated: number; unchanged: number }[];
  skipped: { type: string; count: number }[];
}

/**
 * What a package sent over HTTP may unpack to, as a multiple of the body limit: packages compress
 * about 15 to 1 (THO: 4.6 MB to 71 MB), and a small archive must not inflate without end.
 */
export const UNPACKED_PER_BODY_BYTE = 32;

export const importPackageOperation = defineOperation<AppServices, ImportPackageInput, ImportPackageOutput>({
  definition: 'urn:fhir-tx-server:OperationDefinition:import-package',
  // It writes the system scope, which every project reads.
  operatorsOnly: true,
  handle: async (input, ctx) => {
    const { config, repository, checkResource } = ctx.services;
    const pkg = await unpackPackage(Buffer.from(input.package, 'base64'), {
      maxUnpackedBytes: config.bodyLimit * UNPACKED_PER_BODY_BYTE,
    });
    const summary = await importPackage(pkg, {
      repository: repository.in(SYSTEM_PROJECT),
      checkResource: (type, resource) => checkResource(type, resource, SYSTEM_PROJECT),
      deadline: ctx.deadline,
      tooLong: () => fhirError('ERR_OP_TIMEOUT', { code: 'import-package', ms: config.operationTimeoutMs }),
    });
    const loaded = Object.entries(summary.types).map(([type, counts]) => ({ type, ...counts }));
    ctx.log.info(
      { package: `${summary.name}#${summary.version}`, loaded, ms: summary.milliseconds },
      'package imported',
    );
    return {
      name: summary.name,
      version: summary.version,
      loaded: loaded.sort((a, b) => a.type.localeCompare(b.type)),
      skipped: Object.entries(summary.skipped)
        .map(([type, count]) => ({ type, count }))
        .sort((a, b) => a.type.localeCompare(b.type)),
    };
  },
});
