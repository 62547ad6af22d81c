// One watch cache: every object of one resource (group, version, resource) of one cluster, across
// all namespaces, kept by kiteline's own credentials as the API server's own watch cache keeps it
// (a paged LIST, then a WATCH from its resourceVersion with bookmarks; a 410 Gone or a broken
// stream lists again, after a growing pause when it keeps breaking). Each object is held as the
// JSON text the cluster sent (sliced out of the list or the watch event, never parsed and written
// again: an int64 beyond 2^53 stays exact), so an answer is spliced together from bytes.
//
// Its resourceVersion (`rv`) is the proof of freshness: every change of the resource up to it has
// been applied. It moves with each event and with each bookmark. The API server sends a watch a
// bookmark about once a minute, and also shortly before the watch's timeout; `tick()` uses the
// second to move `rv` within about a second while consistent reads are waiting: a short watch
// (timeoutSeconds 3) from the current `rv`, whose pre-timeout bookmark arrives about a second later
// (kubernetes/kubernetes#127693 asks for bookmarks on demand; until then this is the fastest
// progress a client can get). Several streams may be open at once. Each belongs to an epoch (one
// list and the watches started after it); a relist starts a new epoch and the streams of the old
// one are dropped unread. Within an epoch each stream starts at or below `rv` and carries every
// change after its start in order, so applying only what is newer than `rv` from any of them
// leaves no gap and applies nothing twice.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClusterConnection, ResolvedResource } from '../../clusters/types.js';
import { apiVersionOf, collectionPath } from '../../cluster-access/target.js';
import { expectSuccess, readBody } from '../../cluster-access/upstream.js';
import { streamLines } from '../../cluster-access/stream-lines.js';
import type { Logger } from '../../log.js';

