// Cluster sources: clusters read from where platform teams already declare them (docs/clusters.md,
// "Clusters from where they already live"). Each source kind is off unless the configuration lists
// namespaces for it (config.ts, KITELINE_CLUSTER_SOURCES). Every replica watches, in each listed
// namespace: Argo CD cluster Secrets (label argocd.argoproj.io/secret-type=cluster), Cluster API
// kubeconfig Secrets (label cluster.x-k8s.io/cluster-name), ClusterProfiles with the Secrets
// labelled kiteline.io/clusterprofile that hold their credentials. The leader materialises each
// source object as a Cluster object (ClusterStore.applySource: a deterministic object name, so a
// stable id across restarts and replicas; the sanitized kubeconfig in its Secret), and deletes the
// Cluster once its source object is gone. From there the reconciler connects it like any cluster:
// a credential rotated in the source rewrites the Secret, whose watch event reconnects within
// moments, on every replica.
//
// One pass compares everything: on any event (debounced), the desired set (every source object)
// against the sourced Cluster objects; nothing is written when they agree. A sourced Cluster is
// deleted only when every watch of its kind has loaded (a source not yet listed is not "gone").
import type * as k8s from '@kubernetes/client-node';
import type { ClusterSourcesConfig } from '../config.js';
import {
  ARGOCD_SECRET_TYPE_LABEL,
  CAPI_CLUSTER_NAME_LABEL,
  CLUSTERPROFILE_CREDENTIALS_LABEL,
  fromArgoCdSecret,
  fromCapiSecret,
  fromClusterProfile,
  isCapiKubeconfigSecret,
  KITELINE_CLUSTER_MANAGER,
  type ClusterProfileLike,
  type SourceCluster,
  type SourceKind,
} from '../credentials/source-kubeconfig.js';
import { sourcedObjectName, sourceOf, type ClusterStore } from '../host/clusters.js';
import { describeApiError } from '../host/host-errors.js';
import { customResourceSource, secretSource, WatchedCache } from '../host/informer.js';
import type { LeaderElector } from '../host/lease.js';
import { SerialTask } from '../host/serial-task.js';
import type { Logger } from '../log.js';

export const CLUSTERPROFILE_GROUP = 'multicluster.x-k8s.io';
export const CLUSTERPROFILE_VERSION = 'v1alpha1';

interface Watch {
  kind: SourceKind;
  namespace: string;
  caches: WatchedCache<k8s.KubernetesObject>[];
  /** The source objects this namespace's watches hold now. */
  desired: () => SourceCluster[];
}

export class ClusterSources {
  private readonly watches: Watch[] = [];
  private readonly task: SerialTask;
  private readonly log: Logger;
  private stopped = false;

