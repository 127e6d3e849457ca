/**
 * npm run reindex [-- Type ...]: rebuilds the search index of every current resource (or of the
 * types named) from the storage the configuration names (DATA_DIR or DATABASE_URL), with the
 * server's extraction of today. Safe while servers run: each batch is one transaction.
 */
import { buildCore } from '../core';
import { ResourceValidator } from '../validation/validator';
import { StructuralCheck } from '../validation/write-checks';
import { commandConfig } from './configuration';
import { buildRegistry, loadDefinitions } from '../operations/registry';
import { operationModules } from '../operations/index';
import { DEFINITIONS_DIR } from '../project';
import { openStore } from '../storage/open-store';

async function main(): Promise<number> {
  const config = commandConfig();
  if (!config) return 2;
  const types = process.argv.slice(2);
  const store = await openStore(config);
  try {
    const core = buildCore({
      store,
      schema: new StructuralCheck(new ResourceValidator()),
      registry: buildRegistry(loadDefinitions(DEFINITIONS_DIR), operationModules),
    });
    await core.custom.refresh();
    const started = Date.now();
    const tty = process.stderr.isTTY;
    const done = await core.indexer.reindex({
      types: types.length > 0 ? types : undefined,
      onProgress: (n) => {
        if (tty) process.stderr.write(`\rreindexed ${n} resources`);
      },
    });
    if (types.length === 0) await core.indexer.markCurrent();
    await core.custom.settled();
    const seconds = (Date.now() - started) / 1000;
    process.stderr.write(
      `${tty ? '\n' : ''}reindexed ${done} resources in ${seconds.toFixed(1)} s (${Math.round(done / Math.max(seconds, 0.001))}/s)\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`reindex failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
