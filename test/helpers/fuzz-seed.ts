import fc from 'fast-check';

/**
 * Fuzz tests run with a fixed seed, so that CI is repeatable: the same cases each run.
 * `FUZZ_SEED=<n>` picks another, `FUZZ_SEED=random` a new one each run (printed, to replay a
 * failure); run them so from time to time to find what the fixed seed does not reach.
 */
export function seedFuzzing(): void {
  const raw = process.env.FUZZ_SEED;
  const seed =
    raw === 'random' ? Math.floor(Math.random() * 2 ** 31) : raw !== undefined && raw !== '' ? Number(raw) : 20261124;
  if (raw === 'random') console.info(`fuzz seed ${seed} (FUZZ_SEED=${seed} replays it)`);
  fc.configureGlobal({ seed });
}
