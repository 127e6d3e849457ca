import type { Subscription } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import type { AppServices } from '../../services';
import { defineOperation, targetOf } from '../operation';

/** `Subscription/[id]/$get-ws-binding-token` (Medplum's): a token binding a websocket to a websocket-channel Subscription. */
export interface BindingTokenOutput {
  token: string;
  expiration: string;
  subscription: string;
  'websocket-url': string;
}

export const subscriptionBindingToken = defineOperation<AppServices, object, BindingTokenOutput>({
  definition: 'urn:fhir-tx-server:OperationDefinition:Subscription-get-ws-binding-token',
  handle: async (_input, ctx) => {
    const sub = targetOf<Subscription>(ctx, 'Subscription');
    if (!sub?.id)
      throw fhirError('ERR_PARAM_RULE', {
        message: '$get-ws-binding-token is called on a Subscription: Subscription/[id]/$get-ws-binding-token',
      });
    if (sub.channel?.type !== 'websocket')
      throw fhirError('ERR_SUBSCRIPTION_INVALID', {
        path: 'Subscription.channel.type',
        reason: 'binding tokens are for websocket channels',
      });
    if (sub.status !== 'active')
      throw fhirError('ERR_SUBSCRIPTION_INVALID', {
        path: 'Subscription.status',
        reason: `the Subscription is ${sub.status}, not active`,
      });
    const { token, expiresAt } = await ctx.services.subscriptions.websocket.issueToken(ctx.request.project, sub.id);
    return {
      token,
      expiration: new Date(expiresAt).toISOString(),
      subscription: sub.id,
      'websocket-url': websocketUrl(ctx.request.baseUrl),
    };
  },
});

/** The websocket endpoint beside the FHIR base: http://host/fhir/R4 -> ws://host/ws/subscriptions-r4. */
export function websocketUrl(baseUrl: string): string {
  const url = new URL(baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = url.pathname.replace(/\/fhir\/R4\/?$/, '') + '/ws/subscriptions-r4';
  return url.toString();
}
