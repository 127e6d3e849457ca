import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4';

/**
 * The one catalogue of errors the server answers with. Each code has its HTTP status, its
 * OperationOutcome issue code and a message template; code everywhere throws `fhirError(code, ...)`
 * and the HTTP layer turns it into an OperationOutcome in one place.
 */
type IssueCode = OperationOutcomeIssue['code'];

interface ErrorSpec<P> {
  status: number;
  issue: IssueCode;
  message: (p: P) => string;
}

function spec<P = Record<string, never>>(status: number, issue: IssueCode, message: (p: P) => string): ErrorSpec<P> {
  return { status, issue, message };
}

export const ERRORS = {
  // routing
  ERR_ROUTE_UNKNOWN: spec<{ method: string; path: string }>(
    404,
    'not-found',
    (p) => `There is no ${p.method} ${p.path} on this server`,
  ),
  ERR_ROUTE_METHOD: spec<{ method: string; path: string; allowed: string }>(
    405,
    'not-supported',
    (p) => `${p.method} is not allowed on ${p.path}; use ${p.allowed}`,
  ),
  ERR_URL_MALFORMED: spec(400, 'invalid', () => 'The request URL is malformed'),
  ERR_URL_TOO_LONG: spec<{ limit: number }>(
    414,
    'invalid',
    (p) => `A segment of the URL path is longer than ${p.limit} characters`,
  ),
  ERR_REQUEST_INVALID: spec<{ reason: string }>(400, 'invalid', (p) => `The request cannot be read: ${p.reason}`),
  ERR_TYPE_UNKNOWN: spec<{ type: string }>(
    404,
    'not-supported',
    (p) => `Resource type '${p.type}' is not supported by this server`,
  ),
  ERR_TYPE_READ_ONLY: spec<{ type: string }>(
    405,
    'not-supported',
    (p) => `${p.type} resources are read-only on this server`,
  ),
  // operations
  ERR_OP_UNKNOWN: spec<{ code: string; where: string }>(
    404,
    'not-supported',
    (p) => `Operation $${p.code} is not known ${p.where}`,
  ),
  ERR_OP_LEVEL: spec<{ code: string; level: string; levels: string }>(
    400,
    'not-supported',
    (p) => `Operation $${p.code} cannot be invoked at the ${p.level} level (allowed: ${p.levels})`,
  ),
  ERR_OP_GET_AFFECTS_STATE: spec<{ code: string }>(
    405,
    'not-supported',
    (p) => `Operation $${p.code} changes state and must be invoked with POST`,
  ),
  ERR_OP_OUTPUT: spec<{ code: string }>(
    500,
    'exception',
    (p) => `Operation $${p.code} produced an answer that breaks its definition`,
  ),
  ERR_OP_TOO_COSTLY: spec<{ what: string }>(422, 'too-costly', (p) => p.what),
  ERR_OP_TIMEOUT: spec<{ code: string; ms: number }>(
    422,
    'too-costly',
    (p) => `Operation $${p.code} did not finish within its time budget of ${p.ms} ms`,
  ),
  // request bodies
  ERR_BODY_JSON: spec<{ reason: string }>(400, 'structure', (p) => `The request body is not valid JSON: ${p.reason}`),
  ERR_BODY_TOO_DEEP: spec<{ limit: number }>(
    400,
    'structure',
    (p) => `The request body is nested more than ${p.limit} levels deep`,
  ),
  ERR_BODY_MISSING: spec(400, 'required', () => 'The request needs a body'),
  ERR_BODY_TOO_LARGE: spec<{ limit: number }>(
    413,
    'too-costly',
    (p) => `The request body is larger than ${p.limit} bytes`,
  ),
  ERR_BODY_CONTENT_TYPE: spec<{ contentType: string }>(
    415,
    'not-supported',
    (p) => `Content-Type '${p.contentType}' is not supported; send application/fhir+json or application/json`,
  ),
  ERR_BODY_NOT_RESOURCE: spec<{ expected: string }>(
    400,
    'structure',
    (p) => `The request body must be a ${p.expected} resource`,
  ),
  ERR_BODY_NOT_PARAMETERS: spec<{ found: string }>(
    400,
    'structure',
    (p) => `An operation invoked with POST takes a Parameters resource, not ${p.found}`,
  ),
  // operation parameters
  ERR_PARAM_MISSING: spec<{ name: string }>(400, 'required', (p) => `Parameter '${p.name}' is required`),
  ERR_PARAM_TOO_MANY: spec<{ name: string; max: string; count: number }>(
    400,
    'invalid',
    (p) => `Parameter '${p.name}' may occur at most ${p.max} time(s), not ${p.count}`,
  ),
  ERR_PARAMS_LIMIT: spec<{ count: number; limit: number }>(
    400,
    'too-costly',
    (p) => `The request carries ${p.count} parameters; at most ${p.limit} are accepted`,
  ),
  ERR_CODINGS_LIMIT: spec<{ name: string; count: number; limit: number }>(
    400,
    'too-costly',
    (p) => `Parameter '${p.name}' has ${p.count} codings; at most ${p.limit} are accepted`,
  ),
  ERR_PARAM_TYPE: spec<{ name: string; expected: string; found: string }>(
    400,
    'invalid',
    (p) => `Parameter '${p.name}' must be of type ${p.expected}, not ${p.found}`,
  ),
  ERR_PARAM_VALUE: spec<{ name: string; type: string; value: string }>(
    400,
    'invalid',
    (p) => `Parameter '${p.name}' value '${p.value}' is not a valid ${p.type}`,
  ),
  ERR_PARAM_SHAPE: spec<{ name: string; reason: string }>(
    400,
    'structure',
    (p) => `Parameter '${p.name}': ${p.reason}`,
  ),
  ERR_PARAM_DATATYPE: spec<{ name: string; type: string; path: string; reason: string }>(
    400,
    'invalid',
    (p) => `Parameter '${p.name}' is not a valid ${p.type}: ${p.path} ${p.reason}`,
  ),
  ERR_PARAM_UNKNOWN: spec<{ name: string; code: string }>(
    400,
    'not-supported',
    (p) => `Parameter '${p.name}' is not defined for $${p.code} (Prefer: handling=strict)`,
  ),
  ERR_PARAM_NOT_IN_GET: spec<{ name: string; type: string }>(
    400,
    'not-supported',
    (p) => `Parameter '${p.name}' is of type ${p.type} and cannot be given in a GET; use POST with a Parameters body`,
  ),
  ERR_PARAM_RULE: spec<{ message: string }>(400, 'invalid', (p) => p.message),
  // resources
  ERR_RESOURCE_NOT_FOUND: spec<{ type: string; id: string }>(404, 'not-found', (p) => `${p.type}/${p.id} is not known`),
  ERR_RESOURCE_DELETED: spec<{ type: string; id: string }>(410, 'deleted', (p) => `${p.type}/${p.id} has been deleted`),
  ERR_VERSION_NOT_FOUND: spec<{ type: string; id: string; vid: string }>(
    404,
    'not-found',
    (p) => `${p.type}/${p.id} has no version ${p.vid}`,
  ),
  ERR_RESOURCE_INVALID: spec<{ type: string; path: string; reason: string }>(
    400,
    'structure',
    (p) => `The ${p.type} is not valid at ${p.path}: ${p.reason}`,
  ),
  ERR_SUBSCRIPTION_INVALID: spec<{ path: string; reason: string }>(
    400,
    'invalid',
    (p) => `The Subscription is not valid at ${p.path}: ${p.reason}`,
  ),
  ERR_SUBSCRIPTION_CHANNEL: spec<{ channel: string }>(
    400,
    'not-supported',
    (p) => `Subscription channel type '${p.channel}' is not supported (rest-hook and websocket are)`,
  ),
  ERR_SUBSCRIPTION_SOCKETS: spec<{ max: number }>(
    429,
    'throttled',
    (p) => `This address already holds ${p.max} open subscription websockets, the most it may; close one first`,
  ),
  ERR_SUBSCRIPTION_SOCKETS_FULL: spec<{ max: number }>(
    503,
    'transient',
    (p) => `The server holds ${p.max} open subscription websockets, the most it may; try again later`,
  ),
  ERR_RESOURCE_TYPE_MISMATCH: spec<{ expected: string; found: string }>(
    400,
    'invalid',
    (p) => `The body is a ${p.found} but the URL is for ${p.expected}`,
  ),
  ERR_RESOURCE_ID_MISSING: spec(400, 'required', () => 'The resource in an update must carry the id given in the URL'),
  ERR_RESOURCE_ID_MISMATCH: spec<{ url: string; body: string }>(
    400,
    'invalid',
    (p) => `The id in the body ('${p.body}') differs from the id in the URL ('${p.url}')`,
  ),
  ERR_RESOURCE_ID_INVALID: spec<{ id: string }>(400, 'invalid', (p) => `'${p.id}' is not a valid resource id`),
  ERR_VERSION_IF_MATCH_INVALID: spec<{ value: string }>(
    400,
    'invalid',
    (p) => `If-Match '${p.value}' is not an ETag such as W/"3"`,
  ),
  ERR_VERSION_CONFLICT: spec<{ type: string; id: string; expected: string; current: string }>(
    412,
    'conflict',
    (p) => `If-Match expects ${p.type}/${p.id} at version ${p.expected}, but it is ${p.current}`,
  ),
  ERR_WRITE_CONFLICT: spec(409, 'conflict', () => 'The data was changed by other requests at the same time; try again'),
  ERR_RESOURCE_EXISTS: spec<{ type: string; id: string }>(409, 'duplicate', (p) => `${p.type}/${p.id} exists already`),
  ERR_SEARCH_PARAM: spec<{ name: string; value: string }>(
    400,
    'invalid',
    (p) => `Search parameter '${p.name}' has an invalid value '${p.value}'`,
  ),
  ERR_SEARCH_MODIFIER: spec<{ name: string; modifier: string }>(
    400,
    'invalid',
    (p) => `Search parameter '${p.name}': the modifier ':${p.modifier}' does not apply to it`,
  ),
  ERR_SEARCH_UNKNOWN: spec<{ name: string; types: string }>(
    400,
    'not-supported',
    (p) => `Search parameter '${p.name}' is not known for ${p.types} (Prefer: handling=strict)`,
  ),
  ERR_SEARCH_UNSUPPORTED: spec<{ name: string }>(
    400,
    'not-supported',
    (p) => `Search parameter '${p.name}' is not supported by this server`,
  ),
  ERR_SEARCH_PARAM_INDEXING: spec<{ name: string }>(
    400,
    'transient',
    (p) => `Search parameter '${p.name}' is being indexed; it can be used once indexing is complete`,
  ),
  ERR_SEARCH_CHAIN_DEPTH: spec<{ name: string; limit: number }>(
    400,
    'too-costly',
    (p) => `Search parameter '${p.name}' chains more than ${p.limit} levels`,
  ),
  ERR_SEARCH_CURSOR: spec(
    400,
    'invalid',
    () => 'The paging cursor is not valid for this search; start again from the first page',
  ),
  ERR_SEARCH_COMPARTMENT: spec<{ compartment: string }>(
    400,
    'not-supported',
    (p) =>
      `There is no ${p.compartment} compartment (R4 defines Patient, Encounter, RelatedPerson, Practitioner and Device)`,
  ),
  ERR_SEARCH_VALUESET: spec<{ name: string; url: string }>(
    400,
    'invalid',
    (p) => `Search parameter '${p.name}': the value set '${p.url}' is not known`,
  ),
  ERR_SEARCH_VALUESET_CONTENT: spec<{ url: string; system: string }>(
    422,
    'not-supported',
    (p) =>
      `The value set '${p.url}' selects codes of '${p.system}' by filter or as a whole, and this server does not hold that code system's content, so membership cannot be decided`,
  ),
  ERR_SEARCH_TOO_COSTLY: spec<{ what: string }>(422, 'too-costly', (p) => p.what),
  // conditional interactions, patch, bundles
  ERR_CONDITIONAL_EMPTY: spec<{ type: string }>(
    400,
    'invalid',
    (p) => `A conditional interaction on ${p.type} needs search criteria`,
  ),
  ERR_CONDITIONAL_MULTIPLE: spec<{ type: string; criteria: string }>(
    412,
    'multiple-matches',
    (p) => `The criteria '${p.criteria}' match more than one ${p.type}; the conditional interaction needs exactly one`,
  ),
  ERR_CONDITIONAL_TOO_MANY: spec<{ type: string; criteria: string; limit: number }>(
    412,
    'too-costly',
    (p) => `The criteria '${p.criteria}' match more than ${p.limit} ${p.type} resources; refine them`,
  ),
  ERR_CONDITIONAL_ID: spec<{ id: string }>(
    400,
    'invalid',
    (p) => `The resource's id ('${p.id}') is not the id of the resource the criteria match`,
  ),
  ERR_DELETE_REFERENCED: spec<{ type: string; id: string; by: string }>(
    409,
    'conflict',
    (p) => `${p.type}/${p.id} is referenced by ${p.by} and Prefer: handling=strict was asked; it was not deleted`,
  ),
  ERR_PATCH_FORMAT: spec<{ contentType: string }>(
    415,
    'not-supported',
    (p) =>
      `A patch must be application/json-patch+json (JSON Patch) or a Parameters resource (FHIRPath Patch), not '${p.contentType}'`,
  ),
  ERR_PATCH_INVALID: spec<{ reason: string }>(400, 'invalid', (p) => `The patch cannot be applied: ${p.reason}`),
  ERR_PATCH_FAILED: spec<{ reason: string }>(422, 'processing', (p) => `The patch cannot be applied: ${p.reason}`),
  ERR_PATCH_TOO_MANY: spec<{ count: number; limit: number }>(
    400,
    'too-costly',
    (p) => `The patch has ${p.count} operations; at most ${p.limit} are accepted (send larger changes with PUT)`,
  ),
  ERR_PATCH_TOO_LARGE: spec<{ index: number; limit: number }>(
    422,
    'too-costly',
    (p) =>
      `The patch cannot be applied: operation ${p.index} (numbered from 0) would make the resource larger than ${p.limit} bytes; nothing was changed`,
  ),
  ERR_BUNDLE_INVALID: spec<{ reason: string }>(400, 'invalid', (p) => p.reason),
  ERR_BUNDLE_ENTRY: spec<{ index: number; reason: string }>(
    400,
    'invalid',
    (p) => `Bundle.entry[${p.index}]: ${p.reason}`,
  ),
  ERR_BUNDLE_TOO_LARGE: spec<{ count: number; limit: number }>(
    413,
    'too-costly',
    (p) => `The Bundle has ${p.count} entries; at most ${p.limit} are accepted`,
  ),
  ERR_HISTORY_PARAM: spec<{ name: string; value: string }>(
    400,
    'invalid',
    (p) => `History parameter '${p.name}' has an invalid value '${p.value}'`,
  ),
  // terminology
  ERR_TX_VALUESET_UNKNOWN: spec<{ url: string }>(
    400,
    'invalid',
    (p) => `A definition for the value Set '${p.url}' could not be found`,
  ),
  ERR_TX_VALUESET_VERSION_UNKNOWN: spec<{ url: string }>(
    404,
    'not-found',
    (p) => `A definition for the value Set '${p.url}' could not be found`,
  ),
  ERR_TX_CONCEPTMAP_UNKNOWN: spec<{ url: string }>(
    404,
    'not-found',
    (p) => `A definition for the concept map '${p.url}' could not be found`,
  ),
  ERR_TX_NO_VALUESET: spec<{ code: string }>(
    400,
    'required',
    (p) => `$${p.code} needs a value set: give url or valueSet, or invoke it on ValueSet/<id>`,
  ),
  ERR_TX_NOTHING_TO_VALIDATE: spec(
    400,
    'invalid',
    () =>
      'Unable to find code to validate (looked for coding | codeableConcept | code+system | code+inferSystem in parameters',
  ),
  ERR_TX_REQUEST: spec<{ text: string }>(400, 'invalid', (p) => p.text),
  // validation
  ERR_VALIDATION_PROFILE_UNKNOWN: spec<{ url: string }>(
    400,
    'not-found',
    (p) => `The profile '${p.url}' is not known to this server`,
  ),
  ERR_VALIDATION_PROFILE_INVALID: spec<{ url: string; reason: string }>(400, 'processing', (p) => p.reason),
  ERR_VALIDATION_FAILED: spec<{ type: string; count: number }>(
    422,
    'processing',
    (p) => `The ${p.type} was not stored: validation found ${p.count} error(s)`,
  ),
  // IG packages
  ERR_PACKAGE_INVALID: spec<{ reason: string }>(
    400,
    'invalid',
    (p) => `The package cannot be imported (nothing was stored): ${p.reason}`,
  ),
  ERR_PACKAGE_RESOURCE: spec<{ file: string; reason: string }>(
    400,
    'invalid',
    (p) => `The package cannot be imported (nothing was stored): ${p.file}: ${p.reason}`,
  ),
  ERR_PACKAGE_TOO_LARGE: spec<{ limit: number }>(
    413,
    'too-costly',
    (p) => `The package cannot be imported (nothing was stored): it unpacks to more than ${p.limit} bytes`,
  ),
  // measures ($evaluate-measure)
  ERR_MEASURE_UNKNOWN: spec<{ measure: string }>(404, 'not-found', (p) => `The Measure '${p.measure}' is not known`),
  ERR_MEASURE_PERIOD: spec<{ start: string; end: string }>(
    400,
    'invalid',
    (p) => `The measurement period ends (${p.end}) before it starts (${p.start})`,
  ),
  ERR_MEASURE_SUBJECT: spec<{ subject: string; reason: string }>(
    400,
    'invalid',
    (p) => `Subject '${p.subject}': ${p.reason}`,
  ),
  ERR_MEASURE_LIBRARY_MISSING: spec<{ library: string; from: string }>(
    422,
    'not-found',
    (p) => `The Library '${p.library}' that ${p.from} depends on is not on this server`,
  ),
  ERR_MEASURE_NO_ELM: spec<{ library: string }>(
    422,
    'not-supported',
    (p) =>
      `The Library '${p.library}' has no application/elm+json content; this server runs CQL only as ELM (translate the CQL first)`,
  ),
  ERR_MEASURE_ELM_INVALID: spec<{ library: string; reason: string }>(
    422,
    'invalid',
    (p) => `The ELM of Library '${p.library}' cannot be used: ${p.reason}`,
  ),
  ERR_MEASURE_INVALID: spec<{ measure: string; reason: string }>(
    422,
    'invalid',
    (p) => `The Measure '${p.measure}' cannot be evaluated: ${p.reason}`,
  ),
  ERR_MEASURE_EVALUATION: spec<{ expression: string; reason: string }>(
    422,
    'processing',
    (p) => `Evaluating '${p.expression}' failed: ${p.reason}`,
  ),
  // security
  ERR_AUTH_MISSING: spec(401, 'login', () => 'This server requires a bearer token (Authorization: Bearer <token>)'),
  ERR_AUTH_INVALID: spec(401, 'login', () => 'The bearer token is not valid'),
  ERR_OP_RAW: spec<{ code: string }>(
    400,
    'not-supported',
    (p) => `$${p.code} takes its own request body and cannot run in a Bundle entry`,
  ),
  ERR_AUTH_FORBIDDEN: spec<{ reason: string }>(403, 'forbidden', (p) => `Not allowed: ${p.reason}`),
  ERR_PROJECT_HEADER: spec<{ project: string }>(
    400,
    'invalid',
    (p) => `X-Project '${p.project}' names no project this request may act in`,
  ),
  ERR_INIT_INVALID: spec<{ reason: string }>(400, 'invalid', (p) => `The project was not created: ${p.reason}`),
  // bots
  ERR_BOT_DEPLOY: spec<{ reason: string }>(400, 'invalid', (p) => `The bot was not deployed: ${p.reason}`),
  ERR_BOT_NOT_DEPLOYED: spec<{ id: string }>(
    400,
    'invalid',
    (p) => `Bot/${p.id} has no deployed code; deploy it first (Bot/${p.id}/$deploy)`,
  ),
  ERR_BOT_NOT_FOUND: spec<{ what: string }>(404, 'not-found', (p) => `No bot found for ${p.what}`),
  ERR_BOT_FAILED: spec<{ message: string }>(400, 'processing', (p) => `The bot failed: ${p.message}`),
  ERR_BOT_INPUT: spec<{ reason: string }>(400, 'invalid', (p) => `The bot cannot be run: ${p.reason}`),
  ERR_BOT_BUSY: spec<{ running: number; waiting: number }>(
    429,
    'throttled',
    (p) =>
      `This project's bots hold their share of the bot sandbox (${p.running} running, ${p.waiting} waiting); try again later (Retry-After)`,
  ),
  ERR_BOT_SCHEDULE: spec<{ path: string; reason: string }>(
    400,
    'invalid',
    (p) => `The Bot's schedule (${p.path}) cannot be run: ${p.reason}`,
  ),
  // bulk data
  ERR_BULK_ASYNC: spec(400, 'invalid', () => "Bulk export runs asynchronously: send 'Prefer: respond-async'"),
  ERR_BULK_PARAM: spec<{ name: string; reason: string }>(
    400,
    'not-supported',
    (p) => `Bulk export parameter '${p.name}': ${p.reason}`,
  ),
  ERR_BULK_TOO_FAST: spec<{ seconds: number }>(
    429,
    'throttled',
    (p) => `The export's status was asked again too soon; wait ${p.seconds} s (Retry-After) between polls`,
  ),
  ERR_BULK_TOO_MANY: spec<{ limit: number; seconds: number }>(
    429,
    'throttled',
    (p) =>
      `This project already has ${p.limit} exports queued or running; wait for one to finish, or DELETE one, and kick off again (Retry-After: ${p.seconds} s)`,
  ),
  ERR_BULK_NOT_FOUND: spec(
    404,
    'not-found',
    () => 'No such export: it was never started, was cancelled, or has expired',
  ),
  ERR_BULK_FAILED: spec<{ reason: string }>(500, 'exception', (p) => `The export failed: ${p.reason}`),
  // infrastructure
  ERR_STORAGE_UNAVAILABLE: spec(503, 'transient', () => 'The storage is not available right now; try again shortly'),
  ERR_STORAGE_FULL: spec(
    507,
    'no-store',
    () =>
      'The storage is full: nothing of this request was written (earlier writes are kept); try again once space is freed',
  ),
  ERR_STORAGE_TIMEOUT: spec<{ ms: number }>(
    503,
    'timeout',
    (p) => `The storage did not answer within ${p.ms} ms; try again shortly`,
  ),
  ERR_SERVER_NOT_READY: spec<{ check: string; reason: string }>(
    503,
    'transient',
    (p) => `The server is not ready: ${p.check}: ${p.reason}`,
  ),
  ERR_FORMAT_NOT_ACCEPTABLE: spec<{ accept: string }>(
    406,
    'not-supported',
    (p) => `Cannot answer in '${p.accept}'; this server speaks application/fhir+json`,
  ),
  ERR_SERVER_INTERNAL: spec(500, 'exception', () => 'An unexpected error occurred; it has been logged'),
} as const;

