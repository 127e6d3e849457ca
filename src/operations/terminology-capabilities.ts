import type { CapabilityStatement, TerminologyCapabilities, TerminologyCapabilitiesCodeSystem } from 'fhir/r4';
import type { Resolver } from '../terminology/service';
import type { OperationRegistry } from './registry';

/**
 * What the server advertises as a terminology server: the HL7 tx-ecosystem features on its
 * CapabilityStatement, and a TerminologyCapabilities (`metadata?mode=terminology`) built from
 * the registry and the content it holds, so neither can drift from what it does.
 */

const FEATURE = 'http://hl7.org/fhir/uv/application-feature/StructureDefinition/feature';
/** The version of the HL7 terminology test suite this server is judged against (tx-tests history 1.90). */
const TX_TESTS_VERSION = '1.9.0';
const EXPAND_DEFINITION = 'http://hl7.org/fhir/OperationDefinition/ValueSet-expand';
/** $expand inputs that name what to expand rather than how: not expansion parameters. */
const NOT_EXPANSION_PARAMETERS = new Set(['url', 'valueSet', 'valueSetVersion', 'context', 'contextDirection', 'date']);

function feature(definition: string, value: { valueCode?: string; valueBoolean?: boolean }) {
  return {
    url: FEATURE,
    extension: [
      { url: 'definition', valueCanonical: definition },
      { url: 'value', ...value },
    ],
  };
}

export function decorateTerminologyServer(statement: CapabilityStatement): void {
  statement.extension = [
    ...(statement.extension ?? []),
    feature('http://hl7.org/fhir/uv/tx-tests/FeatureDefinition/test-version', { valueCode: TX_TESTS_VERSION }),
    feature('http://hl7.org/fhir/uv/tx-ecosystem/FeatureDefinition/CodeSystemAsParameter', { valueBoolean: true }),
  ];
  statement.instantiates = ['http://hl7.org/fhir/CapabilityStatement/terminology-server'];
}

export function terminologyCapabilities<S>(
  registry: OperationRegistry<S>,
  resolver: Resolver,
  software: { name: string; version: string },
): TerminologyCapabilities {
  const expand = registry.operations.find((op) => op.spec.url === EXPAND_DEFINITION);
  const parameters = (expand?.spec.inputs ?? [])
    .map((p) => p.name)
    .filter((name) => !NOT_EXPANSION_PARAMETERS.has(name))
    .sort();
  const codeSystems: TerminologyCapabilitiesCodeSystem[] = resolver.codeSystemCatalogue().map(({ url, versions }) => {
    const entry: TerminologyCapabilitiesCodeSystem = { uri: url };
    if (versions.length > 0) entry.version = versions.map((code) => ({ code }));
    return entry;
  });
  return {
    resourceType: 'TerminologyCapabilities',
    url: `urn:${software.name}:TerminologyCapabilities`,
    version: software.version,
    name: software.name.replace(/[^A-Za-z0-9_]/g, '_'),
    title: `${software.name} terminology capabilities`,
    status: 'active',
    date: new Date().toISOString(),
    kind: 'instance',
    software: { name: software.name, version: software.version },
    codeSystem: codeSystems,
    expansion: {
      hierarchical: true,
      paging: true,
      incomplete: false,
      parameter: parameters.map((name) => ({ name })),
      textFilter: 'Words of the filter, each matching the start of a word of the code or a designation',
    },
    codeSearch: 'all',
    validateCode: { translations: false },
    translation: { needsMap: false },
  };
}
