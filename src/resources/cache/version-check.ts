// The collection's current resourceVersion for consistent reads (read-cache.ts): one LIST with
// limit=1 per round, shared by every read that arrived before the round's LIST was sent. A read
// never joins a round already sent, so the version it gets was current after it arrived. Rounds
// follow each other: the next is sent once the one in flight settled and, with a check interval,
// no sooner than `intervalMs` after the last one was sent; reads that arrive meanwhile wait for
// it. An interval trades a little time on each read for fewer requests to the cluster: at most
// one check per resource per interval, however many reads there are.
import type { ClusterConnection, ResolvedResource } from '../../clusters/types.js';
import { collectionPath } from '../../cluster-access/target.js';
import { readBody } from '../../cluster-access/upstream.js';
import { parseResourceVersion } from './resource-cache.js';

interface Round {
  promise: Promise<bigint | undefined>;
  resolve: (version: bigint | undefined) => void;
}

const MAX_CHECK_BYTES = 1024 * 1024;
/** A check unanswered this long counts as failed (the reads waiting for it go to the cluster). */
const CHECK_TIMEOUT_MS = 5000;

export class VersionCheck {
  private next: Round | undefined;
  private inFlight = false;
  private lastSent = -Infinity;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly conn: ClusterConnection,
    private readonly resolved: ResolvedResource,
    private readonly intervalMs: number,
  ) {}

  /** The collection's resourceVersion as of a moment after this call; undefined when unknown. */
  current(): Promise<bigint | undefined> {
    let round = this.next;
    if (!round) {
      let resolve!: (version: bigint | undefined) => void;
      const promise = new Promise<bigint | undefined>((r) => (resolve = r));
      round = this.next = { promise, resolve };
      // It may be sent at once (and no longer be the next one): this read waits for it all the same.
      this.schedule();
    }
    return round.promise;
  }

  private schedule(): void {
    if (this.inFlight || !this.next || this.timer) return;
    const wait = this.lastSent + this.intervalMs - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.schedule();
      }, wait);
      this.timer.unref();
      return;
    }
    const round = this.next;
    this.next = undefined;
    this.inFlight = true;
    this.lastSent = performance.now();
    void this.fetch()
      .catch(() => undefined)
      .then((version) => {
        this.inFlight = false;
        round.resolve(version);
        this.schedule();
      });
  }

  /** One LIST ?limit=1 by kiteline's own credentials: it carries no object the caller would see. */
  private async fetch(): Promise<bigint | undefined> {
    const res = await this.conn.request({
      method: 'GET',
      path: `${collectionPath(this.resolved, undefined)}?limit=1`,
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
    });
    const text = await readBody(res, MAX_CHECK_BYTES);
    if (res.statusCode !== 200) return undefined;
    const list = JSON.parse(text) as { metadata?: { resourceVersion?: unknown } };
    return parseResourceVersion(list.metadata?.resourceVersion);
  }
}
