import { EventEmitter } from 'node:events';

/**
 * Best-effort messages to every process over the same database (a websocket notification reaches
 * the process holding the socket): PostgreSQL's LISTEN/NOTIFY, or, with SQLite (one process),
 * in-process events. Nothing is kept: a process not listening at the moment misses the message.
 * Payloads are small (PostgreSQL's limit is 8,000 bytes): names of things, not the things.
 */
export interface Notices {
  publish(channel: string, payload: string): Promise<void>;
  /**
   * Calls `listener` with each payload published on `channel` (by any process, this one included);
   * answers how to stop, once the channel is listened to or the first try to listen failed (it is
   * tried again in the background). `missed` is called whenever messages may have been lost (the
   * listening connection failed and is back), so a listener can look for itself what changed.
   */
  listen(channel: string, listener: (payload: string) => void, missed?: () => void): Promise<() => void>;
}

export class LocalNotices implements Notices {
  private readonly events = new EventEmitter();

  constructor() {
    this.events.setMaxListeners(0);
  }

  async publish(channel: string, payload: string): Promise<void> {
    // After the caller's turn, as a NOTIFY would arrive.
    setImmediate(() => this.deliver(channel, payload));
  }

  /** Hands a message to this process's listeners of its channel. */
  protected deliver(channel: string, payload: string): void {
    this.events.emit(channel, payload);
  }

  async listen(channel: string, listener: (payload: string) => void): Promise<() => void> {
    this.events.on(channel, listener);
    return () => this.events.off(channel, listener);
  }
}
