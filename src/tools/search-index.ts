// The global search's index of one cluster: for every kind of search-kinds.ts, one list and then
// one watch (an informer, on kiteline's own connection and the cluster's watch pool), keeping only
// what a search reads: uid, name, namespace, labels and creation time. The API server sends only
// metadata (PartialObjectMetadata), so no Secret's data or Pod's spec ever reaches kiteline.
//
// - Lazy: a cluster's index starts with its first search, and stops once nobody searched it for a
//   while (SearchIndexes' idle time); a search of a stopped cluster starts it again.
// - Bounded: at most `maxObjects` objects per cluster (all kinds together). What does not fit is
//   left out and the index says it is partial, as it does while a kind's first list is still
//   running or its list or watch fails (retried with backoff, from a fresh list).
// - Unfiltered by caller: the index holds what kiteline's own credentials can see, so every search
//   filters by the caller's roles (search.ts). On kiteline's own host cluster the install namespace
//   is left out upstream already (the host guard's field selector), and its Namespace object here.
// - Watches resume from the last resourceVersion (bookmarks keep it fresh); an expired one (410)
//   lists again, so objects deleted meanwhile disappear.
import { setMaxListeners } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import type { ClusterConnection, ResolvedResource } from '../clusters/types.js';
import type { Logger } from '../log.js';
import type { HostGuard } from '../cluster-access/host-guard.js';
import { collectionPath } from '../cluster-access/target.js';
import { readJson } from '../cluster-access/upstream.js';
import { openWatch, watchErrorMessage, watchEvents } from '../cluster-access/watch-events.js';
import { SEARCH_KINDS, type SearchKind } from './search-kinds.js';

/** Objects per cluster beyond which the index is partial. */
export const DEFAULT_MAX_OBJECTS = 50_000;
/** A cluster's index stops after this long without a search. */
export const DEFAULT_IDLE_MS = 10 * 60_000;
/** How long a search waits for the first lists of a new index; then it answers what it has (partial). */
export const DEFAULT_SYNC_WAIT_MS = 10_000;

/** Objects per list page. */
const LIST_PAGE_SIZE = 500;
/** Watches end after about this long (spread a little) and resume from their resourceVersion. */
const WATCH_SECONDS = 300;
/** Retry delays after a failed list or watch: doubling from the first, at most the last. */
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 60_000;

/** Metadata only, or the whole object from an API server that cannot send less. */
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json';
const METADATA_WATCH = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json';

/** What the index keeps of an object. */
export interface IndexedObject {
  uid: string;
  name: string;
  /** The name in lower case (searches ignore case). */
  nameLower: string;
  /** "" for a cluster-scoped kind. */
  namespace: string;
  /** The kind's plural resource name (SearchKind.resource). */
  resource: string;
  labels: Readonly<Record<string, string>> | undefined;
  /** metadata.creationTimestamp, RFC 3339. */
  createdAt: string;
}

interface ObjectMetadata {
  metadata?: {
    uid?: string;
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    creationTimestamp?: string;
    resourceVersion?: string;
  };
}

interface MetadataList {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: ObjectMetadata[];
}

export interface SearchIndexOptions {
  hostGuard: HostGuard;
  log: Logger;
  maxObjects?: number;
  idleMs?: number;
  syncWaitMs?: number;
}

/** The feed of one kind: its objects by uid, and how far it got. */
class KindFeed {
  objects = new Map<string, IndexedObject>();
  /** The first list is in (or the cluster does not serve the kind). */
  synced = false;
  /** The last list or watch failed and is being retried. */
  failing = false;
  /** Objects were left out because the cluster's index was full. */
  overflowed = false;
  /** Resolves once the first attempt is over, whatever its outcome. */
  readonly firstAttempt: Promise<void>;
  private endFirstAttempt!: () => void;
  /** Failed attempts since the last list that succeeded. */
  private failures = 0;

  constructor(
    private readonly index: ClusterSearchIndex,
    readonly kind: SearchKind,
  ) {
    this.firstAttempt = new Promise((resolve) => (this.endFirstAttempt = resolve));
  }

