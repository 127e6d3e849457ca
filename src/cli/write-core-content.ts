/**
 * Part of `npm run build`: writes the bundled R4 terminology content without narrative next to the
 * bundle (`tsx src/cli/write-core-content.ts dist/r4-terminology.json`), which the server then
 * reads at start instead of the package's files (src/content/core-content.ts).
 */
import { writeFileSync } from 'node:fs';
import { coreResources, packageVersion, type BuiltContent } from '../content/core-content';

const target = process.argv[2];
if (!target) {
  process.stderr.write('usage: write-core-content <file>\n');
  process.exit(2);
}
const content: BuiltContent = { source: packageVersion(), resources: coreResources() };
writeFileSync(target, JSON.stringify(content));
