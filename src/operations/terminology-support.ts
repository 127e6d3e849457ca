import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError, type FhirError } from '../fhir/errors';
import { TerminologyError, toFhirIssue, type TerminologySession, type TxParamsInput } from '../terminology/service';
import type { AppServices } from '../services';
import type { OperationContext } from './operation';

/** What the terminology operations share: a terminology session from an invocation, errors, outputs. */

/** The engine, for one invocation of `operation` (its code, for messages). */
export function terminologySession(
  input: TxParamsInput & { 'tx-resource'?: Resource[] },
  ctx: OperationContext<AppServices>,
  operation: string,
): Promise<TerminologySession> {
  const deadline = ctx.deadline;
  const budget = ctx.services.config.operationTimeoutMs;
  return ctx.services.terminology.session({
    project: ctx.request.project,
    input,
    acceptLanguage: ctx.acceptLanguage,
    requestResources: input['tx-resource'] ?? [],
    checkBudget: () => {
      if (Date.now() > deadline) throw fhirError('ERR_OP_TIMEOUT', { code: operation, ms: budget });
    },
  });
}

/** Runs engine work, turning a TerminologyError into the FhirError the HTTP layer answers with. */
export async function withTerminologyErrors<T>(work: () => Promise<T> | T): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof TerminologyError) throw terminologyFailure(err);
    throw err;
  }
}

export function terminologyFailure(err: TerminologyError): FhirError {
  return fhirError(
    'ERR_TX_REQUEST',
    { text: err.issue.text },
    { status: err.status ?? 400, issues: [toFhirIssue(err.issue)] },
  );
}

/** Terminology answers depend on the request and the terminology content: reusable while it is unchanged. */
export const terminologyAnswerToken = (services: AppServices, request: RequestContext): Promise<string> =>
  services.terminology.stateToken(request.project);
