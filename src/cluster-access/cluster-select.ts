// Which registered cluster a request is for: header x-cluster-name, else query x-cluster-name
// (WebSocket clients cannot set headers), else cookie x-cluster-name (Kite's web UI), else the
// default cluster. Unknown, disabled or not usable by the caller: the same 404 (a caller learns
// nothing of a cluster it may not use: not its readiness, not its last error, and it triggers no
// probe or discovery refresh); registered but not ready: 503 with the last error (and a probe
// soon, so a cluster that came back is served again within about a second).
import type { ClusterConnection, ClusterDirectory } from '../clusters/types.js';
import { BadRequestError, NotFoundError, ServiceUnavailableError } from '../errors.js';

export const CLUSTER_SELECTOR = 'x-cluster-name';

export interface SelectionSource {
  headers: Record<string, string | string[] | undefined>;
  query: unknown;
}

/** The cluster name the client asked for, or undefined for "the default cluster". */
export function requestedClusterName(source: SelectionSource): string | undefined {
  const header = source.headers[CLUSTER_SELECTOR];
  const fromHeader = Array.isArray(header) ? header[0] : header;
  if (fromHeader) return checked(fromHeader);
  const query = source.query as Record<string, unknown> | undefined;
  const fromQuery = query?.[CLUSTER_SELECTOR];
  if (typeof fromQuery === 'string' && fromQuery) return checked(fromQuery);
  if (Array.isArray(fromQuery) && typeof fromQuery[0] === 'string' && fromQuery[0]) return checked(fromQuery[0]);
  const cookie = source.headers.cookie;
  const fromCookie = cookieValue(Array.isArray(cookie) ? cookie.join('; ') : cookie, CLUSTER_SELECTOR);
  if (fromCookie) return checked(fromCookie);
  return undefined;
}

/**
 * Resolves the request's cluster to a ready connection or throws the contract's 404/503.
 * `mayUse` says whether the caller may use a cluster at all; checked before anything else.
 * A cluster whose first probe is still running (registered a moment ago, here or on another
 * replica) is waited for, about the connect timeout at most; only one whose probe failed is a 503.
 */
export async function selectCluster(
  directory: ClusterDirectory,
  source: SelectionSource,
  mayUse: (cluster: string) => boolean,
): Promise<ClusterConnection> {
  const name = requestedClusterName(source);
  let conn = name === undefined ? directory.defaultCluster() : directory.get(name);
  // A miss: still connecting at start-up, or applied with kubectl a moment ago (lookUp).
  if (!conn && directory.lookUp) conn = await directory.lookUp(name);
  if (!conn || !conn.enabled || !mayUse(conn.name)) {
    throw new NotFoundError(
      name === undefined ? 'no clusters available: register one or send x-cluster-name' : `cluster not found: ${name}`,
    );
  }
  if (!conn.ready) await conn.firstProbe();
  if (!conn.ready) {
    conn.probeOnDemand();
    throw new ServiceUnavailableError(
      `cluster ${conn.name} is not ready${conn.lastError ? `: ${conn.lastError}` : ''}`,
    );
  }
  return conn;
}

/** Reads one cookie from a Cookie header (no dependency on a cookie plugin being registered). */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    try {
      return decodeURIComponent(value);
    } catch {
      throw new BadRequestError(`malformed ${name} cookie`);
    }
  }
  return undefined;
}

function checked(name: string): string {
  if (name.length > 253 || /[\x00-\x1f\x7f]/.test(name))
    throw new BadRequestError(`invalid ${CLUSTER_SELECTOR}: at most 253 characters, no control characters`);
  return name;
}
