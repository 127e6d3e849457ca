import type { FastifyInstance } from 'fastify';
import type { Bundle } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { FHIR_JSON } from '../../fhir/outcome';
import type { OperationRegistry } from '../../operations/registry';
import type { BaseUrlOf } from '../base-url';

/**
 * OperationDefinitions are resources too, served read-only from the registry: what a client
 * reads is exactly what the server validates requests against.
 */
export function registerOperationDefinitionRoutes<S>(app: FastifyInstance, options: { base: string; registry: OperationRegistry<S>; baseUrlOf: BaseUrlOf }) {
  const { base, registry, baseUrlOf } = options;
  const path = `${base}/OperationDefinition`;

  app.get(`${path}/:id`, async (request, reply) => {
    const { id } = request.params as { id: string };
    if (id.startsWith('$')) throw fhirError('ERR_OP_UNKNOWN', { code: id.slice(1), where: 'for OperationDefinition' });
    const definition = registry.definitions().find((d) => d.id === id);
    if (!definition) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type: 'OperationDefinition', id });
    return reply.type(FHIR_JSON).send(definition);
  });

  app.get(path, async (request, reply) => {
    const query = request.query as { url?: string | string[]; _id?: string | string[] };
    const url = typeof query.url === 'string' ? query.url : undefined;
    const id = typeof query._id === 'string' ? query._id : undefined;
    const matches = registry
      .definitions()
      .filter((d) => (url === undefined || d.url === url) && (id === undefined || d.id === id));
    const self = new URLSearchParams();
    if (url !== undefined) self.set('url', url);
    if (id !== undefined) self.set('_id', id);
    const absolute = baseUrlOf(request);
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total: matches.length,
      link: [{ relation: 'self', url: `${absolute}/OperationDefinition?${self.toString()}` }],
      entry: matches.map((d) => ({ fullUrl: `${absolute}/OperationDefinition/${d.id}`, resource: d, search: { mode: 'match' } })),
    };
    return reply.type(FHIR_JSON).send(bundle);
  });

  const readOnly = async () => {
    throw fhirError('ERR_TYPE_READ_ONLY', { type: 'OperationDefinition' });
  };
  app.route({ method: ['POST', 'PUT', 'DELETE', 'PATCH'], url: path, handler: readOnly });
  app.route({ method: ['POST', 'PUT', 'DELETE', 'PATCH'], url: `${path}/:id`, handler: readOnly });
}
