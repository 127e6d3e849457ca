import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ISSUE_KINDS } from '../../src/terminology/issue-kinds';
import { message, MESSAGES } from '../../src/terminology/messages';

/**
 * The catalogue of terminology messages and the source are tied both ways: every id in the
 * catalogue is used somewhere, and every id the source names where a message id goes is in the
 * catalogue. (The compiler checks the ids typed as MessageId; this also catches ids kept only in
 * the catalogue, and ids written where the type does not reach.)
 */

const SRC = join(__dirname, '../../src');
const CATALOGUE = join(SRC, 'terminology', 'messages.ts');
const KINDS = join(SRC, 'terminology', 'issue-kinds.ts');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory()
      ? sourceFiles(path)
      : path.endsWith('.ts') && path !== CATALOGUE && path !== KINDS
        ? [path]
        : [];
  });
}

const sources = sourceFiles(SRC).map((path) => ({ path: relative(SRC, path), text: readFileSync(path, 'utf8') }));

/** Ids written where an issue is made of a message: txIssue/plainIssue('X', ...), or either side of a choice there. */
const ISSUE_PLACES = [
  /\b(?:txIssue|plainIssue)\(\s*'([^']+)'/g,
  /\b(?:txIssue|plainIssue)\(\s*[^,'()]+\?\s*'([^']+)'\s*:\s*'([^']+)'/g,
];

/** Ids written where a message id goes: message('X'), txIssue/plainIssue('X', ...), messageId = 'X'. */
const ID_PLACES = [/\bmessage\(\s*'([^']+)'/g, ...ISSUE_PLACES, /\bmessageId\s*[=:]\s*'([^']+)'/g];

function idsUsed(): Map<string, string> {
  const used = new Map<string, string>();
  for (const { path, text } of sources) {
    for (const pattern of ID_PLACES)
      for (const m of text.matchAll(pattern)) for (const id of m.slice(1)) if (id) used.set(id, path);
  }
  return used;
}

describe('terminology message catalogue', () => {
  test('every id in the catalogue is used in the source', () => {
    const unused = Object.keys(MESSAGES).filter((id) => !sources.some(({ text }) => text.includes(`'${id}'`)));
    expect(unused).toEqual([]);
  });

  test('every id the source uses is in the catalogue', () => {
    const used = idsUsed();
    // The scan must see the source's ids at all, or this test could not fail.
    expect(used.get('UNKNOWN_CODESYSTEM')).toBeDefined();
    expect(used.size).toBeGreaterThan(40);
    const missing = [...used].filter(([id]) => !(id in MESSAGES)).map(([id, path]) => `${id} (${path})`);
    expect(missing).toEqual([]);
  });

  test('every message reported as an issue has its severity, code and type in the catalogue, and every entry there is used', () => {
    const asIssues = new Set<string>();
    for (const { text } of sources) {
      for (const pattern of ISSUE_PLACES)
        for (const m of text.matchAll(pattern)) for (const id of m.slice(1)) if (id) asIssues.add(id);
    }
    expect(asIssues.size).toBeGreaterThan(40);
    expect([...asIssues].filter((id) => !(id in ISSUE_KINDS))).toEqual([]);
    // Ids chosen in a variable first (display-check, status, select ...) are typed IssueId, so the compiler holds them.
    const unused = Object.keys(ISSUE_KINDS).filter((id) => !sources.some(({ text }) => text.includes(`'${id}'`)));
    expect(unused).toEqual([]);
    expect(Object.keys(ISSUE_KINDS).filter((id) => !(id in MESSAGES))).toEqual([]);
  });

  test('messages fill their arguments, and plural entries choose by count', () => {
    expect(message('Unknown_Code_in', 'x', 'http://s')).toBe("Unknown code 'x' in the CodeSystem 'http://s'");
    expect(message('Display_Name_for__should_be_one_of__instead_of', 1, 'http://s', 'c', "'A'", 'B', '--')).toBe(
      "Wrong Display Name 'B' for http://s#c. Valid display is 'A' (for the language(s) '--')",
    );
    expect(message('Display_Name_for__should_be_one_of__instead_of', 2, 'http://s', 'c', "'A' or 'C'", 'B', '--')).toBe(
      "Wrong Display Name 'B' for http://s#c. Valid display is one of 2 choices: 'A' or 'C' (for the language(s) '--')",
    );
  });
});
