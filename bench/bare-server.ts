import Fastify from 'fastify';

/**
 * The limit every benchmark scenario is compared with: a bare Fastify server on the same
 * machine, answering a fixed body on the scenario's route, GET (query parsed) and POST (JSON body
 * parsed), and searches on `[type]`. Before each scenario the harness PUTs to /__answer the very answer the server gives
 * for it, so both send the same bytes; whatever the server does beyond that is its own cost.
 */

let answer = JSON.stringify({
  resourceType: 'Parameters',
  parameter: [
    { name: 'result', valueBoolean: true },
    { name: 'display', valueString: 'Female' },
    { name: 'code', valueCode: 'female' },
    { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' },
    { name: 'version', valueString: '4.0.1' },
  ],
});

/**
 * BARE_WORK_US: CPU time spent per answer (busy, nothing else), for calibration: what ratio a
 * route reaches that does only this much more than the limit, on this machine.
 */
const WORK_NS = BigInt(Math.round(Number(process.env.BARE_WORK_US ?? 0) * 1000));
function work(): void {
  if (WORK_NS === 0n) return;
  const end = process.hrtime.bigint() + WORK_NS;
  while (process.hrtime.bigint() < end);
}

const app = Fastify({ logger: false, bodyLimit: 50 * 1024 * 1024 });
app.addContentTypeParser('application/fhir+json', { parseAs: 'string' }, (_req, body, done) => {
  try {
    done(null, JSON.parse(body as string));
  } catch (err) {
    done(err as Error, undefined);
  }
});
app.route({
  method: ['GET', 'POST'],
  url: '/fhir/R4/:type/:operation',
  handler: async (_request, reply) => {
    work();
    return reply.type('application/fhir+json').send(answer);
  },
});
// A search (`[type]?params`) answers the same way.
app.get('/fhir/R4/:type', async (_request, reply) => reply.type('application/fhir+json').send(answer));
app.put('/__answer', async (request) => {
  answer = JSON.stringify(request.body);
  return { size: answer.length };
});

const port = Number(process.env.PORT ?? 0);
app.listen({ port, host: '127.0.0.1' }).then((address) => {
  process.stdout.write(`listening ${address}\n`);
});
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
