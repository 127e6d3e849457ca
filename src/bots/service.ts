import { createHash, randomUUID } from 'node:crypto';
import type { AuditEvent, Binary, Bundle, Reference, Resource } from 'fhir/r4';
import type { Accounts } from '../auth/accounts';
import { operatorIn, type Principal } from '../auth/principal';
import { principalOf } from '../auth/tokens';
import type { RequestContext } from '../context/request-context';
import type { BotResource, ProjectMembershipResource } from '../fhir/admin-types';
import { FhirError, fhirError } from '../fhir/errors';
import type { RestService } from '../rest/rest-service';
import type { Outbound } from '../net/outbound';
import { FHIR_JSON } from '../fhir/outcome';
import { checkBodySize, parseJsonBody } from '../fhir/json-body';
import type { FhirRequest } from '../rest/fhir-request';
import { compileBot } from './compile';
import { isAbsoluteUrl, placeOfPath, placeUrl } from './own-urls';
import type { AnonymousCalls, BotResult, ClientAnswer, ClientRequest, RunLimits } from './protocol';
import type { BotRunner } from './runner';
import type { LateBound } from '../late-bound';

/**
 * Bots: deploying their code and running it. Everything a bot reads or writes goes through the
 * REST core (no socket) as the bot's own ProjectMembership, or as the caller when the Bot says
 * `runAsUser`: the same authorization, validation and project isolation as any client.
 */

export interface BotServiceDeps {
  rest: RestService;
  accounts: Accounts;
  runner: BotRunner;
  memoryMb: number;
  outputBytes: number;
  /** BODY_LIMIT: a bot's calls to this server meet the same body limits as any HTTP client's. */
  bodyLimit: number;
  /** By project id, `*` for every project: name -> value. */
  secrets: Record<string, Record<string, string>>;
  /** Origins a bot's fetch may reach besides this server (`*`: any public address), and how. */
  fetchAllow: string[];
  outbound: Outbound;
  /**
   * This server's routes outside the REST core (metadata, SMART discovery), for bots' calls: the
   * HTTP app answers them, and it is built after this service (a late binding). Until it is
   * bound, or without it, such calls are 404.
   */
  anonymous?: LateBound<AnonymousCalls>;
}

/** What an execution is given besides the bot. */
export interface BotInput {
  input: unknown;
  contentType: string;
  /** Request headers the bot sees (lower-case names). */
  headers?: Record<string, string | undefined>;
}

export type BotAnswer = BotResult & { log: string };

const DEFAULT_TIMEOUT_S = 10;
const MAX_TIMEOUT_S = 900;
const LOG_BYTES = 64 * 1024;
/** The log kept in an AuditEvent. */
const AUDIT_LOG_CHARS = 10_000;

export class BotService {
  /** AuditEvents being written (the answer does not wait for them; close does). */
  private readonly audits = new Set<Promise<void>>();

  constructor(private readonly deps: BotServiceDeps) {}

