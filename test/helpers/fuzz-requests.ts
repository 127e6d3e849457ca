import fc from 'fast-check';
import type { OperationSpec } from '../../src/fhir/operation-definition';

/**
 * Generated requests at the whole REST surface, for fuzzing: searches, conditional writes, both
 * PATCH kinds, batch and transaction Bundles, GraphQL, and every operation's Parameters as its
 * definition names them. Each draws from values a client might send (known names, prototype
 * names, odd pointers and paths) mixed with arbitrary ones, so that most requests get past the
 * first check and reach deeper code.
 */

export interface FuzzRequest {
  kind: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  /** Below the FHIR base, without a leading slash. */
  url: string;
  headers: Record<string, string>;
  payload?: string;
}

/** Names every JavaScript object inherits: as criteria, parameters or paths they must mean nothing special. */
export const PROTOTYPE_NAMES = [
  'toString',
  'constructor',
  'valueOf',
  'hasOwnProperty',
  '__proto__',
  'prototype',
  'isPrototypeOf',
  '__defineGetter__',
];

const IDS = ['p1', 'o1', 'missing', 'a.b', '', '$x', ...PROTOTYPE_NAMES];
const SEARCH_NAMES = [
  'name',
  'family',
  'birthdate',
  'gender',
  'identifier',
  'general-practitioner',
  '_id',
  '_lastUpdated',
  '_tag',
  'code',
  'value-quantity',
  'subject',
  'patient',
  'date',
  'url',
  '_has:Observation:patient:code',
  'subject:Patient.name',
  'subject.organization.name',
  'nonsense',
  '_text',
  '_content',
  '_sort',
  '_count',
  '_include',
  '_revinclude',
  '_total',
  '_summary',
  '_elements',
  '_cursor',
  '_offset',
  '_type',
  '_format',
  '_pretty',
  ...PROTOTYPE_NAMES,
];
const MODIFIERS = [
  '',
  ':exact',
  ':contains',
  ':missing',
  ':not',
  ':text',
  ':in',
  ':below',
  ':above',
  ':identifier',
  ':Patient',
  ':iterate',
  ':toString',
  ':x',
];
const SEARCH_VALUES = [
  'eq2020',
  'gt2013-01-14T10:00:00Z',
  'ap1',
  'le-1',
  'xx',
  'true',
  '5.4|http://unitsofmeasure.org|mg',
  'a|b|c',
  'Patient/p1',
  'Patient:name',
  '*',
  '-date',
  '1e308',
  'NaN',
  'http://hl7.org/fhir/ValueSet/administrative-gender',
  ...PROTOTYPE_NAMES,
  'Patient:__proto__',
  'Patient.constructor',
];

const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 20 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '%', '\u00e9', 'a\u0001b', 'x'.repeat(300)) },
);
const json = fc.jsonValue({ maxDepth: 4 });

const searchValue = fc.oneof(fc.constantFrom(...SEARCH_VALUES), text);
const criteria = fc
  .array(fc.tuple(fc.constantFrom(...SEARCH_NAMES), fc.constantFrom(...MODIFIERS), searchValue), {
    minLength: 1,
    maxLength: 4,
  })
  .map((pairs) => pairs.map(([n, m, v]) => `${encodeURIComponent(n + m)}=${encodeURIComponent(v)}`).join('&'));

const FHIR = { 'content-type': 'application/fhir+json' };
const JSON_PATCH = { 'content-type': 'application/json-patch+json' };

/** A resource of a known type with a few fields right, wrong or odd. */
const resource = fc
  .record(
    {
      resourceType: fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('Patient', 'Observation', 'Basic') },
        { weight: 1, arbitrary: fc.oneof(text, fc.constantFrom(...PROTOTYPE_NAMES)) },
      ),
      id: fc.option(fc.constantFrom(...IDS), { nil: undefined }),
      active: fc.option(fc.oneof(fc.boolean(), json), { nil: undefined }),
      name: fc.option(fc.oneof(fc.constant([{ family: 'Doe', given: ['Jane'] }]), json), { nil: undefined }),
      status: fc.option(fc.constantFrom('final', 'x'), { nil: undefined }),
      code: fc.option(fc.oneof(fc.constant({ text: 'c' }), json), { nil: undefined }),
      extra: fc.option(fc.tuple(fc.constantFrom(...PROTOTYPE_NAMES, 'foo', '_active', 'meta'), json), {
        nil: undefined,
      }),
    },
    { requiredKeys: ['resourceType'] },
  )
  .map(({ extra, ...rest }) => {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(rest)) if (value !== undefined) out[key] = value;
    // defineProperty: `__proto__` as an own member, as JSON.parse would make it.
    if (extra)
      Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true, writable: true, configurable: true });
    return out;
  });