  /** Lists and watches until the signal fires; failures are retried with backoff. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const resolved = await this.index.conn.resolveResource(this.kind.resource);
        if (!resolved || !resolved.verbs.includes('list') || !resolved.verbs.includes('watch')) {
          this.synced = true; // not served by this cluster: nothing to find
          return;
        }
        await this.follow(resolved, signal);
      } catch (err) {
        if (signal.aborted) return;
        this.failures++;
        this.failing = true;
        const retryInMs = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(this.failures - 1, 10));
        this.index.log.warn(
          { cluster: this.index.conn.name, kind: this.kind.resource, error: (err as Error).message, retryInMs },
          'search index: list or watch failed',
        );
        this.endFirstAttempt();
        await delay(retryInMs, undefined, { signal }).catch(() => undefined);
      } finally {
        this.endFirstAttempt();
      }
    }
  }

  /** One list, then watches from its resourceVersion until one expires (or room frees for what was left out). */
  private async follow(resolved: ResolvedResource, signal: AbortSignal): Promise<void> {
    const path = collectionPath(resolved, undefined);
    const fieldSelector = await this.index.hostGuard.listFieldSelector(this.index.conn, resolved, undefined, undefined);
    let resourceVersion: string | undefined = await this.list(path, fieldSelector, signal);
    this.synced = true;
    this.failing = false;
    this.failures = 0;
    this.endFirstAttempt();
    while (resourceVersion !== undefined && !signal.aborted) {
      if (this.overflowed && this.index.held < this.index.maxObjects) return;
      const opened = Date.now();
      resourceVersion = await this.watch(path, fieldSelector, resourceVersion, signal);
      // A cluster that ends watches at once is not asked again at once.
      if (Date.now() - opened < RETRY_FIRST_MS) await delay(RETRY_FIRST_MS, undefined, { signal });
    }
  }

  /**
   * Replaces the objects with a fresh list (as many as fit); its resourceVersion. The fresh objects
   * count against the cluster's limit as they come (other kinds list at the same time), the ones they
   * replace no longer do; a list that fails gives its count back.
   */
  private async list(path: string, fieldSelector: string | undefined, signal: AbortSignal): Promise<string> {
    const fresh = new Map<string, IndexedObject>();
    this.index.held -= this.objects.size;
    let overflowed = false;
    let resourceVersion = '';
    let token: string | undefined;
    try {
      do {
        const query = new URLSearchParams({ limit: String(LIST_PAGE_SIZE) });
        if (fieldSelector) query.set('fieldSelector', fieldSelector);
        if (token) query.set('continue', token);
        const res = await this.index.conn.request({
          method: 'GET',
          path: `${path}?${query}`,
          headers: { accept: METADATA_LIST },
          signal,
        });
        const page = await readJson<MetadataList>(res);
        resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
        for (const item of page.items ?? []) {
          if (this.index.held >= this.index.maxObjects) {
            overflowed = true;
            break;
          }
          const entry = this.entryOf(item);
          if (!entry || fresh.has(entry.uid)) continue;
          fresh.set(entry.uid, entry);
          this.index.held++;
        }
        token = overflowed ? undefined : page.metadata?.continue || undefined;
      } while (token);
    } catch (err) {
      this.index.held += this.objects.size - fresh.size;
      throw err;
    }
    this.objects = fresh;
    this.overflowed = overflowed;
    return resourceVersion;
  }

  /** Follows one watch; the resourceVersion to resume from, or undefined when it expired (list again). */
  private async watch(
    path: string,
    fieldSelector: string | undefined,
    resourceVersion: string,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    const seconds = WATCH_SECONDS + Math.floor(Math.random() * 60);
    const query = new URLSearchParams({
      watch: 'true',
      resourceVersion,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(seconds),
    });
    if (fieldSelector) query.set('fieldSelector', fieldSelector);
    const stream = await openWatch(this.index.conn, { accept: METADATA_WATCH }, `${path}?${query}`, signal);
    try {
      for await (const event of watchEvents<ObjectMetadata>(stream)) {
        if (event.type === 'ERROR') {
          if ((event.object as { code?: unknown } | null)?.code === 410) return undefined;
          throw new Error(watchErrorMessage(event.object));
        }
        if (event.type === 'ADDED' || event.type === 'MODIFIED') this.upsert(event.object);
        else if (event.type === 'DELETED') this.remove(event.object);
        resourceVersion = event.object?.metadata?.resourceVersion ?? resourceVersion;
      }
      return resourceVersion;
    } finally {
      stream.once('error', () => undefined);
      stream.destroy();
    }
  }

  private upsert(item: ObjectMetadata): void {
    const entry = this.entryOf(item);
    if (!entry) return;
    if (!this.objects.has(entry.uid)) {
      if (this.index.held >= this.index.maxObjects) {
        this.overflowed = true;
        return;
      }
      this.index.held++;
    }
    this.objects.set(entry.uid, entry);
  }

  private remove(item: ObjectMetadata): void {
    const uid = item?.metadata?.uid;
    if (uid && this.objects.delete(uid)) this.index.held--;
  }

