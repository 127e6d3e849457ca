import type { CodeSystem, ValueSet } from 'fhir/r4';
import { describe, expect, test } from 'vitest';
import { codeServiceFor } from '../../src/measures/code-service';
import type { LoadedLibrary } from '../../src/measures/library-closure';
import { terminologySession } from '../../src/operations/terminology-support';
import type { OperationContext } from '../../src/operations/operation';
import { engineCodeMatcher } from '../../src/search/engine-codes';
import type { AppServices } from '../../src/services';
import { CanonicalIndex, TerminologyService, type TerminologyResource } from '../../src/terminology/service';
import { terminologyPort } from '../../src/validation/terminology-port';

/**
 * The one rule for "membership cannot be decided here" (src/terminology/membership/undecidable.ts),
 * as each in-process caller meets it: a code found not to be a member is undecidable when the
 * system it would be judged in is one the value set draws on and whose content this server lacks;
 * codes a value set lists by hand need no content when only membership is asked.
 */

const HELD = 'http://example.org/held';
const ABSENT = 'http://example.org/absent';
const PROJECT = 'p1';

const held = {
  resourceType: 'CodeSystem',
  url: HELD,
  status: 'active',
  content: 'complete',
  concept: [{ code: 'a', display: 'A', concept: [{ code: 'a1', display: 'A1' }] }],
} satisfies CodeSystem;

/** Takes the absent system whole: nothing here can say which of its codes are in. */
const wholeAbsent = {
  resourceType: 'ValueSet',
  url: 'http://example.org/vs/whole-absent',
  status: 'active',
  compose: { include: [{ system: ABSENT }, { system: HELD, concept: [{ code: 'a' }] }] },
} satisfies ValueSet;

/** Lists codes of the absent system by hand: membership alone is decided by the list. */
const listedAbsent = {
  resourceType: 'ValueSet',
  url: 'http://example.org/vs/listed-absent',
  status: 'active',
  compose: { include: [{ system: ABSENT, concept: [{ code: 'x' }] }] },
} satisfies ValueSet;

function service(): TerminologyService {
  const index = new CanonicalIndex();
  for (const r of [held, wholeAbsent, listedAbsent] as TerminologyResource[]) index.add(r);
  const empty = new CanonicalIndex();
  return new TerminologyService(new CanonicalIndex(), {
    of: (project) => ({ index: project === PROJECT ? index : empty, generation: 0, refresh: () => undefined }),
  });
}

describe('undecidable membership, one rule for every caller', () => {
  test('search: a code of a system taken whole but not held cannot be judged, and the search says so', async () => {
    const matcher = engineCodeMatcher(service());
    const inWhole = await matcher.valueSet(wholeAbsent.url, PROJECT);
    expect(inWhole?.(HELD, 'a')).toBe(true);
    expect(inWhole?.(HELD, 'a1')).toBe(false);
    expect(() => inWhole?.(ABSENT, 'x')).toThrow(/ValueSet|value set/i);
    const inListed = await matcher.valueSet(listedAbsent.url, PROJECT);
    expect(inListed?.(ABSENT, 'x')).toBe(true);
    expect(inListed?.(ABSENT, 'y')).toBe(false);
  });

  test('validation: a binding to a code of a system not held is unchecked, a wrong code of a held one invalid', async () => {
    const port = terminologyPort(service());
    const options = { deadline: Date.now() + 60_000, project: PROJECT };
    const [absent, wrong, right] = await port.check(
      [
        { valueSet: wholeAbsent.url, kind: 'Coding', codings: [{ system: ABSENT, code: 'x' }] },
        { valueSet: wholeAbsent.url, kind: 'Coding', codings: [{ system: HELD, code: 'a1' }] },
        { valueSet: wholeAbsent.url, kind: 'Coding', codings: [{ system: HELD, code: 'a' }] },
      ],
      options,
    );
    expect(absent?.status).toBe('unchecked');
    expect(absent).toMatchObject({ message: expect.stringContaining(ABSENT) });
    expect(wrong?.status).toBe('invalid');
    expect(right?.status).toBe('valid');
  });

  test('measures: a value set listed by hand gives its list; one that takes a system not held cannot be evaluated', async () => {
    const terminology = service();
    const library = (url: string): LoadedLibrary =>
      ({
        canonical: 'http://example.org/Library/l|1',
        elm: { library: { valueSets: { def: [{ id: url, name: 'vs' }] } } },
      }) as unknown as LoadedLibrary;
    const options = { terminology, project: PROJECT, checkBudget: () => undefined };
    const codes = await codeServiceFor([library(listedAbsent.url)], options);
    const listed = await codes.findValueSet(listedAbsent.url);
    expect(listed?.codes.map((c) => c.code)).toEqual(['x']);
    await expect(codeServiceFor([library(wholeAbsent.url)], options)).rejects.toThrow(/cannot be expanded/);
  });

  test('operations: the session a terminology operation works in answers by the same rule', async () => {
    const ctx = {
      services: { terminology: service(), config: { operationTimeoutMs: 1000 } },
      request: { project: PROJECT },
      deadline: Date.now() + 60_000,
    } as unknown as OperationContext<AppServices>;
    const session = await terminologySession({ 'valueset-membership-only': true }, ctx, 'validate-code');
    expect(session.membership(wholeAbsent, { system: HELD, code: 'a' })).toBe('member');
    expect(session.membership(wholeAbsent, { system: HELD, code: 'a1' })).toBe('not-member');
    expect(session.membership(wholeAbsent, { system: ABSENT, code: 'x' })).toBe('undecidable');
    expect(session.membership(listedAbsent, { system: ABSENT, code: 'y' })).toBe('not-member');
    const full = await terminologySession({}, ctx, 'validate-code');
    expect(full.membership(wholeAbsent, { system: ABSENT, code: 'x' })).toBe('undecidable');
    expect(full.membership(wholeAbsent, { system: HELD, code: 'a1' })).toBe('not-member');
  });
});
