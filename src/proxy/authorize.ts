// Authorization of a proxied Kubernetes request: its request info (request-info.ts) becomes one
// question to kiteline's roles (AuthService.authorize through requireAccess), then the host guard.
// Rules (docs/proxy.md):
//   - non-resource URLs: discovery (/api, /apis/...), /version, /openapi/... and the health paths
//     are open to anyone who may use the cluster, for GET and HEAD; every other one is refused;
//   - resources are named as the resource routes name them (canonicalResourceName), a subresource
//     after a slash: "pods/log", "deployments/scale", "widgets.example.com/status";
//   - verbs: kiteline's seven; deletecollection needs delete; the connect subresources (exec,
//     attach, portforward, proxy, and the old /proxy/ paths) need create whatever the method (a
//     WebSocket exec is a GET), so a role that only reads can never open a shell;
//   - server-side apply (an apply patch) needs create as well, as on the resource routes;
//   - the namespace checked is the request's, "_all" for all namespaces and for Namespace objects.
import type { Principal, Verb } from '../auth/principal.js';
import type { ClusterConnection, ResolvedResource } from '../clusters/types.js';
import { ForbiddenError, HttpError } from '../errors.js';
import { requireAccess, type Authorizer } from '../cluster-access/access.js';
import type { HostGuard } from '../cluster-access/host-guard.js';
import { evictsKiteline, nodeRunsKiteline } from '../cluster-access/kiteline-node.js';
import { canonicalResourceName } from '../cluster-access/target.js';
import type { RequestInfo } from './request-info.js';

/** What a resource request touches, in kiteline's terms. */
export interface ProxyAccess {
  verb: Verb;
  /** The name roles match: "pods", "pods/exec", "widgets.example.com/status". */
  resource: string;
  /** The namespace of the request; undefined for all namespaces and cluster-scoped objects. */
  namespace: string | undefined;
  name: string | undefined;
}

/** Subresources that open a stream to a pod, node or service rather than read or write an object. */
const CONNECT_SUBRESOURCES: ReadonlySet<string> = new Set(['exec', 'attach', 'portforward', 'proxy']);
const ROLE_VERBS: ReadonlySet<string> = new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
/** Long-running requests, as the API server's BasicLongRunningRequestCheck decides them. */
const LONG_RUNNING_VERBS: ReadonlySet<string> = new Set(['watch', 'proxy']);
const LONG_RUNNING_SUBRESOURCES: ReadonlySet<string> = new Set(['attach', 'exec', 'proxy', 'log', 'portforward']);

/** Non-resource paths anyone who may use the cluster may GET: what kubectl needs to start. */
const OPEN_NON_RESOURCE =
  /^\/(api|apis(\/[^/]+){0,2}|api\/[^/]+|version|openapi\/v2|openapi\/v3(\/.*)?|healthz|livez|readyz)\/?$/;

export interface ProxyAuthorizer {
  auth: Authorizer;
  hostGuard: HostGuard;
}

export function isLongRunning(info: RequestInfo): boolean {
  return (
    LONG_RUNNING_VERBS.has(info.verb) || (info.isResourceRequest && LONG_RUNNING_SUBRESOURCES.has(info.subresource))
  );
}

/**
 * Throws the 403 (or 405) the request deserves; returns what it touches (undefined for an open
 * non-resource URL). `contentType` tells an apply patch from other patches.
 */
