// Write-back where the standard allows (docs/clusters.md, "Publishing ClusterProfiles"): with
// KITELINE_PUBLISH_CLUSTERPROFILES=<namespace>, the leader keeps one ClusterProfile
// (multicluster.x-k8s.io/v1alpha1, the SIG-Multicluster Cluster Inventory API) per cluster
// registered in kiteline itself (through the API or kubectl; not those read from a source), so
// other tools can find them: spec.clusterManager.name "kiteline", status.version.kubernetes and the
// condition ControlPlaneHealthy from the Cluster's status, and, when KITELINE_EXTERNAL_URL is set,
// an access provider "kiteline" whose server is the cluster's proxy URL on the gateway (no
// credential: callers bring their own kiteline token). Only ClusterProfiles labelled as published
// by this install are written or deleted; a ClusterProfile kiteline reads (a source) is never one
// of them (sources skip clusterManager "kiteline").
import * as k8s from '@kubernetes/client-node';
import { KITELINE_CLUSTER_MANAGER } from '../credentials/source-kubeconfig.js';
import { clusterDisplayName, sourceOf } from '../host/clusters.js';
import { describeApiError, isAlreadyExists, isNotFound } from '../host/host-errors.js';
import { customResourceSource, WatchedCache } from '../host/informer.js';
import { hostApiClient } from '../host/kube.js';
import type { LeaderElector } from '../host/lease.js';
import { objectNameFor } from '../host/names.js';
import { resourceId, type ClusterResource, type Condition } from '../host/resources.js';
import { SerialTask } from '../host/serial-task.js';
import type { HostStore } from '../host/store.js';
import type { Logger } from '../log.js';
import { CLUSTERPROFILE_GROUP, CLUSTERPROFILE_VERSION } from './sources.js';

/** The label the Cluster Inventory API gives a ClusterProfile's manager. */
export const CLUSTER_MANAGER_LABEL = 'x-k8s.io/cluster-manager';
/** Which kiteline install (its namespace) published a ClusterProfile. */
export const PUBLISHED_BY_LABEL = 'kiteline.io/published-by';

interface ProfileObject extends k8s.KubernetesObject {
  metadata: k8s.V1ObjectMeta & { name: string };
  spec?: { displayName?: string; clusterManager?: { name?: string } };
  status?: {
    version?: { kubernetes?: string };
    conditions?: Condition[];
    accessProviders?: Array<{ name: string; cluster: { server: string } }>;
  };
}

const TARGET = { group: CLUSTERPROFILE_GROUP, version: CLUSTERPROFILE_VERSION, plural: 'clusterprofiles' };
const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

export class ClusterProfilePublisher {
  private readonly profiles: WatchedCache<ProfileObject>;
  private readonly api: k8s.CustomObjectsApi;
  private readonly task: SerialTask;
  private readonly log: Logger;
  private readonly selector: string;

  constructor(
    private readonly host: HostStore,
    private readonly namespace: string,
    private readonly externalUrl: string | undefined,
    private readonly lease: LeaderElector,
    log: Logger,
  ) {
    this.log = log.child({ component: 'clusterprofile-publisher' });
    this.selector = `${CLUSTER_MANAGER_LABEL}=${KITELINE_CLUSTER_MANAGER},${PUBLISHED_BY_LABEL}=${host.namespace}`;
    this.api = hostApiClient(host.kc, k8s.CustomObjectsApi, log);
    this.profiles = new WatchedCache<ProfileObject>(
      host.kc,
      {
        ...customResourceSource<ProfileObject>(host.kc, namespace, TARGET.plural, TARGET.group, TARGET.version),
        labelSelector: this.selector,
        list: () =>
          this.api.listNamespacedCustomObject({ ...TARGET, namespace, labelSelector: this.selector }) as Promise<
            k8s.KubernetesListObject<ProfileObject>
          >,
      },
      log,
    );
    this.task = new SerialTask(
      () => this.pass(),
      (err) => {
        this.log.warn({ err: describeApiError(err) }, 'publishing ClusterProfiles failed; retrying');
        setTimeout(() => this.task.request(), 2000).unref();
      },
      50,
    );
    for (const verb of ['add', 'update', 'delete'] as const) {
      host.clusters.on(verb, () => this.task.request());
      this.profiles.on(verb, () => this.task.request());
    }
    lease.on('started', () => this.task.request());
  }

  /** Starts the watch of published profiles without waiting (a missing CRD is retried, logged). */
  start(): void {
    void this.profiles.start().then(() => this.task.request());
  }