  private entryOf(item: ObjectMetadata): IndexedObject | undefined {
    const m = item?.metadata;
    if (!m?.uid || !m.name) return undefined;
    const labels = m.labels && Object.keys(m.labels).length > 0 ? m.labels : undefined;
    return {
      uid: m.uid,
      name: m.name,
      nameLower: m.name.toLowerCase(),
      namespace: m.namespace ?? '',
      resource: this.kind.resource,
      labels,
      createdAt: m.creationTimestamp ?? '',
    };
  }
}

/** One cluster's index: a feed per kind, started at construction, stopped by stop(). */
export class ClusterSearchIndex {
  /** When the index was last searched (ms since the epoch). */
  lastUsed = Date.now();
  /** Objects held (and being listed), all kinds together: at most maxObjects. */
  held = 0;
  private readonly feeds: KindFeed[];
  private readonly stopper = new AbortController();
  private readonly started: Promise<void>;
  /** kiteline's install namespace when this cluster is its host (its Namespace object is left out too). */
  private hidden: string | undefined;

  constructor(
    readonly conn: ClusterConnection,
    readonly hostGuard: HostGuard,
    readonly log: Logger,
    readonly maxObjects: number,
    private readonly syncWaitMs: number,
  ) {
    this.feeds = SEARCH_KINDS.map((kind) => new KindFeed(this, kind));
    // Every feed listens on the signal: its request or its retry delay, and the watch's stream.
    setMaxListeners(this.feeds.length * 4, this.stopper.signal);
    this.started = this.start();
  }

  private async start(): Promise<void> {
    this.hidden = (await this.hostGuard.reachesHost(this.conn)) ? this.hostGuard.installNamespace : undefined;
    for (const feed of this.feeds) void feed.run(this.stopper.signal);
  }

  /** Whether some objects may be missing: a first list not in yet, a failing feed, or a full index. */
  get partial(): boolean {
    return this.feeds.some((feed) => !feed.synced || feed.failing || feed.overflowed);
  }

  /** The install namespace to leave out on kiteline's own host cluster, else undefined. */
  get hiddenNamespace(): string | undefined {
    return this.hidden;
  }

  /** Every object held. */
  *objects(): Generator<IndexedObject> {
    for (const feed of this.feeds) yield* feed.objects.values();
  }

  /** Waits (at most the sync wait; aborted with the signal) until every feed made its first attempt. */
  async settle(signal: AbortSignal): Promise<void> {
    await this.started;
    const timer = new AbortController();
    const firstAttempts = Promise.all(this.feeds.map((feed) => feed.firstAttempt)).finally(() => timer.abort());
    const timeout = delay(this.syncWaitMs, undefined, { signal: AbortSignal.any([signal, timer.signal]) }).catch(() =>
      signal.throwIfAborted(),
    );
    await Promise.race([firstAttempts, timeout]);
  }

  stop(): void {
    this.stopper.abort();
  }
}

/** The indexes of this replica, one per cluster searched lately. */
export class SearchIndexes {
  private readonly indexes = new Map<string, ClusterSearchIndex>();
  private sweeper: NodeJS.Timeout | undefined;
  private readonly maxObjects: number;
  private readonly idleMs: number;
  private readonly syncWaitMs: number;

  constructor(private readonly options: SearchIndexOptions) {
    this.maxObjects = options.maxObjects ?? DEFAULT_MAX_OBJECTS;
    this.idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
    this.syncWaitMs = options.syncWaitMs ?? DEFAULT_SYNC_WAIT_MS;
  }

  /** The connection's index, started now when there is none (or it belonged to a replaced connection). */
  forCluster(conn: ClusterConnection): ClusterSearchIndex {
    let index = this.indexes.get(conn.name);
    if (index && index.conn !== conn) {
      index.stop();
      index = undefined;
    }
    if (!index) {
      index = new ClusterSearchIndex(conn, this.options.hostGuard, this.options.log, this.maxObjects, this.syncWaitMs);
      this.indexes.set(conn.name, index);
      this.sweeper ??= setInterval(() => this.stopIdle(), Math.max(1_000, this.idleMs / 4)).unref();
    }
    index.lastUsed = Date.now();
    return index;
  }

  /** Stops the indexes nobody searched for the idle time. */
  stopIdle(now = Date.now()): void {
    for (const [name, index] of this.indexes) {
      if (now - index.lastUsed < this.idleMs) continue;
      index.stop();
      this.indexes.delete(name);
    }
    if (this.indexes.size === 0) this.stopSweeper();
  }

  /** Stops every index (the gateway shuts down). */
  stopAll(): void {
    for (const index of this.indexes.values()) index.stop();
    this.indexes.clear();
    this.stopSweeper();
  }

  /** Names of the clusters with a running index. */
  clusters(): string[] {
    return [...this.indexes.keys()];
  }

  private stopSweeper(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
