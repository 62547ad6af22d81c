// The one admission of a proxied request, for plain requests and upgrades alike: the cluster from
// the path (the same 404 for a missing cluster and one the caller may not use), the request info,
// kiteline's roles and the host guard, and the upstream path: the client's, unchanged, except that
// a list or watch across all namespaces of the host cluster gets the guard's field selector. A
// request that asks to impersonate someone (kubectl --as, --as-group: Impersonate-* headers) is
// refused: through kiteline a caller acts as themselves, and silently dropping the headers would
// answer a question about someone else (`kubectl auth can-i --as X`) as if it were about X.
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Principal } from '../auth/principal.js';
import type { ClusterConnection, ClusterDirectory, ResolvedResource } from '../clusters/types.js';
import { ForbiddenError } from '../errors.js';
import type { Authorizer } from '../cluster-access/access.js';
import { selectCluster, CLUSTER_SELECTOR } from '../cluster-access/cluster-select.js';
import { requireReplacedObject } from '../cluster-access/create-on-update.js';
import { namedByGroup, type HostGuard } from '../cluster-access/host-guard.js';
import { impersonationHeaders, type UpstreamHeaders } from '../cluster-access/impersonation.js';
import { ALL_NAMESPACES } from '../cluster-access/segments.js';
import { authorizeProxyRequest, guardedResource, isLongRunning, proxyAccess, type ProxyAccess } from './authorize.js';
import { readCreatedName } from './created-name.js';
import { parseProxyUrl, withFieldSelector } from './proxy-url.js';
import { parseRequestInfo, type RequestInfo } from './request-info.js';

export interface ProxyServices {
  auth: Authorizer & { canAccessCluster(principal: Principal, cluster: string): boolean };
  clusters: ClusterDirectory;
  hostGuard: HostGuard;
}

/** What a request names, known before it is authorized (so a refused write is audited with its resource). */
export interface NamedRequest {
  conn: ClusterConnection;
  info: RequestInfo;
  /** What the request touches; undefined for a non-resource URL (discovery, /version). */
  access: ProxyAccess | undefined;
  dryRun: boolean;
}

export interface AdmittedRequest extends NamedRequest {
  /** Path and query on the cluster's API server. */
  upstreamPath: string;
  /** Impersonate-User/-Group for the caller when the cluster impersonates. */
  impersonation: UpstreamHeaders;
  /** A watch, a log stream, exec, attach, port-forward or proxy: holds its connection. */
  longRunning: boolean;
  /** A create of a CRD or APIService on the host: its body's name must pass the host guard (admitCreatedName). */
  checksCreatedName: boolean;
  /**
   * Whether a principal (the caller as it is later) may still do what this request does: its roles
   * asked again (an open stream ends when they no longer allow it; the host guard does not change).
   */
  stillAllowed: (principal: Principal) => boolean;
}

const LIST_VERBS: ReadonlySet<string> = new Set(['list', 'watch']);

/** `named` hears what the request names once the cluster is known, before roles are checked. */
export async function admitProxyRequest(
  services: ProxyServices,
  principal: Principal,
  method: string,
  url: string,
  headers: IncomingHttpHeaders,
  named?: (request: NamedRequest) => void,
): Promise<AdmittedRequest> {
  const parsed = parseProxyUrl(url);
  const conn = await selectCluster(
    services.clusters,
    { headers: { [CLUSTER_SELECTOR]: parsed.cluster }, query: {} },
    (cluster) => services.auth.canAccessCluster(principal, cluster),
  );
  const info = parseRequestInfo(method, parsed.path, parsed.query);
  const dryRun = new URLSearchParams(parsed.query).has('dryRun');
  named?.({ conn, info, access: namedAccess(info), dryRun });
  const impersonating = Object.keys(headers).find((name) => name.startsWith('impersonate-'));
  if (impersonating) {
    throw new ForbiddenError(
      `${impersonating} is not allowed through kiteline: requests run as you (${principal.name}); ` +
        'drop --as, --as-group and --as-uid',
    );
  }
  const access = await authorizeProxyRequest(services, principal, conn, info, headers['content-type']);
  if (access && info.verb === 'update' && info.subresource === '' && access.name !== undefined) {
    // A PUT creates a missing object of some kinds: without create, it must replace one that exists.
    await requireReplacedObject(services.auth, principal, {
      conn,
      resource: access.resource,
      namespace: access.namespace,
      name: access.name,
      objectPath: parsed.rawPath,
      headers: impersonationHeaders(conn, principal),
    });
  }
  let query = parsed.query;
  if (
    LIST_VERBS.has(info.verb) &&
    info.namespace === '' &&
    info.isResourceRequest &&
    (await services.hostGuard.reachesHost(conn))
  ) {
    const given = new URLSearchParams(query).get('fieldSelector') ?? undefined;
    const selector = await services.hostGuard.listFieldSelector(conn, await scopeOf(conn, info), undefined, given);
    if (selector !== undefined) query = withFieldSelector(query, selector);
  }
  return {
    conn,
    info,
    access,
    upstreamPath: query ? `${parsed.rawPath}?${query}` : parsed.rawPath,
    impersonation: impersonationHeaders(conn, principal),
    longRunning: isLongRunning(info),
    dryRun,
    checksCreatedName:
      info.verb === 'create' &&
      info.subresource === '' &&
      namedByGroup(guardedResource(info)) &&
      (await services.hostGuard.reachesHost(conn)),
    stillAllowed: (now) =>
      services.auth.canAccessCluster(now, conn.name) &&
      (access === undefined ||
        services.auth.authorize(now, {
          cluster: conn.name,
          namespace: access.namespace ?? ALL_NAMESPACES,
          resource: access.resource,
          verb: access.verb,
        })),
  };
}

/**
 * The body of a create the host guard checks by name (`checksCreatedName`): read (JSON or YAML, bounded),
 * its metadata.name refused when it claims kiteline.io, and returned to be sent upstream as it came.
 */
export async function admitCreatedName(
  services: Pick<ProxyServices, 'hostGuard'>,
  admitted: AdmittedRequest,
  body: Readable,
  contentType: string | undefined,
): Promise<Buffer> {
  const read = await readCreatedName(body, contentType);
  await services.hostGuard.check(admitted.conn, {
    resolved: guardedResource(admitted.info),
    namespace: undefined,
    name: read.name,
    verb: 'create',
  });
  return read.body;
}

/**
 * What a resource request touches; undefined for a non-resource URL or a verb roles do not know (authorization
 * refuses it).
 */
function namedAccess(info: RequestInfo): ProxyAccess | undefined {
  if (!info.isResourceRequest) return undefined;
  try {
    return proxyAccess(info);
  } catch {
    return undefined;
  }
}

/**
 * The resource with its scope from discovery; one the cluster does not list counts as namespaced (the guard fails
 * closed).
 */
async function scopeOf(conn: ClusterConnection, info: RequestInfo): Promise<ResolvedResource> {
  const found = await conn.resolveResource(info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource);
  if (found && found.group === info.apiGroup) return found;
  return { ...guardedResource(info), namespaced: true };
}
