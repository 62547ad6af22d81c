// The events of a Kubernetes watch answer (newline-delimited JSON `{type, object}`), one at a time
// as the cluster sends them, and Kite's relay of them as server-sent events. Used by the live
// lists (pods, and any resource) and by log sessions that follow the pods of a label selector.
import type { ClusterConnection } from '../clusters/types.js';
import { BadGatewayError } from '../errors.js';
import type { UpstreamHeaders } from './impersonation.js';
import type { EventStream } from './sse.js';
import { expectSuccess, readJson } from './upstream.js';
import { streamLines } from './stream-lines.js';

/** A watch event's line above this ends the watch (an object is at most about 1.5 MiB in etcd). */
const MAX_EVENT_BYTES = 8 * 1024 * 1024;

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'ERROR' | 'BOOKMARK';

/** A pod as far as these routes read it. */
export interface PodObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; [field: string]: unknown };
  spec?: { containers?: Array<{ name: string; [field: string]: unknown }>; [field: string]: unknown };
  status?: {
    phase?: string;
    containerStatuses?: Array<{ name: string; containerID?: string; state?: { running?: unknown } }>;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

export interface WatchEvent<T> {
  type: WatchEventType;
  /** The object; for ERROR a Status. */
  object: T;
}

export interface PodList {
  metadata?: { resourceVersion?: string };
  items: PodObject[];
}

/** Where pods of a namespace (or all namespaces) live on the API server, with a query. */
export function podsPath(namespace: string | undefined, query: URLSearchParams): string {
  const base = namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  const search = query.toString();
  return search ? `${base}?${search}` : base;
}

/** Lists pods (bounded read); throws the cluster's error (a bad selector: its 400). */
export async function listPods(
  conn: ClusterConnection,
  headers: UpstreamHeaders,
  path: string,
  signal: AbortSignal,
): Promise<PodList> {
  const res = await conn.request({ method: 'GET', path, headers: { accept: 'application/json', ...headers }, signal });
  const list = await readJson<PodList>(res);
  if (!Array.isArray(list.items)) throw new BadGatewayError('the cluster answered a pod list without items');
  return list;
}

/** Opens a watch (path with watch=true); throws the cluster's error before any event. */
export async function openWatch(conn: ClusterConnection, headers: UpstreamHeaders, path: string, signal: AbortSignal) {
  const res = await conn.request({
    method: 'GET',
    path,
    headers: { accept: 'application/json', ...headers },
    signal,
    longRunning: true,
  });
  return expectSuccess(res);
}

/** The events of an open watch; ends when the cluster ends the watch. A line that is not an event throws. */
export async function* watchEvents<T>(stream: AsyncIterable<Buffer | string>): AsyncGenerator<WatchEvent<T>> {
  for await (const line of streamLines(stream, MAX_EVENT_BYTES)) {
    if (line.trim() === '') continue;
    let event: WatchEvent<T>;
    try {
      event = JSON.parse(line) as WatchEvent<T>;
    } catch {
      throw new BadGatewayError('the cluster sent a watch event that is not JSON');
    }
    if (typeof event !== 'object' || event === null || typeof event.type !== 'string')
      throw new BadGatewayError('the cluster sent a watch event without a type');
    yield event;
  }
}

/** The message of a watch ERROR event's Status. */
export function watchErrorMessage(object: unknown): string {
  const message = (object as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message ? message : 'the watch failed';
}

/** Kite's event names of a live list: one object each. BOOKMARK events are not passed on. */
const EVENT_NAMES: Partial<Record<WatchEventType, string>> = {
  ADDED: 'added',
  MODIFIED: 'modified',
  DELETED: 'deleted',
};

/** An open watch answer: its body, which the relay ends. */
export type OpenWatch = AsyncIterable<Buffer | string> & { destroy(): void; once(e: 'error', f: () => void): unknown };

/**
 * Re-sends a watch's events as Kite's live list does until the cluster ends the watch (then
 * `close` {message}) or the client leaves: `send(name, event)` sends each object event (`added`,
 * `modified`, `deleted`), a watch ERROR is an `error` event ({error}), a broken watch one last
 * `error`. The watch is open already (its errors were plain HTTP answers); this owns and ends it.
 */
export async function relayWatch<T>(
  events: EventStream,
  upstream: OpenWatch,
  send: (name: string, event: WatchEvent<T>) => Promise<void>,
): Promise<void> {
  try {
    for await (const event of watchEvents<T>(upstream)) {
      if (events.closed) break;
      if (event.type === 'ERROR') {
        await events.sendJson('error', { error: watchErrorMessage(event.object) });
        continue;
      }
      const name = EVENT_NAMES[event.type];
      if (name && event.object) await send(name, event);
    }
    if (!events.closed) await events.sendJson('close', { message: 'watch channel closed' });
  } catch (err) {
    if (!events.closed) await events.sendJson('error', { error: `the watch broke: ${(err as Error).message}` });
  } finally {
    upstream.once('error', () => undefined);
    upstream.destroy();
    events.end();
  }
}

/** The annotation kubectl apply keeps its last manifest in: large, and no list shows it. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * A live list's `reduce=true` for any resource: the object without what no list column shows and
 * what makes objects big (metadata.managedFields, kubectl's last-applied annotation). Pods are
 * trimmed further, as Kite does (workloads/pod-watch.ts).
 */
export function reduceObject(object: Record<string, unknown>): Record<string, unknown> {
  const metadata = object.metadata as Record<string, unknown> | undefined;
  if (!metadata) return object;
  const { managedFields: _managed, ...rest } = metadata;
  const annotations = rest.annotations as Record<string, string> | undefined;
  if (annotations && LAST_APPLIED in annotations) {
    const { [LAST_APPLIED]: _applied, ...others } = annotations;
    rest.annotations = others;
  }
  return { ...object, metadata: rest };
}