/** An object as the cache holds it. */
export interface CachedObject {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** The object's JSON as the cluster sent it (kind and apiVersion added to list items that lack them). */
  json: Buffer;
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
const MAX_PAGE_BYTES = 256 * 1024 * 1024;
const MAIN_WATCH_SECONDS = 300;
/** A watch that sends nothing this long past its own timeout is taken for dead (a half-open connection). */
const WATCH_GRACE_MS = 30_000;
/** A tick's watch: its pre-timeout bookmark comes 2 s before it ends, about a second after it starts. */
const TICK_WATCH_SECONDS = 3;
const TICK_EVERY_MS = 1000;
const MAX_TICKS = 3;
const MAX_EVENT_CHARS = 8 * 1024 * 1024;
/** Pauses between relists of a watch that keeps breaking: 1 s, doubling up to a minute. */
const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 60_000;
/** The start of every watch event line the API server writes: `{"type":"<TYPE>","object":`. */
const EVENT_PREFIX = /^\{"type":"(ADDED|MODIFIED|DELETED|BOOKMARK|ERROR)","object":/;

type State = 'starting' | 'ready' | 'stopped';
type Outcome = 'ended' | 'gone' | 'failed' | 'refused';

interface Waiter {
  rv: bigint;
  resolve: (reached: boolean) => void;
}

interface Metadata {
  name?: unknown;
  namespace?: unknown;
  resourceVersion?: unknown;
  labels?: unknown;
}

/** The resourceVersion as a number; undefined when it is not one (then nothing is compared). */
export function parseResourceVersion(value: unknown): bigint | undefined {
  if (typeof value !== 'string' || !/^[0-9]{1,30}$/.test(value)) return undefined;
  return BigInt(value);
}

/** One namespace's objects by name, and their names in order once asked for (until a change). */
class Namespace {
  readonly objects = new Map<string, CachedObject>();
  private sorted: CachedObject[] | undefined;

  set(object: CachedObject): CachedObject | undefined {
    const before = this.objects.get(object.name);
    this.objects.set(object.name, object);
    if (!before) this.sorted = undefined;
    else if (this.sorted) this.sorted[this.sorted.indexOf(before)] = object;
    return before;
  }

  delete(name: string): CachedObject | undefined {
    const before = this.objects.get(name);
    if (before) {
      this.objects.delete(name);
      this.sorted = undefined;
    }
    return before;
  }

  items(): CachedObject[] {
    this.sorted ??= [...this.objects.values()].sort((a, b) => compare(a.name, b.name));
    return this.sorted;
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The objects of a cache, by namespace ("" for cluster-scoped ones). */
class Store {
  readonly namespaces = new Map<string, Namespace>();
  size = 0;
  bytes = 0;
  private order: string[] | undefined;

  get(namespace: string, name: string): CachedObject | undefined {
    return this.namespaces.get(namespace)?.objects.get(name);
  }

  set(object: CachedObject): CachedObject | undefined {
    let namespace = this.namespaces.get(object.namespace);
    if (!namespace) {
      namespace = new Namespace();
      this.namespaces.set(object.namespace, namespace);
      this.order = undefined;
    }
    const before = namespace.set(object);
    this.size += before ? 0 : 1;
    this.bytes += object.json.length - (before?.json.length ?? 0);
    return before;
  }

  delete(namespaceName: string, name: string): CachedObject | undefined {
    const namespace = this.namespaces.get(namespaceName);
    const before = namespace?.delete(name);
    if (!before) return undefined;
    this.size--;
    this.bytes -= before.json.length;
    if (namespace!.objects.size === 0) {
      this.namespaces.delete(namespaceName);
      this.order = undefined;
    }
    return before;
  }

  /** The objects of one namespace, or of all, in the API server's order (namespace, then name). */
  items(namespace: string | undefined): CachedObject[] {
    if (namespace !== undefined) return this.namespaces.get(namespace)?.items() ?? [];
    this.order ??= [...this.namespaces.keys()].sort(compare);
    return this.order.flatMap((name) => this.namespaces.get(name)!.items());
  }
}

export class ResourceCache {
  state: State = 'starting';
  /** Every change up to this resourceVersion has been applied (0 before the first list). */
  rv = 0n;
  private store = new Store();
  /** Bumped on each change of the objects (bookmarks do not change them). */
  version = 0;
  lastRead = Date.now();
  /** Why the cache stopped on its own (unreadable, gone, too big), for the log. */
  failure = '';
  /** Bumped by each relist (at its start and at its swap): a stream of an older epoch is dropped. */
  private epoch = 0;
  /** No tick starts while a relist runs (it would start from the store being replaced). */
  private relisting = false;
  private waiters: Waiter[] = [];
  private readonly controller = new AbortController();
  private lastTick = -Infinity;
  private ticks = 0;
  private pendingTick: NodeJS.Timeout | undefined;
  private readonly apiVersion: string;
  /** The kind of the cluster's lists of this resource, as its LIST said (a CRD may name its own listKind). */
  listKind: string;

  constructor(
    readonly conn: ClusterConnection,
    readonly resolved: ResolvedResource,
    private readonly observer: CacheSizeObserver,
    private readonly log: Logger,
  ) {
    this.apiVersion = apiVersionOf(resolved);
    this.listKind = `${resolved.kind}List`;
  }

  /** Read through a getter so that checks after an await are not narrowed away. */
  get stopped(): boolean {
    return this.state === 'stopped';
  }

  get size(): number {
    return this.store.size;
  }

  get bytes(): number {
    return this.store.bytes;
  }

  /** Lists, then watches until stopped. Resolves once the first list is in (or the cache stopped). */
  async start(): Promise<void> {
    await this.relist();
    void this.watchLoop();
  }

  stop(reason = ''): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.failure ||= reason;
    this.controller.abort();
    clearTimeout(this.pendingTick);
    this.observer.resized(this, -this.store.size, -this.store.bytes);
    this.store = new Store();
    for (const waiter of this.waiters.splice(0)) waiter.resolve(false);
  }

  get(namespace: string, name: string): CachedObject | undefined {
    return this.store.get(namespace, name);
  }

  /** The objects of one namespace (or all), in the API server's order. */
  items(namespace: string | undefined): CachedObject[] {
    return this.store.items(namespace);
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
    const now = performance.now();
    if (this.state !== 'ready' || this.pendingTick || this.relisting) return;
    const wait = this.lastTick + TICK_EVERY_MS - now;
    if (wait > 0 || this.ticks >= MAX_TICKS) {
      // Asked too soon: one tick follows as soon as it may, so a waiting read is never left without.
      this.pendingTick = setTimeout(
        () => {
          this.pendingTick = undefined;
          this.tick();
        },
        Math.max(wait, 100),
      );
      return;
    }
    this.lastTick = now;
    this.ticks++;
    void this.watch(TICK_WATCH_SECONDS)
      .catch(() => undefined)
      .finally(() => this.ticks--);
  }

  /** The paged LIST that (re)fills the cache; false when it failed (the cache then stopped). */
  private async relist(): Promise<boolean> {
    // Streams of the epoch before are dropped from now on: their changes die with the old store.
    const epoch = ++this.epoch;
    this.relisting = true;
    try {
      return await this.fill(epoch);
    } finally {
      this.relisting = false;
    }
  }

  private async fill(epoch: number): Promise<boolean> {
    const fresh = new Store();
    let continueToken = '';
    let listRv: bigint | undefined;
    let listKind: string | undefined;
    try {
      do {
        const search = new URLSearchParams({ limit: String(PAGE_SIZE) });
        if (continueToken) search.set('continue', continueToken);
        const res = await expectSuccess(
          await this.conn.request({
            method: 'GET',
            path: `${collectionPath(this.resolved, undefined)}?${search}`,
            headers: { accept: 'application/json' },
            signal: this.controller.signal,
          }),
        );
        const page = await readBody(res, MAX_PAGE_BYTES);
        const metadata = listMetadata(page);
        for (const raw of listItems(page)) {
          const object = this.toCached(raw, true);
          if (!object) throw new Error('the cluster listed an object kiteline cannot read');
          fresh.set(object);
        }
        // The first page's resourceVersion is the list's (the continued pages keep it).
        listRv ??= parseResourceVersion(metadata.resourceVersion);
        listKind ??= kindOf(page);
        continueToken = typeof metadata.continue === 'string' ? metadata.continue : '';
        if (this.stopped || epoch !== this.epoch) return false;
        if (fresh.size > this.observer.bounds.objects || fresh.bytes > this.observer.bounds.bytes) {
          this.stop(OVER_BOUND);
          return false;
        }
      } while (continueToken);
    } catch (err) {
      this.stop(`its list failed: ${(err as Error).message}`);
      return false;
    }
    if (listRv === undefined) {
      this.stop('the cluster answered a list without a numeric resourceVersion');
      return false;
    }
    const before = this.store;
    this.observer.resized(this, fresh.size - before.size, fresh.bytes - before.bytes);
    if (this.stopped) return false;
    this.epoch++;
    this.store = fresh;
    this.version++;
    this.rv = listRv;
    if (listKind) this.listKind = listKind;
    if (this.state === 'starting') this.state = 'ready';
    this.wake();
    return true;
  }

  private async watchLoop(): Promise<void> {
    let retryMs = FIRST_RETRY_MS;
    while (this.state === 'ready') {
      let outcome: Outcome;
      const started = performance.now();
      try {
        outcome = await this.watch(MAIN_WATCH_SECONDS);
      } catch (err) {
        if (this.stopped) return;
        this.log.debug({ err, cluster: this.conn.name, resource: this.resolved.resource }, 'cache watch broke');
        outcome = 'failed';
      }
      if (this.stopped) return;
      if (outcome === 'refused') {
        this.stop('the cluster refused its watch');
        return;
      }
      if (outcome === 'ended') {
        // A watch that ends at once (a broken or hostile cluster) is paced like a failure, not
        // opened again in a tight loop.
        if (performance.now() - started >= FIRST_RETRY_MS) retryMs = FIRST_RETRY_MS;
        else {
          await sleep(retryMs, undefined, { signal: this.controller.signal }).catch(() => undefined);
          retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
        }
        continue;
      }
      if (outcome === 'failed') {
        await sleep(retryMs, undefined, { signal: this.controller.signal }).catch(() => undefined);
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
      }
      if (this.stopped || !(await this.relist())) return;
    }
  }

  /** One watch from the current `rv`: `gone` when the cluster no longer has that history (410). */
  private async watch(timeoutSeconds: number): Promise<Outcome> {
    const epoch = this.epoch;
    const search = new URLSearchParams({
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: String(this.rv),
      timeoutSeconds: String(timeoutSeconds),
    });
    // The whole watch, its answer's head included, ends by a deadline: a stuck one frees its slot.
    const deadline = AbortSignal.timeout(timeoutSeconds * 1000 + WATCH_GRACE_MS);
    const res = await this.conn.request({
      method: 'GET',
      path: `${collectionPath(this.resolved, undefined)}?${search}`,
      headers: { accept: 'application/json' },
      signal: AbortSignal.any([this.controller.signal, deadline]),
      longRunning: true,
    });
    if (res.statusCode !== 200) {
      res.resume();
      if (res.statusCode === 410) return 'gone';
      return res.statusCode === 401 || res.statusCode === 403 || res.statusCode === 404 ? 'refused' : 'failed';
    }
    for await (const line of streamLines(res, MAX_EVENT_CHARS)) {
      if (this.state !== 'ready' || epoch !== this.epoch) {
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
    const prefix = EVENT_PREFIX.exec(line);
    if (!prefix || !line.endsWith('}')) return 'failed';
    const type = prefix[1];
    const raw = line.slice(prefix[0].length, -1);
    let parsed: { metadata?: Metadata; code?: unknown };
    try {
      parsed = JSON.parse(raw) as typeof parsed;
    } catch {
      return 'failed';
    }
    if (type === 'ERROR') return parsed.code === 410 ? 'gone' : 'failed';
    const rv = parseResourceVersion(parsed.metadata?.resourceVersion);
    if (rv === undefined) return 'failed';
    if (rv <= this.rv) return 'applied';
    if (type !== 'BOOKMARK') {
      const object = this.toCached({ raw, parsed }, false);
      if (!object) return 'failed';
      const before = type === 'DELETED' ? this.store.delete(object.namespace, object.name) : this.store.set(object);
      const after = type === 'DELETED' ? 0 : object.json.length;
      this.version++;
      this.observer.resized(this, (type === 'DELETED' ? 0 : 1) - (before ? 1 : 0), after - (before?.json.length ?? 0));
    }
    this.rv = rv;
    this.wake();
    return 'applied';
  }

  /**
   * An object as held: its metadata read (name, namespace, labels: strings only, or it is refused)
   * and its text kept. A list item of a built-in kind has no kind and apiVersion: they are added
   * in front, as a GET of it carries them.
   */
  private toCached(item: { raw: string; parsed: { metadata?: Metadata; kind?: unknown } }, listed: boolean) {
    const metadata = item.parsed.metadata;
    if (!metadata || typeof metadata.name !== 'string') return undefined;
    if (metadata.namespace !== undefined && typeof metadata.namespace !== 'string') return undefined;
    const labels = stringMap(metadata.labels);
    if (!labels) return undefined;
    let text = item.raw;
    if (listed && item.parsed.kind === undefined && text.startsWith('{')) {
      const head = JSON.stringify({ kind: this.resolved.kind, apiVersion: this.apiVersion }).slice(0, -1);
      text = text === '{}' ? `${head}}` : `${head},${text.slice(1)}`;
    }
    return {
      namespace: metadata.namespace ?? '',
      name: metadata.name,
      labels,
      json: Buffer.from(text),
    } satisfies CachedObject;
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

/** Labels as a map of strings (none: empty); undefined for anything else. */
function stringMap(value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) return undefined;
  const map: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [key, one] of Object.entries(value)) {
    if (typeof one !== 'string') return undefined;
    map[key] = one;
  }
  return map;
}

/** A list's top-level kind, e.g. ConfigMapList (written first by the API server), read without its items. */
function kindOf(page: string): string | undefined {
  const start = topLevelField(page, 'kind');
  if (start < 0) return undefined;
  try {
    const kind = JSON.parse(page.slice(start, endOfValue(page, start))) as unknown;
    return typeof kind === 'string' && kind !== '' ? kind : undefined;
  } catch {
    return undefined;
  }
}

/** A list's metadata (resourceVersion, continue), read without its items. */
function listMetadata(page: string): { resourceVersion?: unknown; continue?: unknown } {
  const start = page.indexOf('"metadata":');
  if (start < 0) return {};
  const end = endOfValue(page, start + '"metadata":'.length);
  try {
    return JSON.parse(page.slice(start + '"metadata":'.length, end)) as { resourceVersion?: unknown };
  } catch {
    return {};
  }
}

/**
 * The items of a list page, each as its own text (and parsed, for its metadata): sliced out of the
 * `"items":[...]` array by a scanner that knows JSON's strings and nesting.
 */
function* listItems(page: string): Generator<{ raw: string; parsed: { metadata?: Metadata; kind?: unknown } }> {
  // The top level's "metadata" comes before "items" in what the API server writes; "items" is
  // looked for at depth 1 so that an object's own field of that name is never taken for it.
  let i = topLevelField(page, 'items');
  if (i < 0) return;
  while (page[i] !== '[') {
    if (i >= page.length) throw new Error('a list without an items array');
    i++;
  }
  i++;
  for (;;) {
    while (/\s|,/.test(page[i] ?? '')) i++;
    if (page[i] === ']' || i >= page.length) return;
    const end = endOfValue(page, i);
    const raw = page.slice(i, end);
    yield { raw, parsed: JSON.parse(raw) as { metadata?: Metadata; kind?: unknown } };
    i = end;
  }
}

/** Where a top-level field's value starts (after its colon), or -1. */
function topLevelField(text: string, field: string): number {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = endOfString(text, i);
      if (depth === 1 && text.slice(i + 1, end - 1) === field) {
        let j = end;
        while (/\s/.test(text[j] ?? '')) j++;
        if (text[j] === ':') return j + 1;
      }
      i = end - 1;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return -1;
}

/** The index just after the JSON value starting at `start` (whitespace before it skipped). */
function endOfValue(text: string, start: number): number {
  let i = start;
  while (/\s/.test(text[i] ?? '')) i++;
  if (text[i] === '"') return endOfString(text, i);
  if (text[i] !== '{' && text[i] !== '[') {
    while (i < text.length && !/[,}\]\s]/.test(text[i])) i++;
    return i;
  }
  let depth = 0;
  for (; i < text.length; i++) {
    const c = text[i];
    if (c === '"') i = endOfString(text, i) - 1;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  throw new Error('a list cut short');
}

/** The index just after the string whose opening quote is at `start`. */
function endOfString(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  throw new Error('a list cut short');
}
