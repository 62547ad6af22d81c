// DELETE as docs/resources.md says: force=true is a zero grace period, cascade=false orphans the
// dependents (default: foreground, so the object goes only after its dependents), and wait
// (default true) waits for the object to be gone by watching it, up to timeoutSeconds
// (default 60), answering 504 when that runs out. No polling loop: one list to learn the current
// resourceVersion, then a watch narrowed to the object's name with the server-side timeout.
import { Type, type Static } from 'typebox';
import type { ClusterConnection, UpstreamResponse } from '../clusters/types.js';
import { BadGatewayError, fromKubeStatus, GatewayTimeoutError, isKubeStatus, type KubeStatus } from '../errors.js';
import { clientClosed, expectSuccess, readJson } from '../cluster-access/upstream.js';
import { withSearch } from '../cluster-access/read-query.js';

export const DEFAULT_DELETE_TIMEOUT_SECONDS = 60;

/** The query string of a DELETE: its schema and its type. */
export const DeleteQuery = Type.Object({
  force: Type.Optional(Type.Boolean()),
  cascade: Type.Optional(Type.Boolean()),
  wait: Type.Optional(Type.Boolean()),
  timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 600 })),
  dryRun: Type.Optional(Type.Unsafe<'All'>({ type: 'string', enum: ['All'] })),
  'x-cluster-name': Type.Optional(Type.String()),
});
export type DeleteQuery = Static<typeof DeleteQuery>;

/** The DeleteOptions body sent with the DELETE. */
export function deleteOptions(query: DeleteQuery): Record<string, unknown> {
  const options: Record<string, unknown> = {
    kind: 'DeleteOptions',
    apiVersion: 'v1',
    propagationPolicy: query.cascade === false ? 'Orphan' : 'Foreground',
  };
  if (query.force) options.gracePeriodSeconds = 0;
  if (query.dryRun) options.dryRun = [query.dryRun];
  return options;
}

/** Whether the DELETE answer says the object is already gone (a Status rather than the object). */
export function deletedAtOnce(answer: unknown): boolean {
  return isKubeStatus(answer) && answer.status === 'Success';
}

export interface WaitTarget {
  conn: ClusterConnection;
  /** The collection path the object lives in (its namespace's, or the cluster-scoped one). */
  collectionPath: string;
  name: string;
  /** What messages call the object, e.g. "deployments shop/web". */
  description: string;
  timeoutSeconds: number;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Extra headers for the list and watch requests. */
  headers: Record<string, string>;
}

/**
 * Resolves once the object is gone; throws GatewayTimeoutError when timeoutSeconds run out.
 * A list (narrowed to the name) gives the current resourceVersion, the watch starts there, so the
 * DELETED event cannot be missed; a watch that expires (410) or ends early is resumed.
 */
export async function waitUntilDeleted(target: WaitTarget): Promise<void> {
  const deadline = Date.now() + target.timeoutSeconds * 1000;
  const byName = `metadata.name=${target.name}`;
  let resourceVersion: string | undefined;
  for (;;) {
    if (target.signal.aborted) throw clientClosed();
    if (resourceVersion === undefined) {
      const list = await readJson<{ metadata?: { resourceVersion?: string }; items?: unknown[] }>(
        await target.conn.request({
          method: 'GET',
          path: withSearch(target.collectionPath, new URLSearchParams({ fieldSelector: byName })),
          headers: { accept: 'application/json', ...target.headers },
          signal: target.signal,
        }),
      );
      if (!list.items || list.items.length === 0) return;
      resourceVersion = list.metadata?.resourceVersion;
    }
    const remaining = Math.ceil((deadline - Date.now()) / 1000);
    if (remaining <= 0) break;
    const search = new URLSearchParams({ watch: 'true', fieldSelector: byName, timeoutSeconds: String(remaining) });
    if (resourceVersion) search.set('resourceVersion', resourceVersion);
    // The server ends the watch after timeoutSeconds; the local timer only guards a silent peer.
    const signal = AbortSignal.any([target.signal, AbortSignal.timeout(remaining * 1000 + 10_000)]);
    let res: UpstreamResponse;
    try {
      res = await expectSuccess(
        await target.conn.request({
          method: 'GET',
          path: withSearch(target.collectionPath, search),
          headers: { accept: 'application/json', ...target.headers },
          signal,
        }),
      );
    } catch (err) {
      if ((err as { status?: number }).status === 410) {
        resourceVersion = undefined;
        continue;
      }
      throw err;
    }
    const outcome = await readWatch(res);
    if (outcome.kind === 'deleted') return;
    if (outcome.kind === 'expired') {
      resourceVersion = undefined;
      continue;
    }
    resourceVersion = outcome.lastResourceVersion ?? resourceVersion;
    if (Date.now() >= deadline) break;
  }
  throw new GatewayTimeoutError(
    `deletion of ${target.description} still in progress after ${target.timeoutSeconds}s (it goes on in the cluster)`,
  );
}

type WatchEvent = { type?: string; object?: { metadata?: { resourceVersion?: string } } & KubeStatus };

function parseEvent(line: string): WatchEvent {
  try {
    return JSON.parse(line) as WatchEvent;
  } catch {
    throw new BadGatewayError('the cluster sent a watch event that is not JSON');
  }
}

type WatchOutcome =
  { kind: 'deleted' } | { kind: 'expired' } | { kind: 'ended'; lastResourceVersion: string | undefined };

/** Reads watch events (one JSON object per line) until DELETED, an error event, or the end. */
async function readWatch(res: UpstreamResponse): Promise<WatchOutcome> {
  let buffered = '';
  let lastResourceVersion: string | undefined;
  res.setEncoding('utf8');
  try {
    for await (const chunk of res) {
      buffered += chunk as string;
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (!line) continue;
        const event = parseEvent(line);
        if (event.type === 'DELETED') return { kind: 'deleted' };
        if (event.type === 'ERROR') {
          if (event.object?.code === 410) return { kind: 'expired' };
          throw fromKubeStatus(event.object ?? {}, 502);
        }
        lastResourceVersion = event.object?.metadata?.resourceVersion ?? lastResourceVersion;
      }
    }
  } catch (err) {
    // Aborted (the client left, or the local guard timer ran out) or the connection dropped.
    const { name, code } = err as Error & { code?: string };
    if (name === 'AbortError' || name === 'TimeoutError' || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') {
      return { kind: 'ended', lastResourceVersion };
    }
    throw err;
  } finally {
    res.destroy();
  }
  return { kind: 'ended', lastResourceVersion };
}