const POINTERS = [
  '',
  '/',
  '/name',
  '/name/0',
  '/name/0/given/-',
  '/name/-',
  '/extension',
  '/extension/-',
  '/active',
  '/id',
  '/resourceType',
  '/meta/versionId',
  '/__proto__',
  '/__proto__/x',
  '/constructor',
  '/constructor/prototype/x',
  '/toString',
  '/name/0/__proto__',
  '/a~1b',
  '/~2',
  '/name/01',
  '/name/99',
];
const pointer = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...POINTERS) }, { weight: 1, arbitrary: text });
const jsonPatchOp = fc.record(
  {
    op: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom('add', 'remove', 'replace', 'move', 'copy', 'test') },
      { weight: 1, arbitrary: text },
    ),
    path: fc.oneof({ weight: 9, arbitrary: pointer }, { weight: 1, arbitrary: json }),
    from: pointer,
    value: json,
  },
  { requiredKeys: ['op'] },
);
const jsonPatch = fc.oneof(
  { weight: 8, arbitrary: fc.array(jsonPatchOp, { maxLength: 6 }) },
  { weight: 1, arbitrary: json },
);

const FHIRPATHS = [
  'Patient',
  'Patient.name',
  'Patient.name[0]',
  'Patient.name[0].given',
  'Patient.name.first()',
  'Patient.name.last()',
  "Patient.name.where(use='official')",
  'Patient.active',
  'Patient.constructor',
  'Patient.toString',
  'Patient.__proto__',
  'Patient.name[9]',
  'Observation.code',
  'Patient.',
  '',
  'Patient.name.given.where(x)',
];
const fhirPathOp = fc
  .record(
    {
      type: fc.oneof(
        { weight: 5, arbitrary: fc.constantFrom('add', 'insert', 'delete', 'replace', 'move') },
        { weight: 1, arbitrary: text },
      ),
      path: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...FHIRPATHS) }, { weight: 1, arbitrary: text }),
      name: fc.oneof(fc.constantFrom('given', 'family', 'active', 'birthDate', ...PROTOTYPE_NAMES), text),
      valueKey: fc.constantFrom(
        'valueString',
        'valueBoolean',
        'valueHumanName',
        'valueInteger',
        'valueCode',
        'resource',
        'valueFoo',
      ),
      value: json,
      index: fc.oneof(fc.integer({ min: -2, max: 5 }), json),
    },
    { requiredKeys: ['type', 'path'] },
  )
  .map((o) => ({
    name: 'operation',
    part: [
      { name: 'type', valueCode: o.type },
      { name: 'path', valueString: o.path },
      ...(o.name !== undefined ? [{ name: 'name', valueString: o.name }] : []),
      ...(o.valueKey !== undefined ? [{ name: 'value', [o.valueKey]: o.value }] : []),
      ...(o.index !== undefined
        ? [
            { name: 'index', valueInteger: o.index },
            { name: 'source', valueInteger: o.index },
            { name: 'destination', valueInteger: 0 },
          ]
        : []),
    ],
  }));
const fhirPathPatch = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.array(fhirPathOp, { maxLength: 4 }).map((parameter) => ({ resourceType: 'Parameters', parameter })),
  },
  { weight: 1, arbitrary: fc.record({ resourceType: fc.constant('Parameters'), parameter: json }) },
);

const instanceUrl = fc
  .tuple(
    fc.constantFrom('Patient', 'Patient', 'Observation', 'Nope'),
    fc.constantFrom('p1', 'p1', 'o1', 'missing', ...PROTOTYPE_NAMES),
  )
  .map(([t, id]) => `${t}/${encodeURIComponent(id)}`);

function request(
  kind: string,
  method: FuzzRequest['method'],
  url: string,
  headers: Record<string, string>,
  payload?: unknown,
): FuzzRequest {
  return { kind, method, url, headers, payload: payload === undefined ? undefined : JSON.stringify(payload) };
}

