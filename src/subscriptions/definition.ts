import type { Extension, Subscription } from 'fhir/r4';
import { FhirError, fhirError } from '../fhir/errors';
import { compileExpression } from '../fhir/fhirpath/engine';
import type { IndexExtractor } from '../search/extract';
import { memoryFilter, type ResourceFilter } from '../search/memory-filter';
import type { SearchParameterRegistry } from '../search/registry';

/**
 * A Subscription as the server runs it: its criteria compiled once (the search string into an
 * in-memory filter with the index's own value extraction; the FHIRPath criteria extension into a
 * compiled expression), its channel and its Medplum extensions read. The same reading checks a
 * Subscription before it is stored, so what is stored always compiles.
 */

/** The extensions read here: Medplum's, and our own for the delivery mode. */
export const SUBSCRIPTION_EXTENSIONS = {
  /** valueCode create | update | delete: which interactions notify (absent: create and update). Repeatable. */
  supportedInteraction: 'https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction',
  /**
   * valueString: the key of the X-Signature HMAC-SHA256 of each rest-hook body. Medplum's own URL
   * has `www` (and its server still reads an older `StructureDefinition-subscriptionSecret`);
   * the form without `www` is what this server read first. All three are read, in that order.
   */
  secret: 'https://www.medplum.com/fhir/StructureDefinition/subscription-secret',
  /** valueInteger: attempts per notification before the Subscription goes to `error` (default 3). */
  maxAttempts: 'https://medplum.com/fhir/StructureDefinition/subscription-max-attempts',
  /** valueString: a FHIRPath expression over %current and %previous that must be true as well. */
  fhirPathCriteria: 'https://medplum.com/fhir/StructureDefinition/fhir-path-criteria-expression',
  /** valueCode r4 (default) | medplum: how rest-hook delivers (see delivery.ts). Ours. */
  deliveryMode: 'urn:fhir-tx-server:StructureDefinition:subscription-delivery-mode',
} as const;

/** Every URL a secret is read from, the preferred first (see `secret` above). */
export const SECRET_EXTENSION_URLS: readonly string[] = [
  SUBSCRIPTION_EXTENSIONS.secret,
  'https://www.medplum.com/fhir/StructureDefinition-subscriptionSecret',
  'https://medplum.com/fhir/StructureDefinition/subscription-secret',
];

export type Interaction = 'create' | 'update' | 'delete';
export type DeliveryMode = 'r4' | 'medplum';
const INTERACTIONS: readonly Interaction[] = ['create', 'update', 'delete'];
export const DEFAULT_MAX_ATTEMPTS = 3;
const MAX_MAX_ATTEMPTS = 20;

export interface CompiledSubscription {
  id: string;
  /** The resource type of the criteria. */
  type: string;
  filter: ResourceFilter;
  interactions: ReadonlySet<Interaction>;
  /**
   * The FHIRPath criteria (true to notify), evaluated by the matcher in `FhirPathPool`'s workers;
   * `needsPrevious` when it names %previous. `overran` is set when it ran out of its time or
   * memory: it is not evaluated again (the Subscription is being set to `error`).
   */
  fhirPath?: { expression: string; needsPrevious: boolean; overran?: string };
  maxAttempts: number;
  channel: 'rest-hook' | 'websocket';
}

export interface SubscriptionDeps {
  registry: SearchParameterRegistry;
  extractor: IndexExtractor;
  isResourceType(type: string): boolean;
}

