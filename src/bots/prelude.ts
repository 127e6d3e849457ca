/**
 * What a bot's fresh context is given before its code runs: plain JavaScript run inside the isolate
 * (compiled once per isolate; the sandbox's two host functions are handed over as globals, which it
 * takes and removes), never in the server. It
 * defines `console` (captured into the execution log), `require` (only '@medplum/core', a few of its
 * helpers), the Medplum-style FHIR client, and the entry points the sandbox calls. There is no
 * `process`, no Node `require` and no network in an isolate: nothing else is added.
 */
export const PRELUDE = String.raw`(() => {
const g = globalThis;
const log = g.__hostLog;
const host = g.__hostClient;
delete g.__hostLog;
delete g.__hostClient;
const show = (v) => {
  if (typeof v === 'string') return v;
  if (v instanceof Error) return v.stack || String(v);
  try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch (e) { return String(v); }
};
const writer = (level) => (...args) => log(level, args.map(show).join(' '));
g.console = { log: writer('info'), info: writer('info'), debug: writer('debug'), warn: writer('warn'), error: writer('error'), trace: writer('debug') };

const call = async (method, path, options = {}) => {
  const request = JSON.stringify({ method, path: String(path).replace(/^\/+/, '').replace(/^fhir\/R4\/+/, ''), query: queryOf(options.query), body: options.body, contentType: options.contentType, ifNoneExist: options.ifNoneExist });
  const answer = JSON.parse(await host.apply(undefined, [request], { arguments: { copy: true }, result: { promise: true, copy: true } }));
  if (answer.status >= 400) {
    const error = new Error(answer.message || ('HTTP ' + answer.status));
    error.status = answer.status;
    error.outcome = answer.body;
    throw error;
  }
  return answer.body;
};
const queryOf = (query) => {
  if (query === undefined || query === null) return undefined;
  if (typeof query === 'string') return query.replace(/^\?/, '');
  if (Array.isArray(query)) return query.map(([name, value]) => [String(name), String(value)]);
  const pairs = [];
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) pairs.push([name, String(one)]);
  }
  return pairs;
};
const splitPath = (url) => {
  const text = String(url);
  const q = text.indexOf('?');
  return q < 0 ? [text, undefined] : [text.slice(0, q), text.slice(q + 1)];
};
const referenceOf = (resource) => ({ reference: resource.resourceType + '/' + resource.id });

class BotClient {
  readResource(type, id) { return call('GET', type + '/' + id); }
  readReference(reference) { return call('GET', reference.reference); }
  readHistory(type, id) { return call('GET', type + '/' + id + '/_history'); }
  readVersion(type, id, vid) { return call('GET', type + '/' + id + '/_history/' + vid); }
  search(type, query) { return call('GET', type, { query }); }
  async searchResources(type, query) {
    const bundle = await this.search(type, query);
    const resources = (bundle.entry || []).filter((e) => !e.search || e.search.mode !== 'include').map((e) => e.resource);
    Object.defineProperty(resources, 'bundle', { value: bundle, enumerable: false });
    return resources;
  }
  async searchOne(type, query) {
    const params = queryOf(query) || [];
    const pairs = typeof params === 'string' ? params + '&_count=1' : [...params, ['_count', '1']];
    return (await this.searchResources(type, pairs))[0];
  }
  createResource(resource) { return call('POST', resource.resourceType, { body: resource }); }
  createResourceIfNoneExist(resource, query) { return call('POST', resource.resourceType, { body: resource, ifNoneExist: query }); }
  updateResource(resource) { return call('PUT', resource.resourceType + '/' + resource.id, { body: resource }); }
  deleteResource(type, id) { return call('DELETE', type + '/' + id); }
  patchResource(type, id, operations) { return call('PATCH', type + '/' + id, { body: operations, contentType: 'application/json-patch+json' }); }
  executeBatch(bundle) { return call('POST', '', { body: bundle }); }
  get(url) { const [path, query] = splitPath(url); return call('GET', path, { query }); }
  post(url, body) { const [path, query] = splitPath(url); return call('POST', path, { query, body }); }
  put(url, body) { const [path, query] = splitPath(url); return call('PUT', path, { query, body }); }
  delete(url) { const [path, query] = splitPath(url); return call('DELETE', path, { query }); }
  fhirUrl(...parts) { return parts.join('/'); }
}

const core = {
  createReference: referenceOf,
  getReferenceString: (resource) => resource.resourceType + '/' + resource.id,
  resolveId: (reference) => (reference && reference.reference ? reference.reference.split('/')[1] : undefined),
  isResource: (value) => !!value && typeof value === 'object' && typeof value.resourceType === 'string',
  MedplumClient: BotClient,
};
g.require = (name) => {
  if (name === '@medplum/core') return core;
  throw new Error("require('" + String(name).slice(0, 100) + "') is not available in a bot; only '@medplum/core' is");
};

let factory;
g.__botDefine = (f) => { factory = f; };
g.__botRun = async (eventJson) => {
  const module = { exports: {} };
  factory.call(undefined, module.exports, g.require, module);
  const exported = module.exports;
  const handler = typeof exported.handler === 'function' ? exported.handler : exported.default && typeof exported.default.handler === 'function' ? exported.default.handler : undefined;
  if (!handler) throw new Error('the bot exports no handler (export async function handler(medplum, event) { ... })');
  const result = await handler(new BotClient(), JSON.parse(eventJson));
  if (result === undefined) return JSON.stringify({ kind: 'none' });
  if (typeof result === 'string') return JSON.stringify({ kind: 'text', value: result });
  const value = JSON.stringify(result);
  return JSON.stringify(value === undefined ? { kind: 'none' } : { kind: 'json', value });
};
})();`;

/** Runs the bot with the event the sandbox left in `__botEvent`. */
export const RUN = '__botRun(globalThis.__botEvent)';

/** The bot's CommonJS code as a script that hands its module factory to the prelude (line 1 stays line 1). */
export function wrapModule(code: string): string {
  return `__botDefine(function (exports, require, module) {${code}\n});`;
}
