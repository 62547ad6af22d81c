// The host cluster's own corner is never reachable through the resource routes. kiteline keeps
// every password hash, API-key hash, stored kubeconfig and the session signing key in its install
// namespace; a registered cluster that is the host itself (inCluster, or any kubeconfig pointing at
// the same API server) would otherwise hand them to anyone allowed to read Secrets there, and a
// role with `patch` on users.kiteline.io could make itself admin. So, on such a cluster, for every
// principal (admins included) and every verb:
//   - anything in the install namespace: 403;
//   - the kiteline.io group (users, clusters, roles, API keys), in any namespace: 403;
//   - writes to the install namespace object itself and to kiteline's CRDs: 403;
//   - lists and watches across all namespaces: answered with the install namespace filtered out
//     upstream (fieldSelector metadata.namespace!=<ns>, which every kind supports);
//   - what is root on the host whatever kiteline's namespace: exec, attach, port-forward, proxy and
//     ephemeral containers into kube-system pods (the control plane's static pods: etcd holds every
//     Secret, the session key's included), TokenRequests for kube-system service accounts (the
//     controllers' accounts), writes to the APIServices of kiteline.io (one pointing at a service of
//     the caller's would answer kiteline's own reads of users and keys), and writes to admission
//     webhooks and mutating admission policies (a webhook is sent every object it matches, kiteline's
//     Secrets included; a mutating one could make a user admin). Creating a CRD or APIService is
//     refused by its name (the proxy reads the body of such a create on the host for it).
// A cluster is "the host" when its kube-system namespace has the host's kube-system UID (the usual
// cluster identity, as Argo CD and ClusterProfile use it), whatever URL or alias reaches it. When
// either UID cannot be read, the cluster is treated as the host: the guard fails closed, and all
// it costs a foreign cluster is its own namespace of that one name.
import type { ClusterConnection, ResolvedResource } from '../clusters/types.js';
import { ForbiddenError } from '../errors.js';
import type { Verb } from '../auth/principal.js';
import { readJson } from './upstream.js';

/** The namespace whose UID identifies a cluster. */
const IDENTITY_NAMESPACE = 'kube-system';
/** How long an undecided verdict (a UID could not be read) stands before it is asked again. */
const RETRY_UNKNOWN_MS = 30_000;
const KITELINE_GROUP = 'kiteline.io';

const READ_VERBS: ReadonlySet<Verb> = new Set(['get', 'list', 'watch']);

/** What one resource request touches: the resolved kind, the namespace and name read or written. */
export interface GuardedAccess {
  resolved: ResolvedResource;
  /** The namespace of the request; undefined for all namespaces or a cluster-scoped kind. */
  namespace: string | undefined;
  name: string | undefined;
  verb: Verb;
  /** The subresource ("exec", "token", "status"), if any. */
  subresource?: string;
}

/** Subresources that reach into a pod: a shell, its streams, its ports, a container added to it. */
const POD_ENTRY_SUBRESOURCES: ReadonlySet<string> = new Set([
  'exec',
  'attach',
  'portforward',
  'proxy',
  'ephemeralcontainers',
]);
/** Admission configurations that see or change the objects they match (validating policies only deny). */
const ADMISSION_RESOURCES: ReadonlySet<string> = new Set([
  'mutatingwebhookconfigurations',
  'validatingwebhookconfigurations',
  'mutatingadmissionpolicies',
  'mutatingadmissionpolicybindings',
]);
/** Kinds whose object names carry their API group (<plural>.<group>, <version>.<group>). */
const NAMED_BY_GROUP: ReadonlySet<string> = new Set([
  'apiextensions.k8s.io/customresourcedefinitions',
  'apiregistration.k8s.io/apiservices',
]);

interface Verdict {
  reachesHost: Promise<boolean>;
  /** Undecided verdicts expire; decided ones live as long as the connection. */
  expiresAt: number;
}

export class HostGuard {
  private readonly verdicts = new WeakMap<ClusterConnection, Verdict>();
  private hostUid: Promise<string | undefined> | undefined;
  private hostUidReadAt = 0;

  constructor(
    readonly installNamespace: string,
    /** Reads the host cluster's kube-system UID (undefined when it cannot). */
    private readonly readHostUid: () => Promise<string | undefined>,
  ) {}

  /** Throws 403 when the access reaches kiteline's own corner of the host cluster. */
  async check(conn: ClusterConnection, access: GuardedAccess): Promise<void> {
    const reason = this.protectedBy(access);
    if (reason && (await this.reachesHost(conn))) {
      throw new ForbiddenError(
        `${reason} is not reachable through kiteline's resource routes on cluster ${conn.name} ` +
          "(it is kiteline's own host cluster)",
      );
    }
  }