  /**
   * Compiles the code (TypeScript when the file name ends .ts), checks it compiles in the sandbox,
   * and stores it, in one transaction as the caller: a Binary (application/javascript), the Bot
   * pointing at it (executableCode), and the bot's own ProjectMembership when it has none.
   */
  async deploy(bot: BotResource, source: string, filename: string, ctx: RequestContext): Promise<BotResource> {
    const compiled = await compileBot(source, filename);
    if (!compiled.ok) throw fhirError('ERR_BOT_DEPLOY', { reason: compiled.error });
    const sandboxError = await this.deps.runner.compile(compiled.code);
    if (sandboxError) throw fhirError('ERR_BOT_DEPLOY', { reason: sandboxError });
    const binaryId = randomUUID();
    const binary: Binary = {
      resourceType: 'Binary',
      id: binaryId,
      contentType: 'application/javascript',
      data: Buffer.from(compiled.code, 'utf8').toString('base64'),
    };
    const updated: BotResource = {
      ...bot,
      executableCode: {
        contentType: 'application/javascript',
        url: `Binary/${binaryId}`,
        title: filename.replace(/\.(c|m)?ts$/i, '.js'),
        hash: sha1(Buffer.from(compiled.code, 'utf8')),
      },
    };
    delete updated.meta;
    const entries: NonNullable<Bundle['entry']> = [
      { resource: binary, request: { method: 'PUT', url: `Binary/${binaryId}` } },
      {
        resource: updated,
        request: {
          method: 'PUT',
          url: `Bot/${bot.id}`,
          ifMatch: bot.meta?.versionId ? `W/"${bot.meta.versionId}"` : undefined,
        },
      },
      {
        fullUrl: `urn:uuid:${randomUUID()}`,
        resource: {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${ctx.project}` },
          user: { reference: `Bot/${bot.id}` },
          profile: { reference: `Bot/${bot.id}` },
          admin: false,
        } as ProjectMembershipResource,
        request: { method: 'POST', url: 'ProjectMembership', ifNoneExist: `user=Bot/${bot.id}` },
      },
    ];
    const answer = await this.deps.rest.handle(
      {
        method: 'POST',
        path: '',
        query: {},
        headers: {},
        body: { resourceType: 'Bundle', type: 'transaction', entry: entries },
      },
      ctx,
    );
    const stored = (answer.body as Bundle).entry?.[1]?.resource as BotResource | undefined;
    return stored ?? ((await this.deps.rest.readResource('Bot', bot.id as string, ctx)) as BotResource);
  }

  /** Runs the bot once; throws ERR_BOT_FAILED (400, with the log) when it fails. */
  async execute(bot: BotResource, call: BotInput, ctx: RequestContext): Promise<BotAnswer> {
    const code = await this.executableCode(bot, ctx);
    const timeoutS = Math.min(Math.max(bot.timeout ?? DEFAULT_TIMEOUT_S, 1), MAX_TIMEOUT_S);
    const principal = bot.runAsUser ? ctx.principal : await this.botPrincipal(bot, ctx);
    const botCtx: RequestContext = {
      ...ctx,
      requestId: `${ctx.requestId}:bot`,
      project: principal.project,
      principal,
      deadline: Date.now() + timeoutS * 1000,
      prefer: {},
    };
    const event = {
      bot: { reference: `Bot/${bot.id}`, display: bot.name },
      input: call.input,
      contentType: call.contentType,
      secrets: this.secrets(ctx.project),
      traceId: ctx.requestId,
      headers: call.headers ?? {},
      requester: ctx.principal.profile ? { reference: ctx.principal.profile } : undefined,
      // For the client's getBaseUrl()/fhirUrl() (taken out of the event before the handler sees it).
      baseUrl: ctx.baseUrl,
    };
    const limits: RunLimits = {
      memoryMb: this.deps.memoryMb,
      timeoutMs: timeoutS * 1000,
      outputBytes: this.deps.outputBytes,
      logBytes: LOG_BYTES,
      bodyBytes: this.deps.bodyLimit,
    };
    const outcome = await this.deps.runner.run({
      code,
      event: JSON.stringify(event),
      limits,
      client: (request) => this.clientCall(request, botCtx),
      project: ctx.project,
    });
    const audit = this.audit(bot, outcome.ok ? undefined : outcome.error, outcome.log, ctx).finally(() =>
      this.audits.delete(audit),
    );
    this.audits.add(audit);
    if (!outcome.ok) {
      const message = `the bot failed: ${outcome.error}`;
      throw fhirError(
        'ERR_BOT_FAILED',
        { message: outcome.error },
        {
          issues: [
            {
              severity: 'error',
              code: 'processing',
              details: { text: message },
              diagnostics: outcome.log || undefined,
            },
          ],
        },
      );
    }
    return { ...outcome.result, log: outcome.log };
  }

  /**
   * Runs the bot for the server itself (a Subscription's notification, a schedule): as its own
   * membership, whatever `runAsUser` says, which means the user who called $execute; here no user
   * called, and the server's own context would run it as the project's operator.
   */
  executeForServer(bot: BotResource, call: BotInput, ctx: RequestContext): Promise<BotAnswer> {
    return this.execute({ ...bot, runAsUser: false }, call, ctx);
  }

  /**
   * The deployed code: the Binary executableCode points at. Its SHA-1 must match the hash $deploy
   * wrote beside it: whoever may write Binaries but not Bots cannot change what a bot runs.
   */
  private async executableCode(bot: BotResource, ctx: RequestContext): Promise<string> {
    const url = bot.executableCode?.url;
    const id = url?.startsWith('Binary/') ? url.slice('Binary/'.length) : undefined;
    if (!id) {
      if (bot.executableCode?.data) return Buffer.from(bot.executableCode.data, 'base64').toString('utf8');
      throw fhirError('ERR_BOT_NOT_DEPLOYED', { id: bot.id as string });
    }
    const binary = (await this.deps.rest
      .readResource('Binary', id, { ...ctx, principal: operatorIn(ctx.project) })
      .catch(() => undefined)) as { data?: string } | undefined;
    if (!binary?.data) throw fhirError('ERR_BOT_NOT_DEPLOYED', { id: bot.id as string });
    const code = Buffer.from(binary.data, 'base64');
    const expected = bot.executableCode?.hash;
    if (expected !== undefined && sha1(code) !== expected)
      throw fhirError('ERR_BOT_INPUT', {
        reason: `${url} no longer holds the code deployed to Bot/${bot.id}; deploy it again`,
      });
    return code.toString('utf8');
  }

  /** The bot's own membership in the project (created, as Medplum does, when it has none). */
  private async botPrincipal(bot: BotResource, ctx: RequestContext): Promise<Principal> {
    const id = bot.id as string;
    let key = (await this.deps.accounts.memberships({ type: 'Bot', id })).find((m) => m.project === ctx.project);
    if (!key) {
      const membership: ProjectMembershipResource = {
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${ctx.project}` },
        user: { reference: `Bot/${id}` },
        profile: { reference: `Bot/${id}` },
        admin: false,
      };
      const created = await this.deps.rest.handle(
        {
          method: 'POST',
          path: 'ProjectMembership',
          query: {},
          headers: { 'if-none-exist': `user=Bot/${id}` },
          body: membership,
        },
        { ...ctx, principal: operatorIn(ctx.project) },
      );
      key = { project: ctx.project, id: (created.body as Resource).id as string };
    }
    const grant = await this.deps.accounts.grantOf(key);
    if (!grant) throw fhirError('ERR_AUTH_FORBIDDEN', { reason: `the membership of Bot/${id} is not active` });
    return principalOf(grant);
  }

