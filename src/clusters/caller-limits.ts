// Per-principal limits on one cluster's connections: how many long-running requests (watches,
// deletes that wait) and how many other requests one caller may have open on the cluster at once.
// Beyond them the caller gets 429 with Retry-After at once, instead of their requests queueing for
// connections in front of everyone else's (one reader cannot exhaust a cluster).
import { TooManyRequestsError } from '../errors.js';

export interface CallerLimitOptions {
  /** Long-running requests (watches, deletes that wait) one caller may hold open on one cluster. */
  watches: number;
  /** Other requests one caller may have in flight on one cluster. */
  requests: number;
}

/** What a refused caller is told to wait: a request slot frees within moments, a watch slot when a watch ends. */
const RETRY_AFTER_SECONDS = { request: 1, watch: 5 } as const;

export class CallerLimits {
  /** Open slots by kind and caller ("watch <caller>"); entries at zero are removed. */
  private readonly open = new Map<string, number>();

  constructor(
    private readonly limits: CallerLimitOptions,
    /** The cluster's current name, for the message. */
    private readonly clusterName: () => string,
  ) {}

  /**
   * Takes one of the caller's slots; throws TooManyRequestsError when all of that kind are taken.
   * Returns the function that gives it back (calling it again does nothing).
   */
  admit(caller: string, longRunning: boolean): () => void {
    const kind = longRunning ? 'watch' : 'request';
    const limit = longRunning ? this.limits.watches : this.limits.requests;
    const key = `${kind} ${caller}`;
    const count = this.open.get(key) ?? 0;
    if (count >= limit) {
      const what = longRunning ? 'watches (and deletes that wait)' : 'requests in flight';
      throw new TooManyRequestsError(
        `too many ${what} on cluster ${this.clusterName()}: at most ${limit} per caller at once`,
        RETRY_AFTER_SECONDS[kind],
      );
    }
    this.open.set(key, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(key) ?? 1) - 1;
      if (left > 0) this.open.set(key, left);
      else this.open.delete(key);
    };
  }
}