  async stop(): Promise<void> {
    this.task.stop();
    await this.profiles.stop();
  }

  /** The ClusterProfile of one of kiteline's own clusters, as it should be. */
  private desired(cr: ClusterResource): ProfileObject {
    const name = clusterDisplayName(cr);
    const status = cr.status ?? {};
    const ready = status.ready === true;
    const readyCondition = status.conditions?.find((c) => c.type === 'Ready');
    const previous = this.profiles.get(profileName(name), this.namespace)?.status?.conditions;
    const before = previous?.find((c) => c.type === 'ControlPlaneHealthy');
    const healthy: Condition['status'] = ready ? 'True' : 'False';
    return {
      apiVersion: `${TARGET.group}/${TARGET.version}`,
      kind: 'ClusterProfile',
      metadata: {
        name: profileName(name),
        namespace: this.namespace,
        labels: { [CLUSTER_MANAGER_LABEL]: KITELINE_CLUSTER_MANAGER, [PUBLISHED_BY_LABEL]: this.host.namespace },
      },
      spec: { displayName: name, clusterManager: { name: KITELINE_CLUSTER_MANAGER } },
      status: {
        version: { kubernetes: status.version ?? '' },
        conditions: [
          {
            type: 'ControlPlaneHealthy',
            status: healthy,
            reason: ready ? 'Reachable' : readyCondition?.reason || 'Unknown',
            message: ready ? `the API server answers (${status.version ?? ''})` : status.error || 'not probed yet',
            lastTransitionTime:
              before?.status === healthy && before.lastTransitionTime
                ? before.lastTransitionTime
                : new Date().toISOString(),
          },
        ],
        ...(this.externalUrl
          ? {
              accessProviders: [
                {
                  name: 'kiteline',
                  cluster: { server: `${this.externalUrl}/k8s/clusters/${encodeURIComponent(name)}` },
                },
              ],
            }
          : {}),
      },
    };
  }

  private async pass(): Promise<void> {
    if (!this.lease.isLeader || !this.profiles.isSynced || !this.host.clusters.isSynced) return;
    const wanted = new Map<string, ProfileObject>();
    for (const cr of this.host.clusters.list()) {
      if (sourceOf(cr) || resourceId(cr) === undefined) continue;
      const profile = this.desired(cr);
      wanted.set(profile.metadata.name, profile);
    }
    for (const profile of wanted.values()) await this.write(profile);
    for (const existing of this.profiles.list()) {
      if (wanted.has(existing.metadata.name)) continue;
      try {
        await this.api.deleteNamespacedCustomObject({
          ...TARGET,
          namespace: this.namespace,
          name: existing.metadata.name,
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
  }

  /** Creates or updates one published ClusterProfile (spec, then status); nothing when it matches. */
  private async write(profile: ProfileObject): Promise<void> {
    const name = profile.metadata.name;
    let current = this.profiles.get(name, this.namespace);
    if (!current) {
      try {
        current = (await this.api.createNamespacedCustomObject({
          ...TARGET,
          namespace: this.namespace,
          body: { ...profile, status: undefined },
        })) as ProfileObject;
      } catch (err) {
        // Someone else's ClusterProfile of that name (not labelled as ours): left alone.
        if (isAlreadyExists(err)) return;
        throw err;
      }
    } else if (JSON.stringify(current.spec) !== JSON.stringify(profile.spec)) {
      await this.api.patchNamespacedCustomObject(
        { ...TARGET, namespace: this.namespace, name, body: { spec: profile.spec } },
        MERGE_PATCH,
      );
    }
    if (sameStatus(current.status, profile.status)) return;
    await this.api.patchNamespacedCustomObjectStatus(
      // accessProviders: null removes one published before KITELINE_EXTERNAL_URL was unset.
      { ...TARGET, namespace: this.namespace, name, body: { status: { accessProviders: null, ...profile.status } } },
      MERGE_PATCH,
    );
  }
}

/** The ClusterProfile name of a kiteline cluster: kiteline-<name>, hashed when not DNS-safe. */
export function profileName(clusterName: string): string {
  return objectNameFor('kiteline', clusterName);
}

function sameStatus(a: ProfileObject['status'], b: ProfileObject['status']): boolean {
  const strip = (s: ProfileObject['status']) =>
    JSON.stringify({
      version: s?.version?.kubernetes ?? '',
      conditions: (s?.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message, c.lastTransitionTime]),
      accessProviders: s?.accessProviders ?? [],
    });
  return strip(a) === strip(b);
}
