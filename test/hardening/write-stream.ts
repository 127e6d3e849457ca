import type { Basic } from 'fhir/r4';
import { expect } from 'vitest';
import type { ServerProcess } from '../helpers/process';

/** Writers that PUT to a real server until stopped, and what the server answered them. */

export const JSON_HEADERS = { 'content-type': 'application/fhir+json' };

export const basic = (id: string, marker: string): Basic => ({ resourceType: 'Basic', id, code: { text: marker } });

export interface Acknowledged {
  id: string;
  versionId: string;
  marker: string;
}

export interface WriteStream {
  /** Every write the server acknowledged with a 2xx. */
  acknowledged: Acknowledged[];
  /** How many answers of each status the writers got (2xx included). */
  statuses: Map<number, number>;
  /** Resolves once `count` writes are acknowledged; rejects if every writer gave up first. */
  acknowledgedAtLeast(count: number): Promise<void>;
  stop(): Promise<void>;
}

/** `writers` loops, each updating its own five resources in turn; a writer stops when the server is gone. */
export function writeStream(base: string, writers: number): WriteStream {
  const acknowledged: Acknowledged[] = [];
  const statuses = new Map<number, number>();
  let running = true;
  let finished = 0;
  const waiters: { count: number; resolve: () => void; reject: (err: Error) => void }[] = [];
  const settle = () => {
    for (const w of [...waiters]) {
      if (acknowledged.length >= w.count) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      } else if (!running || finished === writers) {
        waiters.splice(waiters.indexOf(w), 1);
        w.reject(new Error(`the writers stopped after ${acknowledged.length} acknowledged writes, before ${w.count}`));
      }
    }
  };
  async function writeUntilStopped(w: number): Promise<void> {
    for (let n = 0; running; n++) {
      const id = `w${w}-${n % 5}`;
      const marker = `writer ${w} write ${n}`;
      try {
        const res = await fetch(`${base}/Basic/${id}`, {
          method: 'PUT',
          headers: JSON_HEADERS,
          body: JSON.stringify(basic(id, marker)),
        });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.ok) {
          const body = (await res.json()) as Basic;
          acknowledged.push({ id, versionId: body.meta?.versionId as string, marker });
          settle();
        } else {
          await res.arrayBuffer();
        }
      } catch {
        return; // the server is gone
      }
    }
  }
  const loops = Array.from({ length: writers }, async (_, w) => {
    try {
      await writeUntilStopped(w);
    } finally {
      finished++;
      settle();
    }
  });
  return {
    acknowledged,
    statuses,
    acknowledgedAtLeast: (count) =>
      new Promise<void>((resolve, reject) => {
        waiters.push({ count, resolve, reject });
        settle();
      }),
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Reads back every acknowledged write by version, and every current version whole. */
export async function everyAcknowledgedWriteIsThere(base: string, acknowledged: Acknowledged[]): Promise<void> {
  expect(acknowledged.length).toBeGreaterThan(20);
  // Checked 16 at a time: the count depends on the machine's speed, the time it takes must not.
  for (let i = 0; i < acknowledged.length; i += 16) {
    await Promise.all(
      acknowledged.slice(i, i + 16).map(async (write) => {
        const res = await fetch(`${base}/Basic/${write.id}/_history/${write.versionId}`);
        expect(res.status, `${write.id} v${write.versionId}`).toBe(200);
        expect(((await res.json()) as Basic).code.text).toBe(write.marker);
      }),
    );
  }
  // Every current version reads back whole: no half-written resource.
  for (const id of new Set(acknowledged.map((w) => w.id))) {
    const res = await fetch(`${base}/Basic/${id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Basic;
    expect(body.resourceType).toBe('Basic');
    expect(body.code.text).toMatch(/^writer \d+ write \d+$/);
  }
}

/** Stops a server process a test started, whatever state it is in. */
export async function stopServer(server: ServerProcess, signal: NodeJS.Signals): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill(signal);
  await server.exited;
}
