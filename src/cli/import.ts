/**
 * npm run import -- <package.tgz | folder>: loads the CodeSystems, ValueSets, ConceptMaps,
 * StructureDefinitions and SearchParameters of an NPM-format FHIR package into the storage the
 * configuration names (DATA_DIR or DATABASE_URL), in one transaction: all of it or nothing.
 * Safe while servers run; they see the new content at their next request.
 */
import { readPackageAt } from '../content/fhir-package';
import { importPackage, type ImportPhase, type ImportProgress, type ImportSummary } from '../content/package-import';
import { buildCore } from '../core';
import { commandConfig } from './configuration';
import { buildRegistry, loadDefinitions } from '../operations/registry';
import { operationModules } from '../operations/index';
import { DEFINITIONS_DIR } from '../project';
import { openStore } from '../storage/open-store';
import { loadCoreContent } from '../content/core-content';
import { StoredTerminologies } from '../content/stored-terminology';
import { SYSTEM_PROJECT } from '../storage/store';
import { ResourceValidator } from '../validation/validator';
import { StructuralCheck } from '../validation/write-checks';
import { TerminologyService } from '../terminology/service';

/** Packages read from disk are the operator's own: large ones are allowed (2 GB unpacked). */
const MAX_UNPACKED_BYTES = 2 * 1024 * 1024 * 1024 - 1;

async function main(): Promise<number> {
  const paths = process.argv.slice(2);
  if (paths.length !== 1) {
    process.stderr.write('usage: npm run import -- <package.tgz | package folder>\n');
    return 2;
  }
  const config = commandConfig();
  if (!config) return 2;
  const started = Date.now();
  const progress = new ProgressReport(process.stderr);
  const pkg = await readPackageAt(paths[0], { maxUnpackedBytes: MAX_UNPACKED_BYTES });
  progress.line(
    `${pkg.manifest.name}#${pkg.manifest.version}: ${pkg.files.size} files${pkg.index ? ' (with .index.json)' : ''}`,
  );
  const store = await openStore(config);
  try {
    // Index rows as the server writes them: bare codes of required bindings get their system.
    const terminology = new TerminologyService(loadCoreContent(), new StoredTerminologies(store));
    const registry = buildRegistry(loadDefinitions(DEFINITIONS_DIR), operationModules);
    const core = buildCore({
      store,
      schema: new StructuralCheck(new ResourceValidator()),
      registry,
      bindingSystem: (vs) => terminology.systemOfValueSet(vs),
    });
    // As a server starting over this storage would: stored search parameters, then an index of
    // today's extraction (on a new database this only records its version, so the first server
    // to start over it does not index everything again).
    await core.custom.refresh();
    await core.indexer.ensureCurrent();
    const summary = await importPackage(pkg, {
      repository: core.repository.in(SYSTEM_PROJECT),
      checkResource: (type, resource) => core.checkResource(type, resource, SYSTEM_PROJECT),
      onProgress: (p) => progress.update(p),
    });
    progress.done();
    // Stored SearchParameters among them are indexed before the command ends.
    await core.custom.settled();
    process.stdout.write(describe(summary, Date.now() - started));
    return 0;
  } finally {
    await store.close();
  }
}

/** A bar redrawn in place on a terminal; a line per phase and per tenth of it otherwise (logs, CI). */
class ProgressReport {
  private readonly tty: boolean;
  private phase?: ImportPhase;
  private lastTenth = -1;

  constructor(private readonly out: NodeJS.WriteStream) {
    this.tty = out.isTTY === true;
  }

  line(text: string): void {
    this.out.write(`${text}\n`);
  }

  update({ phase, done, total }: ImportProgress): void {
    const fraction = total === 0 ? 1 : done / total;
    if (phase !== this.phase) {
      if (this.tty && this.phase) this.out.write('\n');
      this.phase = phase;
      this.lastTenth = -1;
    }
    const text = `${LABELS[phase].padEnd(9)} ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')}`;
    if (this.tty) {
      const width = 30;
      const filled = Math.round(fraction * width);
      this.out.write(
        `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(Math.round(fraction * 100)).padStart(3)}% ${text}`,
      );
      return;
    }
    const tenth = Math.floor(fraction * 10);
    if (tenth === this.lastTenth) return;
    this.lastTenth = tenth;
    this.line(`${String(Math.floor(fraction * 100)).padStart(3)}% ${text}`);
  }

  done(): void {
    if (this.tty && this.phase) this.out.write('\n');
  }
}

const LABELS: Record<ImportPhase, string> = { read: 'reading', write: 'writing' };

function describe(summary: ImportSummary, totalMs: number): string {
  const rows = Object.entries(summary.types).sort(([a], [b]) => a.localeCompare(b));
  const total = { created: 0, updated: 0, unchanged: 0 };
  const lines = [`imported ${summary.name}#${summary.version}`];
  lines.push(`  ${'type'.padEnd(20)} ${'created'.padStart(8)} ${'updated'.padStart(8)} ${'unchanged'.padStart(10)}`);
  for (const [type, counts] of rows) {
    lines.push(
      `  ${type.padEnd(20)} ${String(counts.created).padStart(8)} ${String(counts.updated).padStart(8)} ${String(counts.unchanged).padStart(10)}`,
    );
    total.created += counts.created;
    total.updated += counts.updated;
    total.unchanged += counts.unchanged;
  }
  lines.push(
    `  ${'total'.padEnd(20)} ${String(total.created).padStart(8)} ${String(total.updated).padStart(8)} ${String(total.unchanged).padStart(10)}`,
  );
  const skipped = Object.entries(summary.skipped).sort(([a], [b]) => a.localeCompare(b));
  if (skipped.length > 0)
    lines.push(`  not imported (other types): ${skipped.map(([type, n]) => `${type} ${n}`).join(', ')}`);
  const resources = total.created + total.updated + total.unchanged;
  const seconds = totalMs / 1000;
  lines.push(
    `  ${resources} resources in ${seconds.toFixed(1)} s (${Math.round(resources / Math.max(seconds, 0.001))}/s;` +
      ` reading ${(summary.phases.read / 1000).toFixed(1)} s, one transaction ${(summary.phases.write / 1000).toFixed(1)} s)`,
  );
  return `${lines.join('\n')}\n`;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`\nimport failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
