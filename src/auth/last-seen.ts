// Throttled "last seen" writes (User status.lastLoginAt, APIKey status.lastUsedAt): at most one
// write per principal per interval, in the background, never failing the request that caused it.
// The time already in the cache counts too, so replicas do not each write once a minute.
import type { Logger } from '../log.js';
import { describeApiError } from '../host/host-errors.js';

export class LastSeenRecorder {
  /** Cache: when this replica last wrote for a principal key (ms). */
  private readonly lastWrite = new Map<string, number>();

  constructor(
    private readonly log: Logger,
    private readonly intervalMs = 60_000,
  ) {}

  record(key: string, cachedIso: string | undefined, write: (at: Date) => Promise<void>): void {
    const now = Date.now();
    // This replica's own last write first: under load that answers without parsing a date.
    if (now - (this.lastWrite.get(key) ?? 0) < this.intervalMs) return;
    const cached = cachedIso ? Date.parse(cachedIso) || 0 : 0;
    if (now - cached < this.intervalMs) return;
    this.lastWrite.set(key, now);
    if (this.lastWrite.size > 10_000) {
      for (const [k, t] of this.lastWrite) if (now - t >= this.intervalMs) this.lastWrite.delete(k);
    }
    write(new Date(now)).catch((err) =>
      this.log.debug({ principal: key, err: describeApiError(err) }, 'could not record last use'),
    );
  }
}