const search = fc
  .tuple(
    fc.constantFrom(
      'Patient',
      'Observation',
      '',
      'Patient/p1/Observation',
      'Patient/p1/*',
      'Patient/_search',
      ...PROTOTYPE_NAMES,
    ),
    criteria,
  )
  .map(([path, q]) =>
    path.endsWith('_search')
      ? request('search', 'POST', `${path}?${q}`, {})
      : request('search', 'GET', `${path}?${q}`, {}),
  );

const conditional = fc
  .tuple(
    fc.constantFrom('create', 'update', 'delete', 'patch'),
    fc.constantFrom('Patient', 'Observation', 'Nope'),
    criteria,
    resource,
    jsonPatch,
    fc.option(fc.constantFrom('W/"1"', '"2"', 'x'), { nil: undefined }),
  )
  .map(([what, type, q, body, patch, ifMatch]) => {
    const headers: Record<string, string> = ifMatch ? { 'if-match': ifMatch } : {};
    if (what === 'create') return request('conditional', 'POST', type, { ...FHIR, 'if-none-exist': q }, body);
    if (what === 'update') return request('conditional', 'PUT', `${type}?${q}`, { ...FHIR, ...headers }, body);
    if (what === 'delete') return request('conditional', 'DELETE', `${type}?${q}`, headers);
    return request('conditional', 'PATCH', `${type}?${q}`, { ...JSON_PATCH, ...headers }, patch);
  });

const patch = fc.oneof(
  fc
    .tuple(instanceUrl, jsonPatch, fc.option(fc.constantFrom('W/"1"', 'W/"999"'), { nil: undefined }))
    .map(([url, body, ifMatch]) =>
      request('json-patch', 'PATCH', url, ifMatch ? { ...JSON_PATCH, 'if-match': ifMatch } : JSON_PATCH, body),
    ),
  fc.tuple(instanceUrl, fhirPathPatch).map(([url, body]) => request('fhirpath-patch', 'PATCH', url, FHIR, body)),
);

const write = fc
  .tuple(fc.constantFrom('POST', 'PUT', 'DELETE'), instanceUrl, resource)
  .map(([method, url, body]) =>
    method === 'POST'
      ? request('write', 'POST', url.split('/')[0], FHIR, body)
      : request('write', method as 'PUT', url, FHIR, method === 'DELETE' ? undefined : body),
  );

const entryRequest = fc.record(
  {
    method: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD') },
      { weight: 1, arbitrary: text },
    ),
    url: fc.oneof(
      instanceUrl,
      criteria.map((q) => `Patient?${q}`),
      fc.constantFrom(
        'Patient',
        'Patient/$validate',
        '$graphql',
        'metadata',
        'urn:uuid:1',
        '',
        '/Patient',
        ...PROTOTYPE_NAMES,
      ),
      text,
    ),
    ifNoneExist: fc.option(criteria, { nil: undefined }),
    ifMatch: fc.option(fc.constantFrom('W/"1"', 'x'), { nil: undefined }),
  },
  { requiredKeys: ['method', 'url'] },
);
const entry = fc.record(
  {
    fullUrl: fc.option(
      fc.constantFrom(
        'urn:uuid:6f2b2f5e-0000-4000-8000-000000000001',
        'urn:uuid:6f2b2f5e-0000-4000-8000-000000000002',
        'Patient/p1',
        'x',
      ),
      { nil: undefined },
    ),
    resource: fc.option(
      fc.oneof(
        resource,
        fhirPathPatch,
        fc.record({
          resourceType: fc.constant('Binary'),
          contentType: fc.constant('application/json-patch+json'),
          data: jsonPatch.map((p) => Buffer.from(JSON.stringify(p) ?? '').toString('base64')),
        }),
      ),
      { nil: undefined },
    ),
    request: fc.oneof({ weight: 9, arbitrary: entryRequest }, { weight: 1, arbitrary: json }),
  },
  { requiredKeys: [] },
);
const bundle = fc
  .tuple(fc.constantFrom('batch', 'transaction', 'searchset', 'x'), fc.array(entry, { maxLength: 5 }))
  .map(([type, entries]) => request('bundle', 'POST', '', FHIR, { resourceType: 'Bundle', type, entry: entries }));

