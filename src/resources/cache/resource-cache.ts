// One watch cache: every object of one resource (group, version, resource) of one cluster, across
// all namespaces, kept by kiteline's own credentials as the API server's own watch cache keeps it
// (a paged LIST, then a WATCH from its resourceVersion with bookmarks; a 410 Gone or a broken
// stream lists again). Each object is held as the JSON text the cluster sent, so an answer is
// spliced together, never serialized again.
//
// Its resourceVersion (`rv`) is the proof of freshness: every change of the resource up to it has
// been applied. It moves with each event and with each bookmark. The API server sends a watch a
// bookmark about once a minute, and also shortly before the watch's timeout; `tick()` uses the
// second to move `rv` within about a second while consistent reads are waiting: a short watch
// (timeoutSeconds 3) from the current `rv`, whose pre-timeout bookmark arrives about a second later
// (kubernetes/kubernetes#127693 asks for bookmarks on demand; until then this is the fastest
// progress a client can get). Several streams may be open at once: each starts at or below `rv`
// and carries every change after its start in order, so applying only what is newer than `rv`
// from any of them leaves no gap and applies nothing twice.
import type { ClusterConnection, ResolvedResource } from '../../clusters/types.js';
import { apiVersionOf, collectionPath } from '../../cluster-access/target.js';
import { readJson } from '../../cluster-access/upstream.js';
import { streamLines } from '../../cluster-access/stream-lines.js';
import type { Logger } from '../../log.js';

/** An object as the cache holds it. */
export interface CachedObject {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** The object's JSON, kind and apiVersion included. */
  json: string;
}

/** Told how much the cache holds after each change (the registry's per-cluster bounds). */
export interface CacheSizeObserver {
  resized(cache: ResourceCache, objectsDelta: number, bytesDelta: number): void;
  /** A list that grows past these stops before it is all in memory. */
  readonly bounds: { objects: number; bytes: number };
}

/** Why a cache whose list outgrew its cluster's bound stopped (counted as an eviction). */
export const OVER_BOUND = 'it holds more than the bound of its cluster';

const PAGE_SIZE = 500;
const MAIN_WATCH_SECONDS = 300;
/** A tick's watch: its pre-timeout bookmark comes 2 s before it ends, about a second after it starts. */
const TICK_WATCH_SECONDS = 3;
const TICK_EVERY_MS = 1000;
const MAX_TICKS = 3;
const MAX_EVENT_CHARS = 8 * 1024 * 1024;
const RETRY_MS = 1000;

type State = 'starting' | 'ready' | 'stopped';

interface Waiter {
  rv: bigint;
  resolve: (reached: boolean) => void;
}

interface RawObject {
  kind?: string;
  apiVersion?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
}

/** The resourceVersion as a number; undefined when it is not one (then nothing is compared). */
export function parseResourceVersion(value: unknown): bigint | undefined {
  if (typeof value !== 'string' || !/^[0-9]{1,30}$/.test(value)) return undefined;
  return BigInt(value);
}

export class ResourceCache {
  state: State = 'starting';
  /** Every change up to this resourceVersion has been applied (0 before the first list). */
  rv = 0n;
  /** Objects by namespace/name. */
  private objects = new Map<string, CachedObject>();
  bytes = 0;
  /** Bumped on each change of the objects (bookmarks do not change them). */
  version = 0;
  lastRead = Date.now();
  /** Why the cache stopped on its own (unreadable, gone), for the log. */
  failure = '';
  private sorted: { version: number; items: CachedObject[] } | undefined;
  private waiters: Waiter[] = [];
  private readonly controller = new AbortController();
  private lastTick = 0;
  private ticks = 0;
  private readonly apiVersion: string;

  constructor(
    readonly conn: ClusterConnection,
    readonly resolved: ResolvedResource,
    private readonly observer: CacheSizeObserver,
    private readonly log: Logger,
  ) {
    this.apiVersion = apiVersionOf(resolved);
  }

  /** Read through a getter so that checks after an await are not narrowed away. */
  get stopped(): boolean {
    return this.state === 'stopped';
  }

  get size(): number {
    return this.objects.size;
  }

  /** Lists, then watches until stopped. Resolves once the first list is in (or the cache stopped). */
  start(): Promise<void> {
    const listed = this.relist();
    void listed.then(() => this.watchLoop());
    return listed.then(() => undefined);
  }

