import type { ValueSet, ValueSetComposeIncludeFilter } from 'fhir/r4';
import type { Resolver } from './resolver';
import type { TxParams } from './params';

/**
 * R5 added filter operators (child-of, descendent-leaf) that an R4 ValueSet can only carry as a
 * cross-version extension on `op`; this reads either form.
 */
const R5_FILTER_OP = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-ValueSet.compose.include.filter.op';

/** Value sets importing value sets deeper than this are refused as too costly (no real one comes close). */
export const MAX_IMPORT_DEPTH = 100;

export function filterOp(filter: ValueSetComposeIncludeFilter): string {
  if (filter.op) return filter.op;
  const element = (filter as { _op?: { extension?: { url: string; valueCode?: string }[] } })._op;
  return element?.extension?.find((e) => e.url === R5_FILTER_OP)?.valueCode ?? '';
}

/** An imported value set: contained in the host (`#id`), or found by canonical (`url|version`). */
export function resolveImport(host: ValueSet, resolver: Resolver, pinned: string): ValueSet | undefined {
  if (pinned.startsWith('#')) {
    return host.contained?.find((r): r is ValueSet => r.resourceType === 'ValueSet' && r.id === pinned.slice(1));
  }
  const [url, version] = pinned.split('|');
  return resolver.valueSet(url, version);
}

/** A value set import with the version a default/force-valueset-version rule gives it. */
export function pinImport(params: TxParams, url: string): { pinned: string; byRule: boolean } {
  if (url.startsWith('#')) return { pinned: url, byRule: false };
  const [base, stated] = url.split('|');
  const version = params.versionFor(base, stated, true);
  if (!version) return { pinned: url, byRule: false };
  const byRule = !stated && params.rulesFor(base, true).some((r) => r.version === version);
  return { pinned: `${base}|${version}`, byRule };
}