const GRAPHQL_TEMPLATES = [
  '{ Patient(id: "p1") { id name { family given } } }',
  '{ PatientList(name: "Doe") { id gender } }',
  '{ PatientList(_count: 2) { id } }',
  '{ Patient(id: "p1") { id ObservationList(_reference: patient) { id status } } }',
  '{ ObservationList { subject { reference resource { ... on Patient { id } } } } }',
  'mutation { PatientCreate(res: {resourceType: "Patient"}) { id } }',
  'mutation { PatientDelete(id: "p1") { id } }',
  '{ __schema { types { name } } }',
];
const graphqlQuery = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...GRAPHQL_TEMPLATES) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('Patient', 'PatientList', 'ObservationList', 'Nope', ...PROTOTYPE_NAMES),
        fc.constantFrom('id', 'name', '_count', 'fhirpath', '_cursor', ...PROTOTYPE_NAMES),
        searchValue,
        fc.constantFrom('id', 'name { family }', 'meta { versionId }', ...PROTOTYPE_NAMES),
      )
      .map(([field, arg, value, select]) => `{ ${field}(${arg}: ${JSON.stringify(value)}) { ${select} } }`),
  },
  { weight: 1, arbitrary: text },
);
const graphql = fc
  .tuple(graphqlQuery, fc.option(json, { nil: undefined }), fc.constantFrom('POST', 'GET', 'instance'))
  .map(([query, variables, how]) => {
    if (how === 'GET') return request('graphql', 'GET', `$graphql?query=${encodeURIComponent(query)}`, {});
    const url = how === 'instance' ? 'Patient/p1/$graphql' : '$graphql';
    return request(
      'graphql',
      'POST',
      url,
      { 'content-type': 'application/json' },
      variables === undefined ? { query } : { query, variables },
    );
  });

const VALUE_KEYS = [
  'valueString',
  'valueCode',
  'valueUri',
  'valueBoolean',
  'valueInteger',
  'valueDecimal',
  'valueCoding',
  'valueCodeableConcept',
  'valueReference',
  'valueDateTime',
  'resource',
  'part',
  'valueFoo',
];

/** Every operation at every level its definition allows, with Parameters made of its own input names (and some others). */
function operationRequests(specs: OperationSpec[]): fc.Arbitrary<FuzzRequest> {
  const urls = specs.flatMap((spec) =>
    [
      ...(spec.system ? [`$${spec.code}`] : []),
      ...spec.resources.flatMap((type) => [
        ...(spec.typeLevel ? [`${type}/$${spec.code}`] : []),
        ...(spec.instance ? [`${type}/p1/$${spec.code}`, `${type}/missing/$${spec.code}`] : []),
      ]),
    ].map((url) => ({ url, names: spec.inputs.flatMap((p) => [p.name, ...p.part.map((part) => part.name)]) })),
  );
  return fc.constantFrom(...urls).chain(({ url, names }) => {
    const name = fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...(names.length > 0 ? names : ['x'])) },
      { weight: 1, arbitrary: fc.constantFrom(...PROTOTYPE_NAMES, '') },
    );
    const entryOf = fc
      .tuple(name, fc.constantFrom(...VALUE_KEYS), json, fc.array(fc.tuple(name, json), { maxLength: 2 }))
      .map(([n, key, value, parts]) =>
        key === 'part'
          ? {
              name: n,
              part: parts.map(([pn, pv]) => ({
                name: pn,
                valueString: typeof pv === 'string' ? pv : JSON.stringify(pv),
              })),
            }
          : { name: n, [key]: value },
      );
    return fc.oneof(
      {
        weight: 4,
        arbitrary: fc
          .array(entryOf, { maxLength: 6 })
          .map((parameter) => request('operation', 'POST', url, FHIR, { resourceType: 'Parameters', parameter })),
      },
      {
        weight: 1,
        arbitrary: fc
          .array(fc.tuple(name, searchValue), { maxLength: 4 })
          .map((pairs) =>
            request(
              'operation',
              'GET',
              `${url}?${pairs.map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`).join('&')}`,
              {},
            ),
          ),
      },
      { weight: 1, arbitrary: json.map((body) => request('operation', 'POST', url, FHIR, body)) },
    );
  });
}

/** One generated request of any kind, weighted towards the kinds with the most paths through them. */
export function anyRequest(operations: OperationSpec[]): fc.Arbitrary<FuzzRequest> {
  return fc.oneof(
    { weight: 3, arbitrary: search },
    { weight: 3, arbitrary: conditional },
    { weight: 4, arbitrary: patch },
    { weight: 1, arbitrary: write },
    { weight: 3, arbitrary: bundle },
    { weight: 2, arbitrary: graphql },
    { weight: 4, arbitrary: operationRequests(operations) },
  );
}
