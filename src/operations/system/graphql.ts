import type { AppServices } from '../../services';
import { defineRawOperation, type RawInput } from '../operation';
import type { GraphQLRequest } from '../../graphql/service';

/**
 * `$graphql` (R4 OperationDefinition Resource-graphql), at system and instance level: GET with
 * `query` (and `variables` as JSON, `operationName`), or POST with `application/json`
 * `{query, variables, operationName}`, `application/graphql` (the query as the body), or a
 * Parameters with `query`. The answer is `application/json` `{data, errors}`.
 */
export const graphqlOperation = defineRawOperation<AppServices>({
  definition: 'http://hl7.org/fhir/OperationDefinition/Resource-graphql',
  raw: async (input, ctx) => {
    const request = requestOf(input);
    if ('error' in request) {
      const outcome = {
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'error', code: 'invalid', details: { text: request.error } }],
      };
      return {
        status: 400,
        contentType: 'application/json',
        body: { errors: [{ message: request.error, extensions: { outcome, resource: outcome } }] },
      };
    }
    const answer = await ctx.services.graphql.run(request, ctx.request, { method: input.method, target: ctx.target });
    return { status: answer.status, contentType: 'application/json', body: answer.body };
  },
});

function requestOf(input: RawInput): GraphQLRequest | { error: string } {
  if (input.method === 'GET') {
    const one = (name: string) => {
      const value = input.query[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const variables = one('variables');
    let parsed: unknown;
    if (variables !== undefined && variables !== '') {
      try {
        parsed = JSON.parse(variables);
      } catch {
        return { error: 'variables is not JSON' };
      }
    }
    return { query: one('query'), variables: parsed, operationName: one('operationName') };
  }
  const body = input.body;
  if (typeof body === 'string') return { query: body };
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const fields = body as Record<string, unknown>;
    if (fields.resourceType === 'Parameters') {
      const query = (fields.parameter as { name?: string; valueString?: string }[] | undefined)?.find(
        (p) => p.name === 'query',
      )?.valueString;
      return { query };
    }
    return { query: fields.query, variables: fields.variables, operationName: fields.operationName };
  }
  return { error: 'the body must be application/json {query, variables, operationName} or application/graphql' };
}
