// The durable audit trail of one replica: records are buffered in memory and written as one
// AuditChunk per flush (every flush interval, as soon as a chunk is full, and on shutdown), so a
// request never waits for the host cluster and the host sees one write per batch. What a crash
// (a kill without shutdown) can lose: the records of at most the last flush interval, those still
// in the buffer. All replicas read all chunks through the watch into an in-memory index; the
// leader (the cluster reconciler's lease) deletes chunks past the retention. Unauthenticated
// callers' records go into chunks of their own (spec.unauthenticated), counted by their own
// retention (unauthenticatedMaxRecords), so no number of them pushes an authenticated record out.
import type { Logger } from '../log.js';
import { describeApiError } from '../host/host-errors.js';
import { splitIntoChunks, type AuditChunkResource, type AuditChunkStore } from './chunk-store.js';
import { queryAudit, type AuditPage, type AuditQuery } from './query.js';
import { AuditRecordIndex } from './record-index.js';
import type { AuditRecord } from './record.js';
import { chunksToPrune, retainedSince, type Retention } from './retention.js';
import type { AuditWebhook } from './webhook.js';
import { within } from '../within.js';

export interface AuditTrailOptions extends Retention {
  unauthenticatedMaxRecords: number;
  flushIntervalMs: number;
  /** Records per chunk at most. */
  chunkSize: number;
  pruneIntervalMs: number;
}

/** Records kept in memory while the host cluster does not take them; older ones are dropped. */
const MAX_BUFFERED = 50_000;

export class AuditTrail {
  readonly index = new AuditRecordIndex();
  private loading: Promise<void> | undefined;
  /** Records waiting for the next flush: authenticated callers' (false) and the others' (true). */
  private readonly buffers = new Map<boolean, AuditRecord[]>([
    [false, []],
    [true, []],
  ]);
  private flushTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private queuedFlush: Promise<void> | undefined;
  private closed = false;
  private readonly log: Logger;

  constructor(
    private readonly store: AuditChunkStore,
    private readonly options: AuditTrailOptions,
    private readonly isLeader: () => boolean,
    log: Logger,
    private readonly webhook?: AuditWebhook,
  ) {
    this.log = log.child({ component: 'audit-trail' });
    store.cache.on('add', (chunk) => this.index.add(chunk));
    store.cache.on('update', (chunk) => this.index.add(chunk));
    store.cache.on('delete', (chunk) => this.index.remove(chunk.metadata.name));
  }

  /**
   * Starts loading every chunk and flushes and prunes on their intervals. The load runs in the
   * background: a trail of 100,000 records takes seconds to list and index, and neither serving
   * nor recording needs it; the audit-log page waits for it (loaded), pruning skips until then.
   */
  start(): Promise<void> {
    this.loading = this.store.start();
    this.flushTimer = setInterval(() => void this.flush(), this.options.flushIntervalMs);
    this.flushTimer.unref();
    this.pruneTimer = setInterval(() => void this.prune(), this.options.pruneIntervalMs);
    this.pruneTimer.unref();
    return Promise.resolve();
  }

  /** Resolves once every chunk is in the index (bounded by `timeoutMs`): false when it is not yet. */
  async loaded(timeoutMs: number): Promise<boolean> {
    if (!this.loading) return false;
    return (
      (await within(
        this.loading.then(() => true),
        timeoutMs,
      )) ?? false
    );
  }

  /** Adds one record; it is written with the next flush (at once when a chunk is full). */
  add(record: AuditRecord, unauthenticated = false): void {
    if (this.closed) return;
    const buffer = this.buffers.get(unauthenticated)!;
    buffer.push(record);
    this.webhook?.send([record]);
    if (buffer.length >= this.options.chunkSize) void this.flush();
  }

  /** Records waiting for the next flush. */
  get buffered(): number {
    return this.buffers.get(false)!.length + this.buffers.get(true)!.length;
  }

