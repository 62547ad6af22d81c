// Cached reads (docs/read-cache.md): the one place that decides whether a GET or LIST is answered
// from a watch cache (resource-cache.ts) or goes to the cluster. A read is answered here only when
// all of these hold, and otherwise passes through untouched (`read` returns undefined):
//   - it is a plain JSON read the cache can answer exactly: no `continue`, no `Exact`, a `limit`
//     the answer fits in, selectors on labels or on metadata.name/namespace (selectors.ts);
//   - the cluster is not kiteline's own host (the host guard's filtering stays the API server's);
//   - the resource is hot (read `hotReads` times within `hotWindowMs`) and its cache has listed;
//   - the target's own authorization allows the impersonated caller (target-access.ts); the
//     caller's kiteline role and the host guard were checked before, as for every read;
//   - the cache is fresh enough: resourceVersion=0 at once; NotOlderThan N once it reached N; a
//     consistent read (no resourceVersion, what Kite and kubectl send) once it reached the
//     collection's current resourceVersion, learnt by one LIST with limit=1 shared by every read
//     that arrived before it was sent (version-check.ts: a read never joins one already sent).
//     That is the API server's own rule for consistent reads from its cache
//     (KEP-2340), so a cached answer is never older than a direct read made when it arrived.
// Caches start on demand, stop after `idleMs` without reads, and are bounded per cluster in
// objects and bytes (the least recently read one is evicted, and counted).
import type { ReadCacheOptions } from '../../config.js';
import type { BufferedAnswer, ClusterConnection, ResolvedResource } from '../../clusters/types.js';
import type { HostGuard } from '../../cluster-access/host-guard.js';
import type { UpstreamHeaders } from '../../cluster-access/impersonation.js';
import { apiVersionOf } from '../../cluster-access/target.js';
import type { Logger } from '../../log.js';
import { OVER_BOUND, parseResourceVersion, ResourceCache, type CachedObject } from './resource-cache.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import { TargetAccess, type ReadAttributes } from './target-access.js';
import { VersionCheck } from './version-check.js';

export type { ReadCacheOptions };

/** Why a read was or was not answered from the cache (a bounded metric label). */
export type CacheOutcome =
  'hit' | 'unsupported' | 'host' | 'cold' | 'target_unsure' | 'target_denied' | 'stale' | 'small' | 'too_large';

export interface ReadCacheObserver {
  outcome(cluster: string, outcome: CacheOutcome): void;
  eviction(cluster: string): void;
}

/** A read as the routes hand it over, after the caller's roles and the host guard allowed it. */
export interface CacheRead {
  conn: ClusterConnection;
  impersonation: UpstreamHeaders;
  resolved: ResolvedResource;
  /** undefined: all namespaces, or a cluster-scoped resource. */
  namespace: string | undefined;
  /** A get names its object; a list has none. */
  name: string | undefined;
  query: {
    labelSelector?: string;
    fieldSelector?: string;
    limit?: number;
    continue?: string;
    resourceVersion?: string;
    resourceVersionMatch?: string;
  };
  signal: AbortSignal;
}

/** A cached answer: the object or list (200) or the API server's NotFound Status (404), as JSON. */
interface CachedAnswer {
  statusCode: number;
  body: string | Buffer;
}

/** Marks an answer that came from the cache (docs/read-cache.md). */
export const CACHE_HEADER = 'x-kiteline-cache';

/**
 * After a consistent read found the cache behind, the next ones go to the cluster for this long
 * without asking (no bookmark can arrive sooner), while ticks bring the cache forward.
 */
const BEHIND_MS = 1000;
/** A resource whose cache failed (unreadable) or was evicted is not cached again for this long. */
const BLOCK_MS = 60_000;
const EVICTED_BLOCK_MS = 5 * 60_000;
/**
 * Lists kept answered per resource, and the bytes they may hold together (each its items and its
 * whole answer, about twice the items): past either they are dropped.
 */
const MAX_LIST_BODIES = 16;
const MAX_LIST_BODY_BYTES = 64 * 1024 * 1024;
/** Hot resources one cluster may cache at once (each one watch, and at most three short ones). */
const MAX_CACHES_PER_CLUSTER = 64;
const COMMA = Buffer.from(',');
/** The API server ends each JSON answer with a newline; so do cached answers. */
const LIST_END = Buffer.from(']}\n');
const NEWLINE = Buffer.from('\n');

interface ListBody {
  version: number;
  /** The matching objects' JSON, comma-separated. */
  items: Buffer;
  count: number;
  /** The whole answer at `rv` (a dashboard polling an unchanged list gets these very bytes). */
  whole?: { rv: bigint; body: Buffer };
}