export type ErrorCode = keyof typeof ERRORS;
type ParamsOf<C extends ErrorCode> = (typeof ERRORS)[C] extends ErrorSpec<infer P> ? P : never;

/** Thrown anywhere; answered as an OperationOutcome with the catalogue's status. */
export class FhirError extends Error {
  readonly status: number;
  readonly outcome: OperationOutcome;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: { status: number; outcome: OperationOutcome; headers?: Record<string, string> },
  ) {
    super(message);
    this.name = 'FhirError';
    this.status = options.status;
    this.outcome = options.outcome;
    this.headers = options.headers ?? {};
  }
}

export interface FhirErrorOptions {
  /** Where in the request the problem is (FHIRPath-like), e.g. `Parameters.parameter[2]`. */
  expression?: string[];
  headers?: Record<string, string>;
  /** Replaces the catalogue's single issue, for answers whose issues have a fixed shape. */
  issues?: OperationOutcomeIssue[];
  /** Replaces the catalogue's status where a caller needs a different one in its family. */
  status?: number;
}

export function fhirError<C extends ErrorCode>(
  code: C,
  params: ParamsOf<C>,
  options: FhirErrorOptions = {},
): FhirError {
  const entry = ERRORS[code] as ErrorSpec<ParamsOf<C>>;
  const message = entry.message(params);
  const issue: OperationOutcomeIssue = { severity: 'error', code: entry.issue, details: { text: message } };
  if (options.expression) issue.expression = options.expression;
  const outcome: OperationOutcome = { resourceType: 'OperationOutcome', issue: options.issues ?? [issue] };
  return new FhirError(code, message, { status: options.status ?? entry.status, outcome, headers: options.headers });
}

export function isFhirError(err: unknown): err is FhirError {
  return err instanceof FhirError;
}
