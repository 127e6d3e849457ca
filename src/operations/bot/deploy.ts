import type { BotResource } from '../../fhir/admin-types';
import { fhirError } from '../../fhir/errors';
import { FHIR_JSON } from '../../fhir/outcome';
import type { AppServices } from '../../services';
import { defineRawOperation, targetOf, type RawInput } from '../operation';

/**
 * `Bot/[id]/$deploy` (Medplum's): raw, because Medplum's clients send a plain JSON body
 * `{code, filename}` as well as a Parameters. The work is the bot service's (src/bots/service.ts).
 */
export interface DeployInput {
  code?: string;
  filename?: string;
}

export const botDeploy = defineRawOperation<AppServices>({
  definition: 'https://medplum.com/fhir/OperationDefinition/bot-deploy',
  raw: async (input, ctx) => {
    const bot = targetOf<BotResource>(ctx, 'Bot') as BotResource;
    const { code, filename } = deployInput(input);
    const source = code ?? bot.code;
    if (source === undefined || source.trim() === '')
      throw fhirError('ERR_BOT_DEPLOY', {
        reason: 'no code: send code (and filename), or give the Bot a code element',
      });
    const deployed = await ctx.services.bots.deploy(bot, source, filename ?? 'index.ts', ctx.request);
    return { status: 200, contentType: FHIR_JSON, body: deployed };
  },
});

/** `code` and `filename` from a Parameters or a plain JSON object. */
export function deployInput(input: RawInput): DeployInput {
  const body = input.body;
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw fhirError('ERR_BOT_DEPLOY', { reason: 'the body must be a Parameters or a JSON object {code, filename}' });
  const fields = body as Record<string, unknown>;
  let code: unknown = fields.code;
  let filename: unknown = fields.filename;
  if (fields.resourceType === 'Parameters') {
    const params = Array.isArray(fields.parameter)
      ? (fields.parameter as { name?: string; valueString?: unknown }[])
      : [];
    code = params.find((p) => p.name === 'code')?.valueString;
    filename = params.find((p) => p.name === 'filename')?.valueString;
  }
  if (code !== undefined && typeof code !== 'string')
    throw fhirError('ERR_BOT_DEPLOY', { reason: 'code must be a string' });
  if (filename !== undefined && (typeof filename !== 'string' || !/^[\w.-]{1,200}$/.test(filename)))
    throw fhirError('ERR_BOT_DEPLOY', { reason: 'filename must be a file name such as index.ts' });
  return { code, filename: filename as string | undefined };
}
