import type { ValueSetComposeIncludeFilter } from 'fhir/r4';

/**
 * R5 added filter operators (child-of, descendent-leaf) that an R4 ValueSet can only carry as a
 * cross-version extension on `op`; this reads either form.
 */
const R5_FILTER_OP = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-ValueSet.compose.include.filter.op';

export function filterOp(filter: ValueSetComposeIncludeFilter): string {
  if (filter.op) return filter.op;
  const element = (filter as { _op?: { extension?: { url: string; valueCode?: string }[] } })._op;
  return element?.extension?.find((e) => e.url === R5_FILTER_OP)?.valueCode ?? '';
}
