import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Bundle, Group, Resource } from 'fhir/r4';
import { sharedMaterial } from './shared';

/**
 * The Synthea set from ../shared/data (100 patients as transaction Bundles, plus hospitals,
 * practitioners and a Group), unpacked once per machine into a temporary folder. Until the
 * server takes transactions, resources are loaded with their `urn:uuid:` references rewritten
 * to `Type/<id>` (every fullUrl here is `urn:uuid:<the resource's id>`).
 */

/** Tests that load it check `SYNTHEA.present` first and otherwise skip with `skipWithout(SYNTHEA)`. */
export const SYNTHEA = sharedMaterial('Synthea', 'data', 'synthea-r4-100.tgz');
export const SYNTHEA_TGZ = SYNTHEA.path;

function unpacked(): string {
  // Tests skip before reaching here; the benchmarks that load Synthea stop with the reason.
  if (!SYNTHEA.present) throw new Error(SYNTHEA.skipReason.replace('tests skipped', 'data missing'));
  const stamp = statSync(SYNTHEA_TGZ).size;
  const dir = join(tmpdir(), `fhir-synthea-${stamp}`);
  const done = join(dir, '.complete');
  if (!existsSync(done)) {
    mkdirSync(dir, { recursive: true });
    execFileSync('tar', ['xzf', SYNTHEA_TGZ, '-C', dir]);
    execFileSync('touch', [done]);
  }
  return join(dir, 'fhir');
}

export interface SyntheaFiles {
  /** One transaction Bundle per patient, in file-name order. */
  patients: Bundle[];
  /** The hospitals' and practitioners' Bundles. */
  shared: Bundle[];
  group: Group;
}

let cached: SyntheaFiles | undefined;

export function syntheaFiles(): SyntheaFiles {
  if (cached) return cached;
  const dir = unpacked();
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  const patients: Bundle[] = [];
  const shared: Bundle[] = [];
  let group: Group | undefined;
  for (const file of files) {
    const json = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Bundle | Group;
    if (json.resourceType === 'Group') group = json;
    else if (file.startsWith('hospital') || file.startsWith('practitioner')) shared.push(json);
    else patients.push(json);
  }
  if (!group) throw new Error('the Synthea set has no Group');
  cached = { patients, shared, group };
  return cached;
}

/** Resources with urn:uuid references rewritten to Type/id; `patients` limits the patient bundles taken. */
export function syntheaResources(options: { patients?: number } = {}): Resource[] {
  const { patients, shared, group } = syntheaFiles();
  const bundles = [...shared, ...patients.slice(0, options.patients ?? patients.length)];
  const typeOf = new Map<string, string>();
  for (const bundle of syntheaFiles().patients.concat(shared)) {
    for (const entry of bundle.entry ?? [])
      if (entry.fullUrl && entry.resource) typeOf.set(entry.fullUrl, entry.resource.resourceType);
  }
  const rewrite = (resource: Resource): Resource =>
    JSON.parse(JSON.stringify(resource), (key, value: unknown) => {
      if (key === 'reference' && typeof value === 'string' && value.startsWith('urn:uuid:')) {
        const type = typeOf.get(value);
        return type ? `${type}/${value.slice('urn:uuid:'.length)}` : value;
      }
      return value;
    }) as Resource;
  const out: Resource[] = [];
  const seen = new Set<string>();
  for (const bundle of bundles) {
    for (const entry of bundle.entry ?? []) {
      if (!entry.resource) continue;
      const key = `${entry.resource.resourceType}/${entry.resource.id}`;
      // Hospitals and practitioners repeat in every patient's bundle; by id they are one resource.
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(rewrite(entry.resource));
    }
  }
  const members = new Set(out.filter((r) => r.resourceType === 'Patient').map((r) => `Patient/${r.id}`));
  const g = rewrite(group) as Group;
  g.member = (g.member ?? []).filter((m) => members.has(m.entity.reference ?? ''));
  g.quantity = g.member.length;
  out.push(g);
  return out;
}