  private secrets(project: string): Record<string, { name: string; valueString: string }> {
    const out: Record<string, { name: string; valueString: string }> = {};
    for (const scope of ['*', project]) {
      for (const [name, value] of Object.entries(this.deps.secrets[scope] ?? {}))
        out[name] = { name, valueString: value };
    }
    return out;
  }

  /**
   * One FHIR call of the bot's client, through the REST core as the bot; its body is JSON text.
   * The path may be an absolute URL of this server, as Medplum's client allows.
   */
  private async clientCall(request: ClientRequest, ctx: RequestContext): Promise<ClientAnswer> {
    if (request.url !== undefined) return this.fetchCall(request, request.url, ctx);
    let body: unknown;
    try {
      body = this.bodyOf(request.body, undefined);
    } catch (err) {
      if (err instanceof FhirError) return { status: err.status, body: err.outcome, message: err.message };
      throw err;
    }
    const base = ctx.baseUrl.replace(/\/+$/, '');
    // A path is the REST core's as it is (not re-encoded through a URL), unless the HTTP layer serves it.
    const place = isAbsoluteUrl(request.path) ? placeUrl(request.path, base) : placeOfPath(request.path, base);
    if (place === undefined) return this.restCall({ ...request, body }, ctx);
    if (place.kind === 'fhir') {
      return this.restCall(
        { ...request, path: place.path, query: [...new URLSearchParams(place.query), ...pairsOf(request.query)], body },
        ctx,
      );
    }
    const anonymous = this.deps.anonymous?.peek();
    if (place.kind === 'server' && anonymous) {
      const extra = new URLSearchParams(pairsOf(request.query)).toString();
      const pathAndQuery =
        extra === ''
          ? place.pathAndQuery
          : `${place.pathAndQuery}${place.pathAndQuery.includes('?') ? '&' : '?'}${extra}`;
      const answer = await anonymous({
        method: request.method,
        pathAndQuery,
        headers: { 'content-type': request.contentType ?? 'application/fhir+json' },
        body: request.body,
      });
      let parsed: unknown;
      try {
        parsed = answer.text === '' ? undefined : JSON.parse(answer.text);
      } catch {
        parsed = answer.text;
      }
      return {
        status: answer.status,
        body: parsed,
        message: answer.status >= 400 ? `HTTP ${answer.status}` : undefined,
      };
    }
    const err = fhirError('ERR_ROUTE_UNKNOWN', { method: request.method, path: request.path.slice(0, 200) });
    return { status: err.status, body: err.outcome, message: err.message };
  }