interface Entry {
  cache?: ResourceCache;
  reads: number[];
  blockedUntil: number;
  /** Until then consistent reads go to the cluster without asking: the cache was behind. */
  behindUntil: number;
  /** The collection's current resourceVersion, one check shared by the reads waiting for it. */
  check?: VersionCheck;
  /** Lists answered lately, by namespace and selectors: their items, and the whole body at one version. */
  bodies: Map<string, ListBody>;
}

export class ReadCache {
  private readonly entries = new Map<string, Entry>();
  private readonly sizes = new Map<string, { objects: number; bytes: number }>();
  private readonly access: TargetAccess;
  private sweeper: NodeJS.Timeout | undefined;
  /** Clusters whose log already says their cached reads are not impersonated. */
  private readonly toldNoImpersonation = new Set<string>();

  constructor(
    private readonly options: ReadCacheOptions,
    private readonly hostGuard: Pick<HostGuard, 'reachesHost'>,
    private readonly observer: ReadCacheObserver,
    private readonly log: Logger,
  ) {
    this.access = new TargetAccess(options.decisionTtlMs, log);
    if (options.enabled) {
      this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(options.idleMs / 4, 30_000)));
      this.sweeper.unref();
    }
  }

  get enabled(): boolean {
    return this.options.enabled;
  }

  /** Objects and bytes held per cluster (metrics). */
  held(): Array<{ cluster: string; objects: number; bytes: number }> {
    return [...this.sizes.entries()].map(([cluster, size]) => ({ cluster, ...size }));
  }

  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const entry of this.entries.values()) entry.cache?.stop();
    this.entries.clear();
    this.access.close();
  }

  /** The cached answer to a read, or undefined: send it to the cluster. */
  async read(read: CacheRead): Promise<BufferedAnswer | undefined> {
    if (!this.options.enabled) return undefined;
    let outcome: CachedAnswer | CacheOutcome;
    try {
      outcome = await this.answer(read);
    } catch (err) {
      // The cache never turns a read into an error: the cluster answers it.
      this.log.debug({ err, cluster: read.conn.name }, 'read cache failed; the read goes to the cluster');
      outcome = 'unsupported';
    }
    this.observer.outcome(read.conn.name, typeof outcome === 'string' ? outcome : 'hit');
    if (typeof outcome === 'string') return undefined;
    return {
      statusCode: outcome.statusCode,
      headers: { 'content-type': 'application/json', [CACHE_HEADER]: 'hit' },
      body: typeof outcome.body === 'string' ? Buffer.from(outcome.body) : outcome.body,
    };
  }

  private async answer(read: CacheRead): Promise<CachedAnswer | CacheOutcome> {
    const { conn, query } = read;
    const label = parseLabelSelector(query.labelSelector);
    const field = parseFieldSelector(query.fieldSelector, read.resolved.namespaced);
    const wanted = wantedVersion(query, read.name === undefined);
    if (!label || !field || wanted === undefined || query.continue) return 'unsupported';
    if (await this.hostGuard.reachesHost(conn)) return 'host';
    const entry = await this.entry(read);
    const cache = entry.cache;
    if (cache?.state !== 'ready') return 'cold';
    cache.lastRead = Date.now();
    const allowed = await this.access.allows(conn, read.impersonation, attributes(read), read.signal);
    if (allowed === undefined) return 'target_unsure';
    if (!allowed) return 'target_denied';
    // A small consistent answer costs the cluster about what checking its freshness would.
    if (wanted === 'now' && this.answerBytes(entry, cache, read, label, field) < this.options.minConsistentBytes)
      return 'small';
    if (!(await this.fresh(entry, cache, read, wanted))) return 'stale';
    // Stopped while this read waited (evicted, its connection replaced): its objects are gone.
    if (cache.stopped) return 'cold';
    if (read.name !== undefined) return this.object(cache, read.namespace, read.name);
    return this.list(entry, cache, read, label, field);
  }

  /** The size of the answer the cache holds for a read now. */
  private answerBytes(
    entry: Entry,
    cache: ResourceCache,
    read: CacheRead,
    label: (labels: Record<string, string>) => boolean,
    field: (o: CachedObject) => boolean,
  ): number {
    if (read.name !== undefined) return cache.get(read.namespace ?? '', read.name)?.json.length ?? 0;
    const answer = this.list(entry, cache, read, label, field);
    return typeof answer === 'string' ? 0 : answer.body.length;
  }

  /** Whether the cache has reached the freshness the read asks for (waiting up to waitMs). */
  private async fresh(entry: Entry, cache: ResourceCache, read: CacheRead, wanted: bigint | 'now'): Promise<boolean> {
    if (wanted !== 'now') {
      if (wanted === 0n) return true;
      cache.tick();
      return cache.whenAtLeast(wanted, this.options.waitMs);
    }
    const now = Date.now();
    if (entry.behindUntil > now) {
      cache.tick();
      return false;
    }
    if (entry.check?.conn !== read.conn)
      entry.check = new VersionCheck(read.conn, read.resolved, this.options.checkIntervalMs);
    const current = await entry.check.current();
    if (current === undefined) return false;
    if (cache.rv < current) cache.tick();
    const reached = await cache.whenAtLeast(current, this.options.waitMs);
    if (!reached) entry.behindUntil = Math.max(entry.behindUntil, Date.now() + BEHIND_MS - this.options.waitMs);
    return reached;
  }

  private object(cache: ResourceCache, namespace: string | undefined, name: string): CachedAnswer {
    const found = cache.get(namespace ?? '', name);
    if (found) return { statusCode: 200, body: Buffer.concat([found.json, NEWLINE]) };
    const { group, resource } = cache.resolved;
    const status = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `${group ? `${resource}.${group}` : resource} "${name}" not found`,
      reason: 'NotFound',
      details: { name, ...(group ? { group } : {}), kind: resource },
      code: 404,
    };
    return { statusCode: 404, body: `${JSON.stringify(status)}\n` };
  }

  private list(
    entry: Entry,
    cache: ResourceCache,
    read: CacheRead,
    label: (labels: Record<string, string>) => boolean,
    field: (o: CachedObject) => boolean,
  ): CachedAnswer | CacheOutcome {
    const { namespace, query } = read;
    const key = `${namespace ?? ''}\0${query.labelSelector ?? ''}\0${query.fieldSelector ?? ''}`;
    let body = entry.bodies.get(key);
    if (body?.version !== cache.version) {
      const items = cache.items(namespace).filter((o) => label(o.labels) && field(o));
      const parts: Buffer[] = [];
      for (const [i, o] of items.entries()) parts.push(...(i > 0 ? [COMMA, o.json] : [o.json]));
      body = { version: cache.version, items: Buffer.concat(parts), count: items.length };
      this.keepBody(entry, key, body);
    }
    // The cluster would page it with a continue token kiteline cannot mint.
    if (query.limit !== undefined && body.count > query.limit) return 'too_large';
    if (body.whole?.rv !== cache.rv) {
      const head = JSON.stringify({
        kind: cache.listKind,
        apiVersion: apiVersionOf(cache.resolved),
        metadata: { resourceVersion: String(cache.rv) },
      });
      const whole = Buffer.concat([Buffer.from(`${head.slice(0, -1)},"items":[`), body.items, LIST_END]);
      body.whole = { rv: cache.rv, body: whole };
    }
    return { statusCode: 200, body: body.whole.body };
  }

  /** Keeps a list's answer for the next identical read, within the bounds of what lists may hold. */
  private keepBody(entry: Entry, key: string, body: ListBody): void {
    const size = (one: ListBody) => one.items.length * 2;
    if (size(body) > MAX_LIST_BODY_BYTES) {
      entry.bodies.delete(key);
      return;
    }
    let held = size(body);
    for (const [other, one] of entry.bodies) if (other !== key) held += size(one);
    if (entry.bodies.size >= MAX_LIST_BODIES || held > MAX_LIST_BODY_BYTES) entry.bodies.clear();
    entry.bodies.set(key, body);
  }

  /**
   * The resource's entry, its cache started once it is hot: read `hotReads` times within the window,
   * the last of those reads allowed by the target (so a caller the cluster gives nothing cannot
   * make kiteline hold a resource), and the cluster below its number of caches. A replaced
   * connection starts anew; a cache that stopped on its own is not started again for a while.
   */
  private async entry(read: CacheRead): Promise<Entry> {
    const { conn, resolved } = read;
    const key = `${conn.name}\0${resolved.group}\0${resolved.version}\0${resolved.resource}`;
    let entry = this.entries.get(key);
    if (entry?.cache && entry.cache.conn !== conn) {
      entry.cache.stop('its cluster connection was replaced');
      this.access.forget(entry.cache.conn);
      entry = undefined;
    }
    if (!entry) {
      entry = { reads: [], blockedUntil: 0, behindUntil: 0, bodies: new Map() };
      this.entries.set(key, entry);
    }
    const now = Date.now();
    if (entry.cache?.stopped) {
      if (entry.cache.failure) entry.blockedUntil = Math.max(entry.blockedUntil, now + BLOCK_MS);
      entry.cache = undefined;
      entry.bodies.clear();
    }
    if (entry.cache || entry.blockedUntil > now) return entry;
    entry.reads = entry.reads.filter((at) => at > now - this.options.hotWindowMs);
    entry.reads.push(now);
    if (entry.reads.length < this.options.hotReads) return entry;
    if (this.cachesOf(conn.name) >= MAX_CACHES_PER_CLUSTER) return entry;
    if ((await this.access.allows(conn, read.impersonation, attributes(read), read.signal)) !== true) return entry;
    if (entry.cache) return entry;
    entry.reads = [];
    this.startCache(entry, conn, resolved);
    return entry;
  }

  private startCache(entry: Entry, conn: ClusterConnection, resolved: ResolvedResource): void {
    const bounds = { objects: this.options.maxObjects, bytes: this.options.maxBytes };
    const cache = new ResourceCache(conn, resolved, { resized: (c, o, b) => this.resized(c, o, b), bounds }, this.log);
    entry.cache = cache;
    entry.bodies.clear();
    if (!conn.impersonate && !this.toldNoImpersonation.has(conn.name)) {
      this.toldNoImpersonation.add(conn.name);
      this.log.info(
        { cluster: conn.name },
        'cluster registered without impersonation: its cached reads, like its other reads, ' +
          'are authorized by kiteline roles alone',
      );
    }
    void cache.start().then(() => {
      if (cache.state !== 'stopped') return;
      const evicted = cache.failure === OVER_BOUND;
      if (evicted) this.observer.eviction(conn.name);
      entry.blockedUntil = Date.now() + (evicted ? EVICTED_BLOCK_MS : BLOCK_MS);
      this.log.info({ cluster: conn.name, resource: resolved.resource, reason: cache.failure }, 'read cache stopped');
    });
  }

  /** Live caches of a cluster. */
  private cachesOf(cluster: string): number {
    let count = 0;
    for (const entry of this.entries.values())
      if (entry.cache && !entry.cache.stopped && entry.cache.conn.name === cluster) count++;
    return count;
  }

  /** Keeps each cluster within its bounds: the least recently read cache goes first. */
  private resized(cache: ResourceCache, objects: number, bytes: number): void {
    const cluster = cache.conn.name;
    const size = this.sizes.get(cluster) ?? { objects: 0, bytes: 0 };
    size.objects += objects;
    size.bytes += bytes;
    if (size.objects <= 0 && size.bytes <= 0) this.sizes.delete(cluster);
    else this.sizes.set(cluster, size);
    while (size.objects > this.options.maxObjects || size.bytes > this.options.maxBytes) {
      const victim = this.leastRecentlyRead(cluster);
      if (!victim) break;
      victim.entry.blockedUntil = Date.now() + EVICTED_BLOCK_MS;
      victim.cache.stop();
      this.observer.eviction(cluster);
      this.log.info(
        { cluster, resource: victim.cache.resolved.resource, objects: size.objects, bytes: size.bytes },
        'read cache evicted: the cluster holds more than its bound',
      );
    }
  }

  private leastRecentlyRead(cluster: string): { entry: Entry; cache: ResourceCache } | undefined {
    let victim: { entry: Entry; cache: ResourceCache } | undefined;
    for (const entry of this.entries.values()) {
      const cache = entry.cache;
      if (!cache || cache.state === 'stopped' || cache.conn.name !== cluster) continue;
      if (!victim || cache.lastRead < victim.cache.lastRead) victim = { entry, cache };
    }
    return victim;
  }

  /** Stops caches nobody read for idleMs, and forgets entries with nothing left to remember. */
  private sweep(): void {
    const idleSince = Date.now() - this.options.idleMs;
    const live = new Set<ClusterConnection>();
    for (const [key, entry] of this.entries) {
      if (entry.cache && entry.cache.lastRead < idleSince) entry.cache.stop();
      if (entry.cache?.stopped) {
        entry.cache = undefined;
        entry.bodies.clear();
      }
      if (entry.cache) live.add(entry.cache.conn);
      if (!entry.cache && entry.blockedUntil < Date.now() && entry.reads.every((at) => at < idleSince))
        this.entries.delete(key);
    }
    // A cluster with no cache left (idle, removed) keeps no RBAC watches either.
    this.access.retainOnly(live);
  }
}

/** What the target is asked about a read. */
function attributes(read: CacheRead): ReadAttributes {
  return {
    verb: read.name === undefined ? 'list' : 'get',
    resolved: read.resolved,
    namespace: read.namespace,
    name: read.name,
  };
}

/**
 * The freshness a read asks for: 'now' for a consistent read (no resourceVersion), a version it
 * must not be older than (0: any), or undefined for what the cache cannot honour (Exact, or the
 * legacy exact meaning of a paged list at a version).
 */
export function wantedVersion(query: CacheRead['query'], isList: boolean): bigint | 'now' | undefined {
  const rv = query.resourceVersion;
  const match = query.resourceVersionMatch;
  if (match !== undefined && match !== '' && match !== 'NotOlderThan') return undefined;
  if (rv === undefined || rv === '') return query.resourceVersionMatch ? undefined : 'now';
  const version = parseResourceVersion(rv);
  if (version === undefined) return undefined;
  if (isList && version !== 0n && query.limit !== undefined && query.resourceVersionMatch !== 'NotOlderThan')
    return undefined;
  return version;
}