/** Reads a Subscription (throws ERR_SUBSCRIPTION_* when it cannot be run); the endpoint is checked elsewhere (it needs the network). */
export function compileSubscription(sub: Subscription, deps: SubscriptionDeps): CompiledSubscription {
  const channelType = sub.channel?.type as string | undefined;
  if (channelType !== 'rest-hook' && channelType !== 'websocket') {
    if (!channelType) throw invalid('Subscription.channel.type', 'a channel type is required');
    throw fhirError('ERR_SUBSCRIPTION_CHANNEL', { channel: channelType.slice(0, 50) });
  }
  if (typeof sub.criteria !== 'string' || sub.criteria.trim() === '')
    throw invalid('Subscription.criteria', 'criteria are required');
  const criteria = sub.criteria.trim();
  const q = criteria.indexOf('?');
  const type = q < 0 ? criteria : criteria.slice(0, q);
  if (!deps.isResourceType(type))
    throw invalid('Subscription.criteria', `'${type.slice(0, 64)}' is not a resource type this server serves`);
  let filter: ResourceFilter;
  try {
    filter = memoryFilter(type, q < 0 ? '' : criteria.slice(q + 1), {
      registry: deps.registry,
      extractor: deps.extractor,
      localBases: [],
    });
  } catch (err) {
    if (err instanceof FhirError) throw invalid('Subscription.criteria', err.message);
    throw err;
  }
  const interactions = new Set<Interaction>();
  for (const ext of extensions(sub, SUBSCRIPTION_EXTENSIONS.supportedInteraction)) {
    const code = ext.valueCode as Interaction;
    if (!INTERACTIONS.includes(code))
      throw invalid('Subscription.extension', `supported-interaction must be one of ${INTERACTIONS.join(', ')}`);
    interactions.add(code);
  }
  if (interactions.size === 0) ['create', 'update'].forEach((i) => interactions.add(i as Interaction));
  const attemptsExt = extensions(sub, SUBSCRIPTION_EXTENSIONS.maxAttempts)[0];
  const maxAttempts = attemptsExt ? attemptsExt.valueInteger : DEFAULT_MAX_ATTEMPTS;
  if (
    typeof maxAttempts !== 'number' ||
    !Number.isInteger(maxAttempts) ||
    maxAttempts < 1 ||
    maxAttempts > MAX_MAX_ATTEMPTS
  ) {
    throw invalid('Subscription.extension', `max-attempts must be a valueInteger from 1 to ${MAX_MAX_ATTEMPTS}`);
  }
  const mode = extensions(sub, SUBSCRIPTION_EXTENSIONS.deliveryMode)[0];
  if (mode && mode.valueCode !== 'r4' && mode.valueCode !== 'medplum')
    throw invalid('Subscription.extension', 'delivery-mode must be r4 or medplum');
  const secret = secretExtension(sub);
  if (secret && (typeof secret.valueString !== 'string' || secret.valueString === ''))
    throw invalid('Subscription.extension', 'subscription-secret must be a non-empty valueString');
  const expression = extensions(sub, SUBSCRIPTION_EXTENSIONS.fhirPathCriteria)[0];
  let fhirPath: CompiledSubscription['fhirPath'];
  if (expression) {
    if (typeof expression.valueString !== 'string' || expression.valueString.trim() === '')
      throw invalid('Subscription.extension', 'fhir-path-criteria-expression must be a valueString');
    fhirPath = compileFhirPath(expression.valueString);
  }
  for (const [i, header] of (sub.channel.header ?? []).entries()) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+:\s?[^\r\n]*$/.test(header))
      throw invalid(`Subscription.channel.header[${i}]`, "a header is 'Name: value'");
  }
  const payload = sub.channel.payload;
  if (payload !== undefined && payload !== '' && !/^application\/(fhir\+)?json\b/.test(payload)) {
    throw invalid(
      'Subscription.channel.payload',
      `payload '${payload.slice(0, 50)}' is not supported (application/fhir+json, or none)`,
    );
  }
  return { id: sub.id ?? '', type, filter, interactions, fhirPath, maxAttempts, channel: channelType };
}

export function extensions(resource: { extension?: Extension[] }, url: string): Extension[] {
  return (resource.extension ?? []).filter((e) => e.url === url);
}

export function deliveryMode(sub: Subscription): DeliveryMode {
  return extensions(sub, SUBSCRIPTION_EXTENSIONS.deliveryMode)[0]?.valueCode === 'medplum' ? 'medplum' : 'r4';
}

export function secretOf(sub: Subscription): string | undefined {
  return secretExtension(sub)?.valueString;
}

function secretExtension(sub: Subscription): Extension | undefined {
  for (const url of SECRET_EXTENSION_URLS) {
    const found = extensions(sub, url)[0];
    if (found) return found;
  }
  return undefined;
}

function invalid(path: string, reason: string) {
  return fhirError('ERR_SUBSCRIPTION_INVALID', { path, reason });
}

/** Longer than any real criterion; the parser's time grows with the text. */
const MAX_EXPRESSION_LENGTH = 4096;

/**
 * The FHIRPath criteria, parsed here (so that what is stored parses) but never evaluated here:
 * an expression can take minutes on a large resource, so the matcher evaluates it in a worker.
 * True (first value) notifies; %previous is {} on a create, as Medplum does.
 */
function compileFhirPath(expression: string): NonNullable<CompiledSubscription['fhirPath']> {
  if (expression.length > MAX_EXPRESSION_LENGTH)
    throw invalid(
      'Subscription.extension',
      `fhir-path-criteria-expression is longer than ${MAX_EXPRESSION_LENGTH} characters`,
    );
  try {
    compileExpression(expression);
  } catch (err) {
    throw invalid(
      'Subscription.extension',
      `fhir-path-criteria-expression does not parse: ${String((err as Error).message).slice(0, 200)}`,
    );
  }
  return { expression, needsPrevious: expression.includes('%previous') };
}
