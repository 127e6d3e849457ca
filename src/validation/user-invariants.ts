import { fhirError } from '../fhir/errors';
import { invariantVars } from '../fhir/fhirpath/engine';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import type { FhirPathJob } from '../fhir/fhirpath/protocol';
import type { InvariantResult } from './invariants';
import type { PendingInvariant } from './walk/constraints';

/**
 * The invariants of stored profiles (users wrote them) met in one validation, evaluated in one
 * batch in `FhirPathPool`'s workers: the resource is sent once, however many there are. One that
 * runs out of time or memory ends the validation with too-costly (422): what it would have said
 * cannot be told. Without a pool (a validator built for a tool, not the server) they are not
 * evaluated and each says so in a warning.
 */
export async function checkUserInvariants(
  pending: readonly PendingInvariant[],
  options: { pool?: Pick<FhirPathPool, 'evaluate'>; deadline: number },
): Promise<InvariantResult[]> {
  if (pending.length === 0) return [];
  if (!options.pool)
    return pending.map(() => ({ ok: 'unknown', reason: 'invariants of stored profiles are not evaluated here' }));
  const jobs: FhirPathJob[] = pending.map((p) => ({
    expression: p.expression,
    focus: p.focus,
    // One environment per resource, shared by its invariants, so the resource is cloned once.
    vars: (p.env.vars ??= invariantVars(p.env)),
    invariant: { base: p.base },
  }));
  const answers = await options.pool.evaluate(jobs, { deadline: options.deadline });
  return answers.map((answer, i): InvariantResult => {
    if (answer.ok) return answer.summary.length === 1 && answer.summary.first === false ? { ok: false } : { ok: true };
    if (answer.error === 'invalid') return { ok: 'unknown', reason: answer.message };
    const { key } = pending[i].constraint;
    throw fhirError('ERR_OP_TOO_COSTLY', {
      what: `The invariant ${key} of a stored profile was stopped: ${answer.message}`,
    });
  });
}
