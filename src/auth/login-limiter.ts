// Login failure rate limit, per username and per client address: after `maxFailures` failures
// within `windowSeconds`, further attempts get 429 until the oldest failure leaves the window.
// Kept in memory, so the limit holds per replica (documented in docs/auth.md).
export class LoginRateLimiter {
  /** Cache of recent failure times (ms) per key ("user:<name>", "addr:<ip>"); pruned as it grows. */
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly maxFailures: number,
    private readonly windowSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds to wait when any of the keys is over the limit; undefined when allowed. */
  retryAfter(keys: string[]): number | undefined {
    const now = this.now();
    let wait = 0;
    for (const key of keys) {
      const times = this.recent(key, now);
      if (times.length >= this.maxFailures) {
        const oldest = times[times.length - this.maxFailures]!;
        wait = Math.max(wait, Math.ceil((oldest + this.windowSeconds * 1000 - now) / 1000));
      }
    }
    return wait > 0 ? wait : undefined;
  }

  recordFailure(keys: string[]): void {
    const now = this.now();
    for (const key of keys) {
      const times = this.recent(key, now);
      times.push(now);
      this.failures.set(key, times.slice(-this.maxFailures));
    }
    if (this.failures.size > 10_000) this.prune(now);
  }

  reset(key: string): void {
    this.failures.delete(key);
  }

  private recent(key: string, now: number): number[] {
    const cutoff = now - this.windowSeconds * 1000;
    return (this.failures.get(key) ?? []).filter((t) => t > cutoff);
  }

  private prune(now: number): void {
    for (const key of [...this.failures.keys()]) {
      if (this.recent(key, now).length === 0) this.failures.delete(key);
    }
  }
}
