// Authorization of the workload routes (logs, live pod lists, pod and service proxies), each as the
// Kubernetes subresource or verb it really is: `get` on pods/log, `watch` on pods, `create` on
// pods/proxy and services/proxy (a connect subresource needs create whatever the HTTP method, as
// src/proxy/authorize.ts rules). Then the host guard: kiteline's own install namespace on the host
// cluster answers 403 for everyone, admins included.
import type { Principal, Verb } from '../auth/principal.js';
import type { ClusterConnection, ResolvedResource } from '../clusters/types.js';
import { requireAccess, type Authorizer } from '../cluster-access/access.js';
import type { HostGuard } from '../cluster-access/host-guard.js';

/** The core kinds these routes touch, as discovery would describe them (what the host guard reads). */
export const POD_RESOURCE: ResolvedResource = {
  group: '',
  version: 'v1',
  resource: 'pods',
  kind: 'Pod',
  namespaced: true,
  verbs: [],
};
export const SERVICE_RESOURCE: ResolvedResource = {
  group: '',
  version: 'v1',
  resource: 'services',
  kind: 'Service',
  namespaced: true,
  verbs: [],
};

export interface WorkloadAccessServices {
  auth: Authorizer;
  hostGuard: HostGuard;
}

export interface WorkloadAccess {
  /** The kind the subresource belongs to. */
  kind: ResolvedResource;
  /** The name roles match: "pods", "pods/log", "pods/proxy", "services/proxy". */
  resource: string;
  verb: Verb;
  /** undefined: all namespaces. */
  namespace: string | undefined;
  name: string | undefined;
}

/** Throws 403 unless the caller's roles allow the access and it stays out of kiteline's own namespace. */
export async function requireWorkloadAccess(
  services: WorkloadAccessServices,
  principal: Principal,
  conn: ClusterConnection,
  access: WorkloadAccess,
): Promise<void> {
  requireAccess(services.auth, principal, conn.name, access.resource, access.namespace, access.verb);
  await services.hostGuard.check(conn, {
    resolved: access.kind,
    namespace: access.namespace,
    name: access.name,
    verb: access.verb,
    subresource: access.resource.includes('/') ? access.resource.slice(access.resource.indexOf('/') + 1) : undefined,
  });
}
