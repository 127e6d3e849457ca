/** What the OpenAPI document's parts share: JSON shapes, component references and the FHIR answers. */
export type Json = Record<string, unknown>;
export type PathItem = Record<string, Json>;

export const FHIR_JSON = 'application/fhir+json';
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
/** The document repeats itself over ~150 types: shared parameters and answers are components, referenced. */
export const paramRef = (name: string) => ({ $ref: `#/components/parameters/${name}` });
export const idParam = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[A-Za-z0-9\\-.]{1,64}$' },
  description,
});
export const ID = paramRef('id');
export const VID = paramRef('vid');
/** Parameters every search takes, whatever the type. */
export const RESULT_PARAM_NAMES = [
  '_count',
  '_offset',
  '_sort',
  '_include',
  '_revinclude',
  '_summary',
  '_elements',
  '_total',
];
export const RESULT_PARAMS = RESULT_PARAM_NAMES.map(paramRef);

export type Answer = 'Resource' | 'Bundle' | 'Parameters';
export const ANSWERS: Record<Answer, string> = {
  Resource: 'The resource',
  Bundle: 'A Bundle (searchset, history, or the response to a batch or transaction)',
  Parameters: 'The output Parameters',
};

export function fhirAnswer(kind: Answer = 'Resource'): Json {
  return { '200': { $ref: `#/components/responses/${kind}` }, default: { $ref: '#/components/responses/Error' } };
}

export function fhirBody(schema: Json, description: string): Json {
  return { required: true, description, content: { [FHIR_JSON]: { schema } } };
}

export function op(tag: string, operationId: string, summary: string, extra: Json = {}): Json {
  return { tags: [tag], operationId, summary, responses: fhirAnswer(), ...extra };
}

export function patchBody(): Json {
  return {
    required: true,
    content: {
      'application/json-patch+json': { schema: { type: 'array', items: { type: 'object' } } },
      [FHIR_JSON]: { schema: ref('Parameters') },
    },
  };
}

export function formBody(): Json {
  return {
    required: false,
    content: {
      'application/x-www-form-urlencoded': { schema: { type: 'object', additionalProperties: { type: 'string' } } },
    },
  };
}