export async function authorizeProxyRequest(
  deps: ProxyAuthorizer,
  principal: Principal,
  conn: ClusterConnection,
  info: RequestInfo,
  contentType: string | undefined,
): Promise<ProxyAccess | undefined> {
  if (!info.isResourceRequest) {
    if ((info.verb === 'get' || info.verb === 'head') && OPEN_NON_RESOURCE.test(info.path)) return undefined;
    throw new ForbiddenError(
      `${info.path} is not served through kiteline: ` +
        'only resources, discovery, /version, /openapi and the health paths are',
    );
  }
  const access = proxyAccess(info);
  requireAccess(deps.auth, principal, conn.name, access.resource, access.namespace, access.verb);
  if (access.verb === 'patch' && contentType?.toLowerCase().startsWith('application/apply-patch')) {
    requireAccess(deps.auth, principal, conn.name, access.resource, access.namespace, 'create');
  }
  await deps.hostGuard.check(conn, {
    resolved: guardedResource(info),
    namespace: access.namespace,
    name: access.name,
    verb: access.verb,
    subresource: subresourceOf(info) || undefined,
  });
  const refused = refusedOnHost(info, access);
  if (refused && (await deps.hostGuard.reachesHost(conn))) {
    throw new ForbiddenError(
      `${refused} is not reachable through kiteline on cluster ${conn.name} (it is kiteline's own host cluster)`,
    );
  }
  // The proxy reads no body, so it cannot tell a NoExecute taint from a label: a node that runs
  // kiteline on its host is read-only through it (the resource routes and node actions read bodies).
  if (isNodeWrite(info) && (await nodeRunsKiteline(deps.hostGuard, conn, info.name))) {
    throw evictsKiteline(conn, info.name, info.verb === 'delete' ? 'delete' : 'change');
  }
  return access;
}

const NODE_WRITE_VERBS: ReadonlySet<string> = new Set(['update', 'patch', 'delete']);

/** A write of one Node object (or of its subresources). */
function isNodeWrite(info: RequestInfo): boolean {
  return info.apiGroup === '' && info.resource === 'nodes' && info.name !== '' && NODE_WRITE_VERBS.has(info.verb);
}

/**
 * What only the proxy can reach and the host guard must also refuse on the host cluster: the
 * kubelet's API (it runs and reads any container of the node, kiteline's own included), and
 * deleting all Namespaces, all CRDs or all Nodes at once (kiteline's namespace, CRDs and node among them).
 */
function refusedOnHost(info: RequestInfo, access: ProxyAccess): string | undefined {
  if (access.resource === 'nodes/proxy') return 'nodes/proxy';
  if (info.verb !== 'deletecollection') return undefined;
  if (isNamespaceObject(info)) return 'deleting every namespace';
  if (info.apiGroup === '' && info.resource === 'nodes') return 'deleting every node';
  if (info.apiGroup === 'apiextensions.k8s.io' && info.resource === 'customresourcedefinitions')
    return 'deleting every CRD';
  return undefined;
}

/** The kiteline verb, resource and namespace of a resource request; 405 for a method with no verb. */
export function proxyAccess(info: RequestInfo): ProxyAccess {
  const subresource = subresourceOf(info);
  const canonical = canonicalResourceName(guardedResource(info));
  const resource = subresource ? `${canonical}/${subresource}` : canonical;
  const verb = CONNECT_SUBRESOURCES.has(subresource) ? 'create' : roleVerb(info.verb);
  const clusterScoped = info.namespace === '' || isNamespaceObject(info);
  return { verb, resource, namespace: clusterScoped ? undefined : info.namespace, name: info.name || undefined };
}

/** The subresource, "proxy" for the old /proxy/ paths; "" for none. */
function subresourceOf(info: RequestInfo): string {
  return info.verb === 'proxy' ? 'proxy' : info.subresource;
}

function roleVerb(verb: string): Verb {
  if (verb === 'deletecollection') return 'delete';
  if (ROLE_VERBS.has(verb)) return verb as Verb;
  throw new HttpError(405, 'MethodNotAllowed', 'the method is not allowed on a Kubernetes resource');
}

/** A Namespace object (/api/v1/namespaces/<name>[/status|finalize]): its "namespace" is its name. */
function isNamespaceObject(info: RequestInfo): boolean {
  return info.apiGroup === '' && info.resource === 'namespaces';
}

/** The request's resource as the host guard sees it (its scope from the path). */
export function guardedResource(info: RequestInfo): ResolvedResource {
  return {
    group: info.apiGroup,
    version: info.apiVersion,
    resource: info.resource,
    kind: '',
    namespaced: info.namespace !== '' && !isNamespaceObject(info),
    verbs: [],
  };
}