  stop(reason = ''): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.failure ||= reason;
    this.controller.abort();
    this.observer.resized(this, -this.objects.size, -this.bytes);
    this.objects.clear();
    this.bytes = 0;
    this.sorted = undefined;
    for (const waiter of this.waiters.splice(0)) waiter.resolve(false);
  }

  get(namespace: string, name: string): CachedObject | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  /** All objects in the API server's order (by namespace, then name). */
  items(): CachedObject[] {
    if (this.sorted?.version !== this.version) {
      const items = [...this.objects.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o);
      this.sorted = { version: this.version, items };
    }
    return this.sorted.items;
  }

  /** Resolves true once `rv` has reached `wanted`, false after `timeoutMs` or when stopped. */
  whenAtLeast(wanted: bigint, timeoutMs: number): Promise<boolean> {
    if (this.state === 'ready' && this.rv >= wanted) return Promise.resolve(true);
    if (this.state === 'stopped' || timeoutMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        rv: wanted,
        resolve: (reached) => {
          clearTimeout(timer);
          resolve(reached);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(false);
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Opens a short watch whose bookmark moves `rv` within about a second (at most one per second). */
  tick(): void {
    const now = Date.now();
    if (this.state !== 'ready' || this.ticks >= MAX_TICKS || now - this.lastTick < TICK_EVERY_MS) return;
    this.lastTick = now;
    this.ticks++;
    void this.watch(TICK_WATCH_SECONDS)
      .catch(() => undefined)
      .finally(() => this.ticks--);
  }

  /** The paged LIST that (re)fills the cache. */
  private async relist(): Promise<void> {
    const fresh = new Map<string, CachedObject>();
    let bytes = 0;
    let continueToken = '';
    let listRv: bigint | undefined;
    try {
      do {
        const search = new URLSearchParams({ limit: String(PAGE_SIZE) });
        if (continueToken) search.set('continue', continueToken);
        const page = await readJson<{
          metadata?: { resourceVersion?: string; continue?: string };
          items?: RawObject[];
        }>(
          await this.conn.request({
            method: 'GET',
            path: `${collectionPath(this.resolved, undefined)}?${search}`,
            headers: { accept: 'application/json' },
            signal: this.controller.signal,
          }),
        );
        for (const item of page.items ?? []) {
          const object = this.toCached({ kind: this.resolved.kind, apiVersion: this.apiVersion, ...item });
          if (!object) continue;
          fresh.set(`${object.namespace}/${object.name}`, object);
          bytes += object.json.length;
        }
        if (fresh.size > this.observer.bounds.objects || bytes > this.observer.bounds.bytes) {
          this.stop(OVER_BOUND);
          return;
        }
        // The first page's resourceVersion is the list's (the continued pages keep it).
        listRv ??= parseResourceVersion(page.metadata?.resourceVersion);
        continueToken = page.metadata?.continue ?? '';
        if (this.stopped) return;
      } while (continueToken);
    } catch (err) {
      this.stop(`its list failed: ${(err as Error).message}`);
      return;
    }
    if (listRv === undefined) {
      this.stop('the cluster answered a list without a numeric resourceVersion');
      return;
    }
    this.observer.resized(this, fresh.size - this.objects.size, bytes - this.bytes);
    this.objects = fresh;
    this.bytes = bytes;
    this.version++;
    this.rv = listRv;
    if (this.state === 'starting') this.state = 'ready';
    this.wake();
  }

  private async watchLoop(): Promise<void> {
    while (this.state === 'ready') {
      let outcome: 'ended' | 'gone' | 'failed';
      try {
        outcome = await this.watch(MAIN_WATCH_SECONDS);
      } catch (err) {
        if (this.stopped) return;
        this.log.debug({ err, cluster: this.conn.name, resource: this.resolved.resource }, 'cache watch broke');
        outcome = 'failed';
      }
      if (this.stopped) return;
      if (outcome === 'ended') continue;
      if (outcome === 'failed') await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      if (this.state === 'ready') await this.relist();
    }
  }

  /** One watch from the current `rv`: `gone` when the cluster no longer has that history (410). */
  private async watch(timeoutSeconds: number): Promise<'ended' | 'gone' | 'failed'> {
    const search = new URLSearchParams({
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: String(this.rv),
      timeoutSeconds: String(timeoutSeconds),
    });
    const res = await this.conn.request({
      method: 'GET',
      path: `${collectionPath(this.resolved, undefined)}?${search}`,
      headers: { accept: 'application/json' },
      signal: this.controller.signal,
      longRunning: true,
    });
    if (res.statusCode !== 200) {
      res.resume();
      return res.statusCode === 410 ? 'gone' : 'failed';
    }
    for await (const line of streamLines(res, MAX_EVENT_CHARS)) {
      if (this.state !== 'ready') {
        res.destroy();
        return 'ended';
      }
      if (line.trim() === '') continue;
      const outcome = this.apply(line);
      if (outcome !== 'applied') {
        res.destroy();
        return outcome;
      }
    }
    return 'ended';
  }

  /** One watch event's line; `gone` or `failed` ends the stream. */
  private apply(line: string): 'applied' | 'gone' | 'failed' {
    let event: { type?: string; object?: RawObject & { code?: number } };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      return 'failed';
    }
    if (event.type === 'ERROR') return event.object?.code === 410 ? 'gone' : 'failed';
    const rv = parseResourceVersion(event.object?.metadata?.resourceVersion);
    if (rv === undefined) return 'failed';
    if (rv <= this.rv) return 'applied';
    if (event.type === 'ADDED' || event.type === 'MODIFIED' || event.type === 'DELETED') {
      const object = this.toCached(event.object!);
      if (!object) return 'failed';
      const key = `${object.namespace}/${object.name}`;
      const before = this.objects.get(key);
      if (event.type === 'DELETED') this.objects.delete(key);
      else this.objects.set(key, object);
      const after = event.type === 'DELETED' ? 0 : object.json.length;
      const bytesDelta = after - (before?.json.length ?? 0);
      this.bytes += bytesDelta;
      this.version++;
      this.observer.resized(this, (event.type === 'DELETED' ? 0 : 1) - (before ? 1 : 0), bytesDelta);
    } else if (event.type !== 'BOOKMARK') {
      return 'failed';
    }
    this.rv = rv;
    this.wake();
    return 'applied';
  }

  private toCached(raw: RawObject): CachedObject | undefined {
    const metadata = raw.metadata;
    if (!metadata || typeof metadata.name !== 'string') return undefined;
    return {
      namespace: metadata.namespace ?? '',
      name: metadata.name,
      labels: metadata.labels ?? {},
      json: JSON.stringify(raw),
    };
  }

  private wake(): void {
    if (this.waiters.length === 0) return;
    const still: Waiter[] = [];
    for (const waiter of this.waiters) {
      if (this.rv >= waiter.rv) waiter.resolve(true);
      else still.push(waiter);
    }
    this.waiters = still;
  }
}
