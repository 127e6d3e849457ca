import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { PROJECT_ROOT } from '../../src/project';
import { serverApp } from '../helpers/server-app';

/** The first `sh` block after a heading of the README. */
function shBlockAfter(heading: string): string {
  const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const from = readme.indexOf(`\n${heading}\n`);
  expect(from, heading).toBeGreaterThan(0);
  const match = /```sh\n([\s\S]*?)```/.exec(readme.slice(from));
  if (!match) throw new Error(`no sh block after ${heading}`);
  return match[1];
}

interface Example {
  command: string;
  expected?: number;
}

/** The block as a bash script that prints, for each curl line, the status it got. */
function script(block: string, origin: string): { text: string; examples: Example[] } {
  const examples: Example[] = [];
  const lines = block.replaceAll('http://127.0.0.1:8080', origin).split('\n').map((line) => {
    if (!line.startsWith('curl ')) return line;
    const commented = /^(curl .*?)\s+#\s*(.*)$/.exec(line);
    const command = commented ? commented[1] : line;
    const expected = /->\s*(\d{3})/.exec(commented?.[2] ?? '')?.[1];
    examples.push({ command, expected: expected === undefined ? undefined : Number(expected) });
    return `echo "status $(${command} -o /dev/null -w '%{http_code}')"`;
  });
  return { text: lines.join('\n'), examples };
}

describe('the README examples do what they say', () => {
  let server: ServerApp;
  let origin: string;
  beforeAll(async () => {
    server = await serverApp();
    await server.app.listen({ port: 0, host: '127.0.0.1' });
    origin = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
  });
  afterAll(() => server.close());

  test('Endpoints: every curl answers the status its comment names (and none fails unannounced)', async () => {
    const { text, examples } = script(shBlockAfter('## Endpoints'), origin);
    expect(examples.length).toBeGreaterThan(10);
    // Asynchronously: the server answering the script runs in this process.
    const output = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-c', text], { timeout: 60_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
    });
    const statuses = output.split('\n').filter((l) => l.startsWith('status ')).map((l) => Number(l.slice(7)));
    expect(statuses).toHaveLength(examples.length);
    examples.forEach((example, i) => {
      if (example.expected !== undefined) expect(statuses[i], example.command).toBe(example.expected);
      else expect(statuses[i], example.command).toBeLessThan(400);
    });
  });
});
