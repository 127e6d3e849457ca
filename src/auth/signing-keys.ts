import { randomUUID } from 'node:crypto';
import type { CryptoKey, JWK } from 'jose';
import { jose } from './jose';
import type { EphemeralStore } from '../storage/ephemeral';

/**
 * The keys this server signs its access tokens with, kept in storage so that every process over
 * the database signs and verifies alike. A key signs for KEY_SIGNS_FOR, then a new one takes over
 * (made by whichever process notices first; the others pick it up); an old key stays published
 * until the last token it signed has expired, so rotation never cuts a token short.
 */

const KIND = 'signing-key';
const ALG = 'ES256';
const DAY = 24 * 3600 * 1000;
export const KEY_SIGNS_FOR = 30 * DAY;
/** How often a process reads the key list again on its own (it also does on an unknown kid). */
const RELOAD_EVERY = 10 * 60 * 1000;

interface StoredKey {
  kid: string;
  created: number;
  jwk: JWK;
}

interface LoadedKey {
  kid: string;
  created: number;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

export class SigningKeys {
  private keys: LoadedKey[] = [];
  private loadedAt = 0;
  private loading?: Promise<void>;

  /** @param maxTokenLifetimeMs the longest a token lives: old keys stay published that much longer */
  constructor(
    private readonly store: EphemeralStore,
    private readonly maxTokenLifetimeMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The key to sign with now (made when there is none, or the newest is past its signing time). */
  async current(): Promise<{ kid: string; key: CryptoKey; alg: string }> {
    await this.fresh();
    let newest = this.newest();
    const due = () => !newest || this.now() - newest.created > KEY_SIGNS_FOR;
    if (due()) {
      // Another process may have made the successor since this one last read the list.
      await this.reload();
      newest = this.newest();
    }
    if (due()) {
      await this.make();
      newest = this.newest();
    }
    const key = newest as LoadedKey;
    return { kid: key.kid, key: key.privateKey, alg: ALG };
  }

  /**
   * Makes the first key at start-up when there is none: /.well-known/jwks.json is cached by resource
   * servers (max-age=300), so one fetched before the first sign-in must already list the key.
   */
  async ensure(): Promise<void> {
    await this.current();
  }

  /** The public key of a kid, reading the list again once when it is not known (another process made it). */
  async publicKey(kid: string): Promise<CryptoKey | undefined> {
    await this.fresh();
    let found = this.keys.find((k) => k.kid === kid);
    if (!found) {
      await this.reload();
      found = this.keys.find((k) => k.kid === kid);
    }
    return found?.publicKey;
  }

  /** The published keys (/.well-known/jwks.json). */
  async jwks(): Promise<{ keys: JWK[] }> {
    await this.fresh();
    return { keys: this.keys.map((k) => ({ ...k.publicJwk, kid: k.kid, alg: ALG, use: 'sig' })) };
  }

  /** Makes a new signing key now (operators rotating by hand; tests). */
  async rotate(): Promise<void> {
    await this.make(true);
  }

  private newest(): LoadedKey | undefined {
    return this.keys.reduce<LoadedKey | undefined>((a, b) => (!a || b.created > a.created ? b : a), undefined);
  }

  private async fresh(): Promise<void> {
    if (this.now() - this.loadedAt > RELOAD_EVERY) await this.reload();
  }

  private reload(): Promise<void> {
    this.loading ??= (async () => {
      const rows = await this.store.list(KIND);
      const keys: LoadedKey[] = [];
      for (const row of rows) {
        const stored = JSON.parse(row.value) as StoredKey;
        const known = this.keys.find((k) => k.kid === stored.kid);
        keys.push(known ?? (await load(stored)));
      }
      this.keys = keys;
      this.loadedAt = this.now();
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  /**
   * Makes a key unless another process is making the same one: the right to succeed the newest key
   * (or, for the first, to make one where there is none) is claimed once, so processes starting
   * together make one key, not one each. (A claim per minute let two processes either side of a
   * minute's turn both make one.) The claim expires, so a process that dies holding it is succeeded.
   */
  private async make(force = false): Promise<void> {
    const successorOf = this.newest()?.kid ?? 'none';
    if (force || (await this.store.claim('signing-key-made', successorOf, '1', this.now() + 120_000))) {
      const { exportJWK, generateKeyPair } = await jose();
      const { privateKey } = await generateKeyPair(ALG, { extractable: true });
      const stored: StoredKey = { kid: randomUUID(), created: this.now(), jwk: await exportJWK(privateKey) };
      await this.store.put(
        KIND,
        stored.kid,
        JSON.stringify(stored),
        stored.created + KEY_SIGNS_FOR + this.maxTokenLifetimeMs + DAY,
      );
    }
    await this.reload();
    // Another process is making it: wait for it to appear (a second or so at most).
    for (let i = 0; i < 50 && !this.newest(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await this.reload();
    }
    if (!this.newest()) throw new Error('no signing key could be made or read');
  }
}

async function load(stored: StoredKey): Promise<LoadedKey> {
  const { importJWK } = await jose();
  const { d: _private, ...publicJwk } = stored.jwk;
  return {
    kid: stored.kid,
    created: stored.created,
    privateKey: (await importJWK(stored.jwk, ALG)) as CryptoKey,
    publicKey: (await importJWK(publicJwk, ALG)) as CryptoKey,
    publicJwk,
  };
}
