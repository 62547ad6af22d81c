// What a describer reads besides the object itself: events, a Deployment's ReplicaSets, a
// controller's or a Node's pods, a Service's EndpointSlices, a Node's Lease, a Namespace's quotas
// and limit ranges. `kubectl describe` reads them with the caller's own credentials; kiteline reads
// them with its own connection, but only after asking kiteline's roles whether the caller may
// read them too (`list` for lists, `get` for single objects), and through the host guard. A read
// the caller may not do fails as the API server would fail it for the caller (403 Forbidden), and
// each describer handles that failure as kubectl does (no Events section, "Pods: not authorized",
// ...), so the text never shows the caller more than kubectl would. The related-objects route
// (src/tools/related.ts) reads other kinds the same way (listOf, getOf, mayRead).
import type { Principal, Verb } from '../auth/principal.js';
import type { ClusterConnection, ResolvedResource } from '../clusters/types.js';
import { ForbiddenError } from '../errors.js';
import type { Authorizer } from '../cluster-access/access.js';
import type { HostGuard } from '../cluster-access/host-guard.js';
import { withSearch } from '../cluster-access/read-query.js';
import { ALL_NAMESPACES } from '../cluster-access/segments.js';
import { canonicalResourceName, collectionPath, objectPath } from '../cluster-access/target.js';
import { readJson } from '../cluster-access/upstream.js';
import type { Json } from './format.js';

/** The built-in kinds describers read beside the object (all served by every supported cluster). */
export const RELATED = {
  pods: { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true, verbs: [] },
  events: { group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true, verbs: [] },
  endpointslices: {
    group: 'discovery.k8s.io',
    version: 'v1',
    resource: 'endpointslices',
    kind: 'EndpointSlice',
    namespaced: true,
    verbs: [],
  },
  services: { group: '', version: 'v1', resource: 'services', kind: 'Service', namespaced: true, verbs: [] },
  resourcequotas: {
    group: '',
    version: 'v1',
    resource: 'resourcequotas',
    kind: 'ResourceQuota',
    namespaced: true,
    verbs: [],
  },
  limitranges: { group: '', version: 'v1', resource: 'limitranges', kind: 'LimitRange', namespaced: true, verbs: [] },
  replicasets: {
    group: 'apps',
    version: 'v1',
    resource: 'replicasets',
    kind: 'ReplicaSet',
    namespaced: true,
    verbs: [],
  },
  leases: {
    group: 'coordination.k8s.io',
    version: 'v1',
    resource: 'leases',
    kind: 'Lease',
    namespaced: true,
    verbs: [],
  },
} satisfies Record<string, ResolvedResource>;

export type RelatedKind = keyof typeof RELATED;

/** What the reader needs from the gateway: the connection, the caller's roles, the host guard. */
export interface RelatedAccess {
  conn: ClusterConnection;
  signal: AbortSignal;
  /** Whether kiteline's roles let the caller do `verb` on `resource` in `namespace` (undefined: all). */
  allowed(resource: string, namespace: string | undefined, verb: Verb): boolean;
  /** Throws 403 when the read reaches kiteline's own corner of the host cluster. */
  guard(resolved: ResolvedResource, namespace: string | undefined, name: string | undefined, verb: Verb): Promise<void>;
  /** The field selector a list across all namespaces must carry (the host guard's), or the given one. */
  allNamespacesSelector(resolved: ResolvedResource, fieldSelector: string | undefined): Promise<string | undefined>;
}

/** The access of a caller: kiteline's roles for the caller, the host guard for the cluster. */
export function callerAccess(
  auth: Authorizer,
  hostGuard: HostGuard,
  conn: ClusterConnection,
  principal: Principal,
  signal: AbortSignal,
): RelatedAccess {
  return {
    conn,
    signal,
    allowed: (resource, namespace, verb) =>
      auth.authorize(principal, { cluster: conn.name, namespace: namespace ?? ALL_NAMESPACES, resource, verb }),
    guard: (kind, namespace, name, verb) => hostGuard.check(conn, { resolved: kind, namespace, name, verb }),
    allNamespacesSelector: (kind, fieldSelector) => hostGuard.listFieldSelector(conn, kind, undefined, fieldSelector),
  };
}

export interface ListQuery {
  labelSelector?: string;
  fieldSelector?: string;
}

/** kubectl's Forbidden message for a read the caller may not do. */
function forbidden(resource: string, verb: Verb, namespace: string | undefined, name?: string): ForbiddenError {
  const what = name ? `${resource} "${name}"` : resource;
  const where = namespace === undefined ? 'at the cluster scope' : `in the namespace "${namespace}"`;
  return new ForbiddenError(`${what} is forbidden: the caller may not ${verb} resource "${resource}" ${where}`);
}

export class RelatedReader {
  constructor(private readonly access: RelatedAccess) {}

  /** Whether the client went away (a failure then is not the describer's to paper over). */
  isAborted(): boolean {
    return this.access.signal.aborted;
  }

  /** Lists a related kind in a namespace (undefined: all namespaces). */
  list(kind: RelatedKind, namespace: string | undefined, query: ListQuery = {}): Promise<Json[]> {
    return this.listOf(RELATED[kind], namespace, query);
  }

  /** Reads one related object. */
  get(kind: RelatedKind, namespace: string, name: string): Promise<Json> {
    return this.getOf(RELATED[kind], namespace, name);
  }

  /** Whether the caller may read the object (`get` or `list` on its kind there) and the host guard lets it through. */
  async mayRead(resolved: ResolvedResource, namespace: string | undefined, name: string): Promise<boolean> {
    const resource = canonicalResourceName(resolved);
    if (!this.access.allowed(resource, namespace, 'get') && !this.access.allowed(resource, namespace, 'list'))
      return false;
    try {
      await this.access.guard(resolved, namespace, name, 'get');
      return true;
    } catch (err) {
      if (err instanceof ForbiddenError) return false;
      throw err;
    }
  }

  /** Lists any kind in a namespace (undefined: all namespaces), as list() does. */
  async listOf(resolved: ResolvedResource, namespace: string | undefined, query: ListQuery = {}): Promise<Json[]> {
    const resource = canonicalResourceName(resolved);
    if (!this.access.allowed(resource, namespace, 'list')) throw forbidden(resource, 'list', namespace);
    await this.access.guard(resolved, namespace, undefined, 'list');
    const fieldSelector =
      namespace === undefined
        ? await this.access.allNamespacesSelector(resolved, query.fieldSelector)
        : query.fieldSelector;
    const search = new URLSearchParams();
    if (query.labelSelector) search.set('labelSelector', query.labelSelector);
    if (fieldSelector) search.set('fieldSelector', fieldSelector);
    const res = await this.access.conn.request({
      method: 'GET',
      path: withSearch(collectionPath(resolved, namespace), search),
      headers: { accept: 'application/json' },
      signal: this.access.signal,
    });
    const list = await readJson<{ items?: Json[] }>(res);
    return Array.isArray(list.items) ? list.items : [];
  }

  /** Reads one object of any kind (namespace undefined: a cluster-scoped kind), as get() does. */
  async getOf(resolved: ResolvedResource, namespace: string | undefined, name: string): Promise<Json> {
    const resource = canonicalResourceName(resolved);
    if (!this.access.allowed(resource, namespace, 'get')) throw forbidden(resource, 'get', namespace, name);
    await this.access.guard(resolved, namespace, name, 'get');
    const res = await this.access.conn.request({
      method: 'GET',
      path: objectPath(resolved, namespace, name),
      headers: { accept: 'application/json' },
      signal: this.access.signal,
    });
    return readJson<Json>(res);
  }
}