  /**
   * Writes the buffered records as chunks: one flush at a time, in order, and at most one more
   * waiting (it takes whatever the buffer holds when its turn comes, so a busy replica writes full
   * chunks, not one tiny chunk per record that arrived during a write).
   */
  flush(): Promise<void> {
    if (this.queuedFlush) return this.queuedFlush;
    const run = this.flushing
      .then(() => {
        this.queuedFlush = undefined;
        return this.writeBuffer();
      })
      .catch((err: unknown) => this.log.error({ err }, 'audit flush failed'));
    this.queuedFlush = run;
    this.flushing = run;
    return run;
  }

  private async writeBuffer(): Promise<void> {
    for (const unauthenticated of [false, true]) if (!(await this.writeGroup(unauthenticated))) return;
  }

  /** Writes one group's buffered records as chunks; false when the host did not take them (kept for the next). */
  private async writeGroup(unauthenticated: boolean): Promise<boolean> {
    const taken = this.buffers.get(unauthenticated)!;
    if (taken.length === 0) return true;
    this.buffers.set(unauthenticated, []);
    const batches = splitIntoChunks(taken, this.options.chunkSize);
    for (const [i, batch] of batches.entries()) {
      const chunk: AuditChunkResource = this.store.chunk(this.store.nextName(), batch, unauthenticated);
      try {
        await this.store.write(chunk);
      } catch (err) {
        // Keep what was not written, ahead of what came meanwhile; the next flush tries again.
        const buffer = batches.slice(i).flat().concat(this.buffers.get(unauthenticated)!);
        if (buffer.length > MAX_BUFFERED) {
          const dropped = buffer.length - MAX_BUFFERED;
          buffer.splice(0, dropped);
          this.log.error({ dropped }, 'audit records dropped: the host cluster has not taken them for too long');
        }
        this.buffers.set(unauthenticated, buffer);
        this.log.warn(
          { err: describeApiError(err), buffered: this.buffered },
          'could not write audit records; retrying with the next flush',
        );
        return false;
      }
    }
    return true;
  }

  /** The leader deletes the chunks past the retention; other replicas do nothing. */
  async prune(now = Date.now()): Promise<string[]> {
    // A partial index would count fewer records than there are: no pruning before the whole load.
    if (this.closed || !this.isLeader() || !this.store.cache.isSynced) return [];
    const summaries = (unauthenticated: boolean) =>
      this.store.cache
        .list()
        .filter((c) => (c.spec?.unauthenticated === true) === unauthenticated)
        .map((c) => ({ name: c.metadata.name, newest: c.spec?.newest ?? '', count: c.spec?.count ?? 0 }));
    const { maxAgeSeconds, maxRecords, unauthenticatedMaxRecords } = this.options;
    const names = [
      ...chunksToPrune(summaries(false), { maxAgeSeconds, maxRecords }, now),
      ...chunksToPrune(summaries(true), { maxAgeSeconds, maxRecords: unauthenticatedMaxRecords }, now),
    ];
    for (const name of names) {
      try {
        await this.store.delete(name);
      } catch (err) {
        this.log.warn({ chunk: name, err: describeApiError(err) }, 'could not delete an expired audit chunk');
        break;
      }
    }
    if (names.length > 0) this.log.info({ chunks: names.length }, 'pruned audit chunks past the retention');
    return names;
  }

  /** One page of Kite's audit-log query over every replica's records the retention keeps. */
  query(query: AuditQuery, now = Date.now()): AuditPage {
    return queryAudit(
      this.index.newestFirst(),
      query,
      {
        maxRecords: this.options.maxRecords + this.options.unauthenticatedMaxRecords,
        notBefore: retainedSince(this.options, now),
      },
      (field, value) => this.index.positionsOf(field, value),
    );
  }

  /** Stops the timers and writes what is buffered (a graceful shutdown loses nothing). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.flushTimer);
    clearInterval(this.pruneTimer);
    await this.flush();
    if (this.buffered > 0)
      this.log.error(
        { lost: this.buffered },
        'audit records not written at shutdown: the host cluster did not take them',
      );
    await this.webhook?.close();
    await this.store.stop();
  }
}
