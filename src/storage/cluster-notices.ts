import { LocalNotices } from './notices';

/**
 * Notices between the worker processes of one server (WORKERS > 1) over SQLite, which has no
 * LISTEN/NOTIFY: each is sent to the primary process over the IPC channel cluster made, and the
 * primary sends it to every worker, this one included (src/cluster.ts). Best effort, as every
 * Notices: a worker that is restarting misses what is sent meanwhile.
 */
export class ClusterNotices extends LocalNotices {
  constructor() {
    super();
    process.on('message', (message: unknown) => {
      const notice = noticeOf(message);
      if (notice) this.deliver(notice.channel, notice.payload);
    });
  }

  override async publish(channel: string, payload: string): Promise<void> {
    process.send?.({ [NOTICE_KEY]: { channel, payload } });
  }
}

/** The key an IPC message carries a notice under (other messages pass by). */
export const NOTICE_KEY = 'fhirNotice';

export function noticeOf(message: unknown): { channel: string; payload: string } | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const notice = (message as Record<string, unknown>)[NOTICE_KEY] as
    { channel?: unknown; payload?: unknown } | undefined;
  if (typeof notice?.channel !== 'string' || typeof notice.payload !== 'string') return undefined;
  return { channel: notice.channel, payload: notice.payload };
}
