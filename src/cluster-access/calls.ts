// The few upstream calls the resource tools (events, apply, node actions, history) and the
// terminals make, as small typed functions over one ClusterConnection: read JSON, write JSON, and
// "write and tell me how it went" for the callers that report per object instead of failing at
// the first error.
// Every call carries the caller's headers (impersonation) or kiteline's own ({}), said by the caller.
import type { ClusterConnection } from '../clusters/types.js';
import { HttpError } from '../errors.js';
import type { UpstreamHeaders } from './impersonation.js';
import { bodyRequest, readJson } from './upstream.js';

/** What every tool call needs: the cluster, the caller's upstream headers, the client's signal. */
export interface ToolContext {
  conn: ClusterConnection;
  /** Impersonation headers of the caller ({} when the cluster does not impersonate). */
  headers: UpstreamHeaders;
  signal: AbortSignal;
}

/** A Kubernetes object as the tools read it (only the members they use are typed). */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion?: string; kind?: string; name?: string; uid?: string; controller?: boolean }>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface KubeList<T = KubeObject> {
  items?: T[];
  metadata?: { continue?: string };
}

/** GET a path; throws the cluster's error (404, 403, ...) as an HttpError. */
export async function getJson<T = KubeObject>(
  ctx: ToolContext,
  path: string,
  headers: UpstreamHeaders = ctx.headers,
): Promise<T> {
  const res = await ctx.conn.request({
    method: 'GET',
    path,
    headers: { accept: 'application/json', ...headers },
    signal: ctx.signal,
  });
  return readJson<T>(res);
}

/** Sends a write (POST, PATCH, DELETE) with a JSON body; the answer is not read yet. */
function sendWrite(
  ctx: ToolContext,
  method: string,
  path: string,
  contentType: string,
  body: unknown,
  turnKey?: string,
) {
  const framed = bodyRequest(contentType, typeof body === 'string' ? body : JSON.stringify(body), ctx.headers);
  return ctx.conn.request({ method, path, headers: framed.headers, body: framed.body, signal: ctx.signal, turnKey });
}

/** A write (POST, PATCH, DELETE) with a JSON body; throws the cluster's error as an HttpError. */
export async function writeJson<T = KubeObject>(...write: Parameters<typeof sendWrite>): Promise<T> {
  return readJson<T>(await sendWrite(...write));
}

/** The outcome of a write that must not throw: the status, and the object or the error. */
export type WriteOutcome<T = KubeObject> =
  { ok: true; status: number; object: T } | { ok: false; status: number; error: HttpError };

/** Like writeJson, but an HTTP error of the cluster is returned, not thrown (network errors still throw). */
export async function tryWrite<T = KubeObject>(...write: Parameters<typeof sendWrite>): Promise<WriteOutcome<T>> {
  const res = await sendWrite(...write);
  const status = res.statusCode;
  try {
    return { ok: true, status, object: await readJson<T>(res) };
  } catch (err) {
    if (err instanceof HttpError) return { ok: false, status: err.status, error: err };
    throw err;
  }
}

/** "app=web,tier in (a,b)" from a LabelSelector ({matchLabels, matchExpressions}). */
export function labelSelectorString(selector: unknown): string {
  const s = (selector ?? {}) as {
    matchLabels?: Record<string, string>;
    matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
  };
  const parts = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of s.matchExpressions ?? []) {
    if (e.operator === 'In') parts.push(`${e.key} in (${(e.values ?? []).join(',')})`);
    else if (e.operator === 'NotIn') parts.push(`${e.key} notin (${(e.values ?? []).join(',')})`);
    else if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  return parts.join(',');
}

/** The object's controller owner reference uid, if it has one. */
export function controllerUid(object: KubeObject): string | undefined {
  return object.metadata?.ownerReferences?.find((r) => r.controller)?.uid;
}
