// A sliding-window rate limit per key: after `maxEvents` events (login failures per
// username and per client address; kubeconfig tokens minted per user and per address) within
// `windowSeconds`, further attempts get 429 until the oldest event leaves the window.
// Kept in memory, so the limit holds per replica (documented in docs/auth.md).
// The memory is bounded whatever clients send: a key longer than MAX_KEY_LENGTH is kept as its
// SHA-256, each key keeps at most maxEvents times, and at most maxEntries keys are kept (the
// least recently failed go first; expired ones go as soon as they are the oldest).
import { sha256 } from '../credentials/secrets-compare.js';
import { TooManyRequestsError } from '../errors.js';

const MAX_KEY_LENGTH = 128;
const DEFAULT_MAX_ENTRIES = 50_000;

export class RateLimiter {
  /**
   * Cache of recent failure times (ms) per key ("user:<name>", "addr:<ip>"), in the order of each
   * key's last failure (a failure re-inserts its key), so the oldest entries come first.
   */
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly maxEvents: number,
    private readonly windowSeconds: number,
    private readonly now: () => number = Date.now,
    private readonly maxEntries = DEFAULT_MAX_ENTRIES,
  ) {}

  /** Seconds to wait when any of the keys is over the limit; undefined when allowed. */
  retryAfter(keys: string[]): number | undefined {
    const now = this.now();
    let wait = 0;
    for (const key of keys) {
      const times = this.recent(boundedKey(key), now);
      if (times.length >= this.maxEvents) {
        const oldest = times[times.length - this.maxEvents];
        wait = Math.max(wait, Math.ceil((oldest + this.windowSeconds * 1000 - now) / 1000));
      }
    }
    return wait > 0 ? wait : undefined;
  }

  /** Throws 429 (`<what>; try again in N seconds`, with Retry-After) when any of the keys is over the limit. */
  refuseWhenLimited(keys: string[], what: string): void {
    const wait = this.retryAfter(keys);
    if (wait !== undefined) throw new TooManyRequestsError(`${what}; try again in ${wait} seconds`, wait);
  }

  record(keys: string[]): void {
    const now = this.now();
    for (const raw of keys) {
      const key = boundedKey(raw);
      const times = this.recent(key, now);
      times.push(now);
      this.failures.delete(key);
      this.failures.set(key, times.slice(-this.maxEvents));
    }
    this.evict(now);
  }

  reset(key: string): void {
    this.failures.delete(boundedKey(key));
  }

  /** How many keys are kept (for tests and metrics). */
  get size(): number {
    return this.failures.size;
  }

  /** The keys kept, oldest first. */
  keys(): IterableIterator<string> {
    return this.failures.keys();
  }

  private recent(key: string, now: number): number[] {
    const cutoff = now - this.windowSeconds * 1000;
    return (this.failures.get(key) ?? []).filter((t) => t > cutoff);
  }

  /** Drops the oldest entries while there are too many or they have expired. */
  private evict(now: number): void {
    const cutoff = now - this.windowSeconds * 1000;
    for (const [key, times] of this.failures) {
      if (this.failures.size <= this.maxEntries && times[times.length - 1] > cutoff) break;
      this.failures.delete(key);
    }
  }
}

function boundedKey(key: string): string {
  return key.length <= MAX_KEY_LENGTH ? key : `sha256:${sha256(key).toString('hex')}`;
}
