/**
 * What a bot's fresh context is given before its code runs: plain JavaScript run inside the isolate
 * (compiled once per isolate; the sandbox's two host functions are handed over as globals, which it
 * takes and removes), never in the server. It
 * defines `console` (captured into the execution log), `require` (only '@medplum/core', a few of its
 * helpers), the Medplum-style FHIR client, `fetch` (answered by the server: its own API, or the
 * origins its configuration allows), and the entry points the sandbox calls. There is no `process`,
 * no Node `require` and no network of its own in an isolate: nothing else is added.
 */
export const PRELUDE = String.raw`(() => {
const g = globalThis;
// Taken before the bot's code runs, which may replace the globals: what reaches the sandbox is
// always text.
const stringify = JSON.stringify;
const parse = JSON.parse;
const log = g.__hostLog;
const host = g.__hostClient;
delete g.__hostLog;
delete g.__hostClient;
// Memory the isolate's limit does not count (Node 24 and later refuse the V8 flags that removed
// these on Node 20): deleted before the bot's code runs, which has no other way to reach them.
delete g.WebAssembly;
if (typeof ArrayBuffer.prototype.resize === 'function') delete ArrayBuffer.prototype.resize;
if (typeof SharedArrayBuffer !== 'undefined' && typeof SharedArrayBuffer.prototype.grow === 'function') delete SharedArrayBuffer.prototype.grow;
const show = (v) => {
  if (typeof v === 'string') return v;
  if (v instanceof Error) return v.stack || String(v);
  try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch (e) { return String(v); }
};
const writer = (level) => (...args) => log(level, args.map(show).join(' '));
g.console = { log: writer('info'), info: writer('info'), debug: writer('debug'), warn: writer('warn'), error: writer('error'), trace: writer('debug') };

// The body goes beside the request, as text, to meet the same limits as a body sent over HTTP.
const ask = async (request, body) => parse(await host.apply(undefined, [stringify(request), body], { arguments: { copy: true }, result: { promise: true, copy: true } }));
const call = async (method, path, options = {}) => {
  const body = options.body === undefined ? undefined : stringify(options.body);
  const answer = await ask({ method, path: String(path).replace(/^\/+/, '').replace(/^fhir\/R4\/+/, ''), query: queryOf(options.query), contentType: options.contentType, ifNoneExist: options.ifNoneExist }, body);
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
// fetch: to this server (as the bot, in-process) or to the origins the configuration allows.
g.fetch = async (input, init = {}) => {
  const url = String(input && typeof input === 'object' && input.url ? input.url : input);
  const headers = {};
  const given = init.headers || {};
  for (const [name, value] of Array.isArray(given) ? given : Object.entries(given)) headers[String(name).toLowerCase()] = String(value);
  const body = init.body === undefined || init.body === null ? undefined : typeof init.body === 'string' ? init.body : stringify(init.body);
  const answer = await ask({ method: String(init.method || 'GET').toUpperCase(), path: '', url, headers }, body);
  if (answer.status === 0) throw new TypeError('fetch failed: ' + answer.message);
  const text = answer.text === undefined ? '' : answer.text;
  const answerHeaders = answer.headers || {};
  return {
    ok: answer.status >= 200 && answer.status < 300,
    status: answer.status,
    url,
    headers: { get: (name) => (answerHeaders[String(name).toLowerCase()] === undefined ? null : answerHeaders[String(name).toLowerCase()]) },
    text: async () => text,
    json: async () => parse(text),
  };
};
const referenceOf = (resource) => ({ reference: resource.resourceType + '/' + resource.id });

class BotClient {
  constructor(base) { this.base = base || ''; }
  getBaseUrl() { return this.base; }
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
  fhirUrl(...parts) { return this.base + '/' + parts.join('/'); }
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
  const event = parse(eventJson);
  const base = event.baseUrl;
  delete event.baseUrl;
  const result = await handler(new BotClient(base), event);
  if (result === undefined) return stringify({ kind: 'none' });
  if (typeof result === 'string') return stringify({ kind: 'text', value: result });
  const value = stringify(result);
  return stringify(value === undefined ? { kind: 'none' } : { kind: 'json', value });
};
})();`;

/** Runs the bot with the event the sandbox left in `__botEvent`. */
export const RUN = '__botRun(globalThis.__botEvent)';

/** The bot's CommonJS code as a script that hands its module factory to the prelude (line 1 stays line 1). */
export function wrapModule(code: string): string {
  return `__botDefine(function (exports, require, module) {${code}\n});`;
}