  /**
   * A body a bot sends to this server, read as the HTTP layer reads one: JSON (the client's, or a
   * fetch's without a non-JSON type) within BODY_LIMIT and the depth limit, without a NUL or
   * prototype keys; other text within BODY_LIMIT. Throws the same catalogue errors.
   */
  private bodyOf(text: string | undefined, contentType: string | undefined): unknown {
    if (text === undefined) return undefined;
    if (contentType !== undefined && !/json/i.test(contentType)) {
      checkBodySize(text, this.deps.bodyLimit);
      return text;
    }
    return parseJsonBody(text, { bodyLimit: this.deps.bodyLimit });
  }

  private async restCall(
    request: Omit<ClientRequest, 'body'> & { body: unknown },
    ctx: RequestContext,
  ): Promise<ClientAnswer> {
    const query: Record<string, string[]> = {};
    const pairs = typeof request.query === 'string' ? [...new URLSearchParams(request.query)] : (request.query ?? []);
    for (const [name, value] of pairs) (query[name] ??= []).push(value);
    const fhirRequest: FhirRequest = {
      method: request.method,
      path: request.path,
      query,
      headers: { 'content-type': request.contentType, 'if-none-exist': request.ifNoneExist },
      body: request.body,
    };
    try {
      const answer = await this.deps.rest.handle(fhirRequest, ctx);
      if (answer.json !== undefined)
        return {
          status: answer.status,
          body: answer.json,
          headers: { ...answer.headers, 'content-type': 'application/json' },
        };
      return { status: answer.status, body: answer.body, headers: answer.headers };
    } catch (err) {
      if (err instanceof FhirError) return { status: err.status, body: err.outcome, message: err.message };
      ctx.log.error({ err }, 'a bot client call failed');
      return { status: 500, message: 'An unexpected error occurred; it has been logged' };
    }
  }