  /**
   * The field selector a list or watch must carry on this cluster (combined with the caller's
   * own): across all namespaces (`namespace` undefined) of the host, one that leaves the install
   * namespace out; otherwise the caller's unchanged.
   */
  async listFieldSelector(
    conn: ClusterConnection,
    resolved: ResolvedResource,
    namespace: string | undefined,
    fieldSelector: string | undefined,
  ): Promise<string | undefined> {
    if (namespace !== undefined || !resolved.namespaced || !(await this.reachesHost(conn))) return fieldSelector;
    const hideInstall = `metadata.namespace!=${this.installNamespace}`;
    // First, never after the caller's: a caller's selector ending in a backslash would escape the
    // comma and swallow the filter into its own last value (`metadata.namespace!=x\`).
    return fieldSelector ? `${hideInstall},${fieldSelector}` : hideInstall;
  }

  /** What makes the access protected (for the message), or undefined when it touches nothing of kiteline's. */
  private protectedBy({ resolved, namespace, name, verb, subresource }: GuardedAccess): string | undefined {
    const group = resolved.group;
    if (group === KITELINE_GROUP || group.endsWith(`.${KITELINE_GROUP}`)) return `the ${KITELINE_GROUP} API group`;
    if (resolved.namespaced && namespace === this.installNamespace) return `namespace ${this.installNamespace}`;
    if (READ_VERBS.has(verb)) return undefined;
    // Connect subresources are authorized as create whatever the method.
    if (group === '' && namespace === IDENTITY_NAMESPACE && subresource) {
      if (resolved.resource === 'pods' && POD_ENTRY_SUBRESOURCES.has(subresource))
        return `pods/${subresource} in ${IDENTITY_NAMESPACE} (the control plane's own pods)`;
      if (resolved.resource === 'serviceaccounts' && subresource === 'token')
        return `tokens of ${IDENTITY_NAMESPACE} service accounts`;
    }
    if (group === 'admissionregistration.k8s.io' && ADMISSION_RESOURCES.has(resolved.resource))
      return `writing ${resolved.resource} (they see or change every object they match, kiteline's Secrets included)`;
    if (name === undefined) return undefined;
    if (group === '' && resolved.resource === 'namespaces' && name === this.installNamespace)
      return `namespace ${this.installNamespace}`;
    if (NAMED_BY_GROUP.has(`${group}/${resolved.resource}`) && isKitelineGroupName(name))
      return `the ${KITELINE_GROUP} API group`;
    return undefined;
  }

  /** Whether the connection reaches the host cluster (cached per connection). */
  reachesHost(conn: ClusterConnection): Promise<boolean> {
    const known = this.verdicts.get(conn);
    if (known && known.expiresAt > Date.now()) return known.reachesHost;
    const verdict: Verdict = { reachesHost: Promise.resolve(true), expiresAt: Date.now() + RETRY_UNKNOWN_MS };
    verdict.reachesHost = Promise.all([this.hostIdentity(), clusterUid(conn)]).then(([host, cluster]) => {
      if (host === undefined || cluster === undefined) return true;
      verdict.expiresAt = Infinity;
      return host === cluster;
    });
    this.verdicts.set(conn, verdict);
    return verdict.reachesHost;
  }

  private hostIdentity(): Promise<string | undefined> {
    if (!this.hostUid || Date.now() - this.hostUidReadAt > RETRY_UNKNOWN_MS) {
      this.hostUidReadAt = Date.now();
      const reading = this.readHostUid().catch(() => undefined);
      this.hostUid = reading;
      // A UID once read never changes: keep it for good.
      void reading.then((uid) => {
        if (uid !== undefined) this.hostUidReadAt = Infinity;
      });
    }
    return this.hostUid;
  }
}

/** Whether a CRD or APIService name (<plural or version>.<group>) names kiteline.io or a group below it. */
export function isKitelineGroupName(name: string): boolean {
  return name.endsWith(`.${KITELINE_GROUP}`);
}

/**
 * Whether a create of this kind is refused on the host by the name in its body (a CRD or APIService):
 * the proxy, which reads no bodies otherwise, reads that one's name.
 */
export function namedByGroup(resolved: Pick<ResolvedResource, 'group' | 'resource'>): boolean {
  return NAMED_BY_GROUP.has(`${resolved.group}/${resolved.resource}`);
}

/** The cluster's kube-system UID with kiteline's own credentials, or undefined when unreadable. */
async function clusterUid(conn: ClusterConnection): Promise<string | undefined> {
  try {
    const res = await conn.request({
      method: 'GET',
      path: `/api/v1/namespaces/${IDENTITY_NAMESPACE}`,
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(10_000),
    });
    const namespace = await readJson<{ metadata?: { uid?: unknown } }>(res);
    return typeof namespace.metadata?.uid === 'string' && namespace.metadata.uid ? namespace.metadata.uid : undefined;
  } catch {
    return undefined;
  }
}
