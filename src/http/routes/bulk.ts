import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { OperationOutcome } from 'fhir/r4';
import { RETRY_AFTER_SECONDS, type BulkExports } from '../../bulk/export';
import type { ExportLevel } from '../../bulk/parameters';
import type { RequestContext } from '../../context/request-context';
import { FHIR_JSON } from '../../fhir/outcome';

/**
 * Bulk Data 2.0.0 over HTTP: kick-off at system, Patient and Group level (202 + Content-Location),
 * the status URL (202 with X-Progress and Retry-After, 200 with the manifest, DELETE), and the
 * NDJSON files. None is public: the auth plugin asks every request for a token, and the logic
 * (src/bulk/export.ts) answers status and files only to whoever kicked the export off.
 */

export interface BulkRouteDeps {
  base: string;
  exports: BulkExports;
  contextOf: (request: FastifyRequest) => RequestContext;
}

export function registerBulkRoutes(app: FastifyInstance, deps: BulkRouteDeps): void {
  const kickOff = (level: ExportLevel) => async (request: FastifyRequest, reply: import('fastify').FastifyReply) => {
    const ctx = deps.contextOf(request);
    const id = await deps.exports.kickOff(
      {
        level,
        groupId: (request.params as { id?: string }).id,
        query: (request.query ?? {}) as Record<string, string | string[]>,
        body: request.method === 'POST' ? request.body : undefined,
        url: `${ctx.baseUrl}${request.url.slice(deps.base.length)}`,
      },
      ctx,
    );
    const outcome: OperationOutcome = {
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'information', code: 'informational', details: { text: 'The export has started' } }],
    };
    return reply.code(202).header('content-location', `${ctx.baseUrl}/bulk/status/${id}`).type(FHIR_JSON).send(outcome);
  };
  for (const [path, level] of [
    ['/$export', 'system'],
    ['/Patient/$export', 'patient'],
    ['/Group/:id/$export', 'group'],
  ] as const) {
    app.route({ method: ['GET', 'POST'], url: `${deps.base}${path}`, handler: kickOff(level) });
  }

  app.get(`${deps.base}/bulk/status/:id`, async (request, reply) => {
    const status = await deps.exports.status((request.params as { id: string }).id, deps.contextOf(request));
    if (status.state === 'running')
      return reply
        .code(202)
        .header('x-progress', status.progress)
        .header('retry-after', String(RETRY_AFTER_SECONDS))
        .send();
    return reply
      .code(200)
      .header('expires', new Date(status.expires).toUTCString())
      .type('application/json')
      .send(status.manifest);
  });

  app.delete(`${deps.base}/bulk/status/:id`, async (request, reply) => {
    await deps.exports.cancel((request.params as { id: string }).id, deps.contextOf(request));
    return reply.code(202).send();
  });

  app.get(`${deps.base}/bulk/files/:id/:file`, async (request, reply) => {
    const { id, file } = request.params as { id: string; file: string };
    const parts = deps.exports.file(id, file, deps.contextOf(request));
    // The first part is read before answering, so that a refusal is an OperationOutcome, not a broken stream.
    const first = await parts.next();
    async function* rest() {
      if (!first.done) yield first.value;
      yield* parts;
    }
    return reply.code(200).type('application/fhir+ndjson').send(Readable.from(rest()));
  });
}
