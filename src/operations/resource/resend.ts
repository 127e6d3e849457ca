import type { OperationOutcome } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import type { AppServices } from '../../services';
import type { Interaction } from '../../subscriptions/definition';
import { defineRawOperation, type RawInput } from '../operation';

/**
 * `[type]/[id]/$resend` (Medplum's): the current version matched again against the project's
 * active Subscriptions, a delivery enqueued for each match; no new version is written. Raw, because
 * Medplum's clients send a plain JSON object where FHIR clients send Parameters: both are read here.
 */
export interface ResendInput {
  subscription?: string;
  interaction?: Interaction;
  verbose?: boolean;
}

export const resourceResend = defineRawOperation<AppServices>({
  definition: 'urn:fhir-tx-server:OperationDefinition:Resource-resend',
  raw: async (input, ctx) => {
    const principal = ctx.request.principal;
    if (principal && !principal.admin && !principal.operator)
      throw fhirError('ERR_AUTH_FORBIDDEN', { reason: '$resend is for project administrators' });
    const target = ctx.target;
    if (!target?.id)
      throw fhirError('ERR_PARAM_RULE', { message: '$resend is called on a resource: [type]/[id]/$resend' });
    const args = readInput(input);
    const subscription = args.subscription?.replace(/^Subscription\//, '');
    const enqueued = await ctx.services.subscriptions.matcher.resend(
      ctx.services.repository.in(ctx.request.project),
      target.resourceType,
      target.id,
      {
        interaction: args.interaction ?? 'update',
        subscription,
      },
    );
    const text = `${target.resourceType}/${target.id} was enqueued for ${enqueued.length} subscription(s)`;
    const outcome: OperationOutcome = {
      resourceType: 'OperationOutcome',
      issue: [
        { severity: 'information', code: 'informational', details: { text } },
        ...(args.verbose
          ? enqueued.map((id) => ({
              severity: 'information' as const,
              code: 'informational' as const,
              details: { text: `Subscription/${id}` },
            }))
          : []),
      ],
    };
    return { status: 200, contentType: 'application/fhir+json', body: outcome };
  },
});

const INTERACTIONS = ['create', 'update', 'delete'];

/** A Parameters body or a plain object with the same names; wrong types are 400. */
function readInput(input: RawInput): ResendInput {
  const body = input.body;
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body))
    throw fhirError('ERR_PARAM_RULE', { message: 'the body must be a Parameters resource or a JSON object' });
  const fields = body as Record<string, unknown>;
  const values: Record<string, unknown> = {};
  if (fields.resourceType === 'Parameters') {
    for (const p of (fields.parameter ?? []) as Record<string, unknown>[]) {
      const key = Object.keys(p).find((k) => k.startsWith('value'));
      if (typeof p.name === 'string' && key) values[p.name] = p[key];
    }
  } else Object.assign(values, fields);
  const out: ResendInput = {};
  if (values.subscription !== undefined) {
    if (typeof values.subscription !== 'string')
      throw fhirError('ERR_PARAM_TYPE', {
        name: 'subscription',
        expected: 'string',
        found: typeof values.subscription,
      });
    out.subscription = values.subscription;
  }
  if (values.interaction !== undefined) {
    if (typeof values.interaction !== 'string' || !INTERACTIONS.includes(values.interaction)) {
      throw fhirError('ERR_PARAM_VALUE', {
        name: 'interaction',
        type: 'code',
        value: String(values.interaction).slice(0, 50),
      });
    }
    out.interaction = values.interaction as Interaction;
  }
  if (values.verbose !== undefined) {
    if (typeof values.verbose !== 'boolean')
      throw fhirError('ERR_PARAM_TYPE', { name: 'verbose', expected: 'boolean', found: typeof values.verbose });
    out.verbose = values.verbose;
  }
  return out;
}
