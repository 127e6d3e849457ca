import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { PROJECT_ROOT } from '../../src/project';
import { serverApp } from '../helpers/server-app';

/**
 * Every `sh` block of the README and docs/ is run with bash against a real server, and every curl
 * in it must answer the status its trailing `# -> NNN` names (or below 400 when it names none).
 * A block that cannot run here says why on its first line, `# not run by the docs test: <reason>`.
 */

const PAGES = [
  'README.md',
  ...readdirSync(join(PROJECT_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
/** Where the examples say the server is; replaced by the test server's origin. */
const DOCUMENTED_ORIGIN = 'http://127.0.0.1:8080';
/** The operator token the examples that need AUTH_TOKENS use; such blocks run against a server started with it. */
const OPERATOR_TOKEN = 'change-me-operator-token';
const SKIP_MARK = /^# not run by the docs test: (.+)$/;

interface Block {
  page: string;
  line: number;
  text: string;
  skip?: string;
}

function shBlocks(page: string): Block[] {
  const text = readFileSync(join(PROJECT_ROOT, page), 'utf8');
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => {
    const body = m[1];
    return {
      page,
      line: text.slice(0, m.index).split('\n').length,
      text: body,
      skip: SKIP_MARK.exec(body.split('\n')[0])?.[1],
    };
  });
}

interface Example {
  command: string;
  /** The statuses the comment allows; none named means any below 400. */
  expected: number[];
  /** A curl with its own `-w` prints its own status: not checked. */
  checked: boolean;
}

/** A curl at command position: line start, in $( ), after a pipe or separator, or a loop/if keyword. */
const CURL_START = /(^|\$\(|[;&|]\s*|\b(?:until|while|if|then|do)\s+)curl(?=\s)/g;
const EXPECTED = /\s#\s*->\s*(\d{3}(?:\s*(?:or|\|)\s*\d{3})*)/;

/**
 * The block as a bash script: each curl becomes `__curl <n>`, which prints `status <n> <code>` on
 * stderr (curl's own write-out), so bodies still flow through pipes and command substitutions.
 */
function script(block: string, origin: string): { text: string; examples: Example[] } {
  const examples: Example[] = [];
  const lines = block
    .replaceAll(DOCUMENTED_ORIGIN, origin)
    .split('\n')
    .map((line) => {
      if (line.trimStart().startsWith('#')) return line;
      const first = examples.length;
      const rewritten = line.replace(CURL_START, (_m, before: string) => {
        examples.push({ command: line.trim(), expected: [], checked: true });
        return `${before}__curl ${examples.length - 1}`;
      });
      const named = EXPECTED.exec(line)?.[1]
        .split(/\s*(?:or|\|)\s*/)
        .map(Number);
      // A comment names the statuses of the curls the line starts, or ends the command of the last one.
      const targets = examples.length > first ? examples.slice(first) : examples.slice(-1);
      for (const example of targets) {
        if (named) example.expected = named;
        if (/\s(-w|--write-out)\s/.test(line)) example.checked = false;
      }
      return rewritten;
    });
  const wrapper = [
    'set -e',
    '__curl() { local n=$1; shift; case " $* " in',
    '  *" -w "*|*" --write-out "*) command curl "$@" ;;',
    '  *) command curl "$@" -w "%{stderr}status $n %{http_code}\\n" ;;',
    'esac; }',
    'exec >stdout.txt',
  ];
  return { text: [...wrapper, ...lines].join('\n'), examples };
}

function run(text: string, cwd: string): Promise<{ code: number; stderr: string }> {
  // Asynchronously: the server answering the script runs in this process.
  return new Promise((resolve) => {
    execFile('bash', ['-c', text], { cwd, timeout: 60_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr });
    });
  });
}

async function listen(server: ServerApp): Promise<string> {
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
}

describe('the examples of the README and docs/ do what they say', () => {
  let open: ServerApp;
  let guarded: ServerApp;
  let openOrigin: string;
  let guardedOrigin: string;
  const skipped: string[] = [];
  let ran = 0;

  beforeAll(async () => {
    [open, guarded] = await Promise.all([serverApp(), serverApp({ authTokens: [OPERATOR_TOKEN] })]);
    [openOrigin, guardedOrigin] = await Promise.all([listen(open), listen(guarded)]);
  });
  afterAll(async () => {
    await Promise.all([open?.close(), guarded?.close()]);
    console.info(`docs examples: ${ran} blocks run, ${skipped.length} not run:\n  ${skipped.join('\n  ')}`);
  });

  test.each(PAGES)('%s: every curl answers the status its comment names (and none fails unannounced)', async (page) => {
    for (const block of shBlocks(page)) {
      const where = `${page}:${block.line}`;
      if (block.skip) {
        skipped.push(`${where}: ${block.skip}`);
        continue;
      }
      const origin = block.text.includes(OPERATOR_TOKEN) ? guardedOrigin : openOrigin;
      const { text, examples } = script(block.text, origin);
      expect(examples.length, `${where}: a block that calls no server says why it is not run`).toBeGreaterThan(0);
      const dir = mkdtempSync(join(tmpdir(), 'docs-example-'));
      try {
        const { code, stderr } = await run(text, dir);
        const tail = readFileSync(join(dir, 'stdout.txt'), 'utf8').slice(-1500);
        expect(code, `${where} exited ${code}: ${stderr}\n${tail}`).toBe(0);
        const statuses = stderr.split('\n').flatMap((l) => {
          const m = /^status (\d+) (\d{3})$/.exec(l);
          return m ? [{ example: Number(m[1]), status: Number(m[2]) }] : [];
        });
        examples.forEach((example, i) => {
          if (!example.checked) return;
          const got = statuses.filter((s) => s.example === i).map((s) => s.status);
          expect(got.length, `${where}: ${example.command} was not run`).toBeGreaterThan(0);
          for (const status of got) {
            if (example.expected.length > 0)
              expect(example.expected, `${where}: ${example.command} answered ${status}`).toContain(status);
            else expect(status, `${where}: ${example.command}`).toBeLessThan(400);
          }
        });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      ran++;
    }
  });
});
