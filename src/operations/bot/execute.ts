import type { Bundle } from 'fhir/r4';
import type { BotResource } from '../../fhir/admin-types';
import { fhirError } from '../../fhir/errors';
import { FHIR_JSON } from '../../fhir/outcome';
import type { AppServices } from '../../services';
import { defineRawOperation, targetOf, type OperationContext, type RawInput, type RawOutput } from '../operation';
import type { BotAnswer, BotInput } from '../../bots/service';

/**
 * `Bot/[id]/$execute` and `Bot/$execute?identifier=system|value` (Medplum's): raw, since the input
 * is whatever the caller sends (JSON, FHIR JSON, text, HL7 v2, or the query for GET) and the answer
 * is whatever the bot returns.
 */

const HL7_V2 = 'x-application/hl7-v2+er7';

export const botExecute = defineRawOperation<AppServices>({
  definition: 'https://medplum.com/fhir/OperationDefinition/bot-execute',
  raw: async (input, ctx) => {
    const bot = targetOf<BotResource>(ctx, 'Bot') ?? (await botByIdentifier(input, ctx));
    const call = botInput(input, ctx);
    return answerOf(await ctx.services.bots.execute(bot, call, ctx.request), call.contentType);
  },
});

async function botByIdentifier(input: RawInput, ctx: OperationContext<AppServices>): Promise<BotResource> {
  const raw = input.query.identifier;
  const identifier = Array.isArray(raw) ? raw[0] : raw;
  if (!identifier)
    throw fhirError('ERR_BOT_INPUT', {
      reason: 'name the bot: Bot/[id]/$execute, or Bot/$execute?identifier=system|value',
    });
  const found = await ctx.services.rest.handle(
    { method: 'GET', path: 'Bot', query: { identifier: [identifier], _count: ['2'] }, headers: {} },
    ctx.request,
  );
  const bots = ((found.body as Bundle).entry ?? []).map((e) => e.resource as BotResource);
  if (bots.length === 0) throw fhirError('ERR_BOT_NOT_FOUND', { what: `identifier ${identifier.slice(0, 200)}` });
  if (bots.length > 1)
    throw fhirError('ERR_BOT_INPUT', { reason: `more than one Bot has identifier ${identifier.slice(0, 200)}` });
  return bots[0];
}

/** The bot's input: the query for GET, else the body as sent, with its media type (without parameters). */
function botInput(input: RawInput, ctx: OperationContext<AppServices>): BotInput {
  const headers = ctx.headers;
  if (input.method === 'GET') return { input: input.query, contentType: 'application/x-www-form-urlencoded', headers };
  const contentType = (input.contentType ?? 'application/json').split(';')[0].trim().toLowerCase();
  const body = input.body;
  if (body === undefined) throw fhirError('ERR_BODY_MISSING', {});
  return { input: body, contentType, headers };
}

/** JSON as JSON (FHIR JSON when it is a resource), text as text (HL7 v2 when HL7 v2 came in). */
function answerOf(answer: BotAnswer, inputType: string): RawOutput {
  if (answer.kind === 'none') return { status: 200, contentType: 'text/plain; charset=utf-8', body: '' };
  if (answer.kind === 'text')
    return {
      status: 200,
      contentType: inputType === HL7_V2 ? HL7_V2 : 'text/plain; charset=utf-8',
      body: answer.value,
    };
  const isResource = /^\{\s*"resourceType"\s*:/.test(answer.value);
  return { status: 200, contentType: isResource ? FHIR_JSON : 'application/json; charset=utf-8', body: answer.value };
}