  constructor(
    kc: k8s.KubeConfig,
    private readonly sources: ClusterSourcesConfig,
    private readonly store: ClusterStore,
    private readonly lease: LeaderElector,
    log: Logger,
  ) {
    this.log = log.child({ component: 'cluster-sources' });
    this.task = new SerialTask(
      () => this.pass(),
      (err) => {
        this.log.warn({ err: describeApiError(err) }, 'cluster sources: pass failed; retrying');
        setTimeout(() => this.task.request(), 2000).unref();
      },
      10,
    );
    for (const namespace of sources.argocd) {
      const secrets = new WatchedCache(kc, secretSource(kc, namespace, `${ARGOCD_SECRET_TYPE_LABEL}=cluster`), log);
      this.watches.push({
        kind: 'argocd',
        namespace,
        caches: [secrets],
        desired: () => secrets.list().map((s) => fromArgoCdSecret(s)),
      });
    }
    for (const namespace of sources.capi) {
      const secrets = new WatchedCache(kc, secretSource(kc, namespace, CAPI_CLUSTER_NAME_LABEL), log);
      this.watches.push({
        kind: 'capi',
        namespace,
        caches: [secrets],
        desired: () =>
          secrets
            .list()
            .filter((s) => isCapiKubeconfigSecret(s))
            .map((s) => fromCapiSecret(s)),
      });
    }
    for (const namespace of sources.clusterprofile) {
      const profiles = new WatchedCache<k8s.KubernetesObject & ClusterProfileLike>(
        kc,
        customResourceSource(kc, namespace, 'clusterprofiles', CLUSTERPROFILE_GROUP, CLUSTERPROFILE_VERSION),
        log,
      );
      const credentials = new WatchedCache(kc, secretSource(kc, namespace, CLUSTERPROFILE_CREDENTIALS_LABEL), log);
      this.watches.push({
        kind: 'clusterprofile',
        namespace,
        caches: [profiles, credentials],
        desired: () =>
          profiles
            .list()
            // The ClusterProfiles kiteline publishes describe its own clusters: never read back.
            .filter((p) => p.spec?.clusterManager?.name !== KITELINE_CLUSTER_MANAGER)
            .map((p) =>
              fromClusterProfile(
                p,
                credentials
                  .list()
                  .find((s) => s.metadata?.labels?.[CLUSTERPROFILE_CREDENTIALS_LABEL] === p.metadata?.name),
              ),
            ),
      });
    }
    for (const watch of this.watches) {
      for (const cache of watch.caches) {
        for (const verb of ['add', 'update', 'delete'] as const) cache.on(verb, () => this.task.request());
      }
    }
    lease.on('started', () => this.task.request());
  }

  /** True when any source is configured. */
  get enabled(): boolean {
    return this.watches.length > 0;
  }

  /**
   * Starts every watch without waiting for it: a source whose namespace or kind (the ClusterProfile
   * CRD) is missing, or that RBAC does not allow, keeps retrying (logged) and blocks nothing else.
   */
  start(): void {
    for (const watch of this.watches) {
      for (const cache of watch.caches) {
        void cache.start().then(() => this.task.request());
      }
    }
    // Sourced Clusters whose kind is no longer configured are removed by the first pass.
    this.task.request();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.task.stop();
    await Promise.all(this.watches.flatMap((w) => w.caches.map((c) => c.stop())));
  }

  private synced(kind: SourceKind, namespace: string): boolean {
    const watch = this.watches.find((w) => w.kind === kind && w.namespace === namespace);
    return !!watch && watch.caches.every((c) => c.isSynced);
  }

  private configured(kind: SourceKind, namespace: string): boolean {
    return this.sources[kind].includes(namespace);
  }

  /** One comparison of every source object with the sourced Cluster objects (leader only). */
  private async pass(): Promise<void> {
    if (this.stopped || !this.lease.isLeader || !this.store.cache.isSynced) return;
    const wanted = new Set<string>();
    let failures = 0;
    for (const watch of this.watches) {
      if (!watch.caches.every((c) => c.isSynced)) continue;
      for (const desired of watch.desired()) {
        wanted.add(sourcedObjectName(desired.kind, desired.namespace, desired.objectName));
        const what = `${desired.kind} ${desired.namespace}/${desired.objectName}`;
        if (!(await this.each(what, () => this.store.applySource(desired)))) failures++;
      }
    }
    for (const cr of this.store.sourced()) {
      if (wanted.has(cr.metadata.name)) continue;
      const source = sourceOf(cr)!;
      // Gone from a source we have fully listed, or from a source no longer configured.
      if (this.synced(source.kind, source.namespace) || !this.configured(source.kind, source.namespace)) {
        if (!(await this.each(cr.metadata.name, () => this.store.removeSource(cr)))) failures++;
      }
    }
    // The others are done; the pass is retried for these (onError).
    if (failures > 0) throw new Error(`${failures} cluster source object(s) could not be applied`);
  }

  /** One object's step of a pass: a failure is logged and the pass goes on with the others. */
  private async each(what: string, step: () => Promise<void>): Promise<boolean> {
    try {
      await step();
      return true;
    } catch (err) {
      this.log.warn({ object: what, err: describeApiError(err) }, 'could not apply a cluster source object');
      return false;
    }
  }
}
