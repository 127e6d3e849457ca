import { internalContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { RestService } from '../rest/rest-service';
import type { ChannelHandler } from '../subscriptions/delivery';
import { executeBot, type BotService } from './service';

const BOT_ENDPOINT = /^Bot\/[A-Za-z0-9\-.]{1,64}$/;

/**
 * Subscriptions whose rest-hook endpoint is `Bot/[id]` (Medplum's convention): each notification
 * runs the bot with the resource as its input, in the Subscription's project. A bot that fails
 * (throws, times out) fails the attempt, so the Subscription's retry policy applies and its last
 * failure sets the Subscription to `error`.
 */
export function botEndpointHandler(
  services: { bots: BotService; rest: RestService },
  options: { baseUrl?: string } = {},
): ChannelHandler {
  return {
    async check(endpoint) {
      if (!BOT_ENDPOINT.test(endpoint))
        throw fhirError('ERR_SUBSCRIPTION_INVALID', {
          path: 'Subscription.channel.endpoint',
          reason: `'${endpoint.slice(0, 100)}' is not Bot/[id]`,
        });
    },
    async deliver(notification) {
      const ctx = internalContext({ project: notification.project, baseUrl: options.baseUrl });
      await executeBot(services, notification.subscription.channel.endpoint as string, notification.resource, ctx);
    },
  };
}