  /**
   * A bot's fetch: to this server's FHIR base, answered in-process as the bot (its Authorization
   * header is not needed, nor used); elsewhere only to the allowed origins, through the same
   * outbound rules as the server's own requests (no private addresses unless allowed).
   */
  private async fetchCall(request: ClientRequest, url: string, ctx: RequestContext): Promise<ClientAnswer> {
    const base = ctx.baseUrl.replace(/\/+$/, '');
    const place = placeUrl(url, base);
    if (place === undefined) return { status: 0, message: `'${url.slice(0, 200)}' is not an absolute URL` };
    if (place.kind === 'fhir') {
      const contentType = request.headers?.['content-type'];
      let body: unknown;
      try {
        body = this.bodyOf(request.body, contentType);
      } catch (err) {
        if (!(err instanceof FhirError)) throw err;
        return { status: err.status, text: JSON.stringify(err.outcome), headers: { 'content-type': FHIR_JSON } };
      }
      const answer = await this.restCall(
        {
          method: request.method,
          path: place.path,
          query: place.query,
          body,
          contentType: contentType ?? 'application/fhir+json',
          ifNoneExist: request.headers?.['if-none-exist'],
        },
        ctx,
      );
      // The REST core's headers (Location, ETag) as an HTTP client would see them.
      const headers = { 'content-type': FHIR_JSON, ...answer.headers };
      return { status: answer.status, text: answer.body === undefined ? '' : JSON.stringify(answer.body), headers };
    }
    const anonymous = this.deps.anonymous?.peek();
    if (place.kind === 'server' && anonymous) {
      return anonymous({
        method: request.method ?? 'GET',
        pathAndQuery: place.pathAndQuery,
        headers: request.headers,
        body: typeof request.body === 'string' ? request.body : undefined,
      });
    }
    const origin = place.kind === 'elsewhere' ? place.origin : new URL(base).origin;
    const allowed = this.deps.fetchAllow.includes('*') || this.deps.fetchAllow.includes(origin);
    if (!allowed)
      return {
        status: 0,
        message: `bots may fetch only this server's API and the origins BOT_FETCH_ALLOW names, not ${origin}`,
      };
    try {
      const answer = await this.deps.outbound.send({
        url,
        method: request.method ?? 'GET',
        headers: request.headers,
        body: typeof request.body === 'string' ? request.body : undefined,
      });
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(answer.headers))
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      return { status: answer.status, text: answer.body, headers };
    } catch (err) {
      return { status: 0, message: err instanceof Error ? err.message : String(err) };
    }
  }

  /**
   * An AuditEvent for the execution, as the Bot's auditEventTrigger says (default: always). Written
   * beside the answer, not before it: a failing bot's 400 is not held up by the write.
   */
  private async audit(bot: BotResource, error: string | undefined, log: string, ctx: RequestContext): Promise<void> {
    const trigger = bot.auditEventTrigger ?? 'always';
    if (
      trigger === 'never' ||
      (trigger === 'on-error' && error === undefined) ||
      (trigger === 'on-output' && log === '')
    )
      return;
    const botRef: Reference = { reference: `Bot/${bot.id}`, display: bot.name };
    const text = error === undefined ? log : `${error}${log ? `\n${log}` : ''}`;
    const event: AuditEvent = {
      resourceType: 'AuditEvent',
      type: { system: 'http://dicom.nema.org/resources/ontology/DCM', code: '110100', display: 'Application Activity' },
      subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'execute', display: 'execute' }],
      action: 'E',
      recorded: new Date().toISOString(),
      outcome: error === undefined ? '0' : '4',
      outcomeDesc: text.length > AUDIT_LOG_CHARS ? `${text.slice(0, AUDIT_LOG_CHARS)}... (cut)` : text,
      agent: [{ who: ctx.principal.profile ? { reference: ctx.principal.profile } : botRef, requestor: true }],
      source: { observer: botRef },
      entity: [{ what: botRef }],
    };
    try {
      await this.deps.rest.handle(
        { method: 'POST', path: 'AuditEvent', query: {}, headers: {}, body: event },
        { ...ctx, principal: operatorIn(ctx.project), prefer: { return: 'minimal' } },
      );
    } catch (err) {
      ctx.log.warn({ err, bot: bot.id }, 'the AuditEvent of a bot execution was not stored');
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.audits]);
    await this.deps.runner.close();
    await this.deps.outbound.close();
  }
}

/** Attachment.hash: base64 SHA-1 of the data. */
function sha1(data: Buffer): string {
  return createHash('sha1').update(data).digest('base64');
}

/**
 * Runs a bot with an input resource: for other parts of the server (a Subscription whose
 * channel.endpoint is `Bot/[id]`), in the bot's project (`ctx`), as the bot itself (executeForServer).
 */
export async function executeBot(
  services: { bots: BotService; rest: RestService },
  bot: Reference | string,
  input: unknown,
  ctx: RequestContext,
  contentType = 'application/fhir+json',
): Promise<BotAnswer> {
  const { bots, rest } = services;
  const reference = typeof bot === 'string' ? bot : (bot.reference ?? '');
  const match = /^(?:.*\/)?Bot\/([A-Za-z0-9\-.]{1,64})$/.exec(reference);
  if (!match) throw fhirError('ERR_BOT_NOT_FOUND', { what: reference.slice(0, 100) || 'an empty reference' });
  const resource = (await rest.readResource('Bot', match[1], ctx)) as BotResource;
  return bots.executeForServer(resource, { input, contentType }, ctx);
}

/** A client call's query as name/value pairs. */
function pairsOf(query: ClientRequest['query']): [string, string][] {
  if (query === undefined) return [];
  return typeof query === 'string' ? [...new URLSearchParams(query)] : query;
}
