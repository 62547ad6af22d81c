// The events of a Kubernetes watch answer (newline-delimited JSON `{type, object}`), one at a time
// as the cluster sends them. Used by the live pod list and by log sessions that follow the pods
// of a label selector.
import type { ClusterConnection } from '../clusters/types.js';
import { BadGatewayError } from '../errors.js';
import type { UpstreamHeaders } from './impersonation.js';
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
