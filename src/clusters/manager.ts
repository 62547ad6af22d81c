// The clusters part of a replica, assembled: the registry of warm connections (the
// ClusterDirectory routes use), the host-store writes, the leader lease and the reconciler, plus
// the JSON view of a Cluster for the admin routes. server.ts builds one and starts it once the
// host caches are synced.
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.js';
import { clusterDisplayName, ClusterWrites } from '../host/clusters.js';
import { IdAllocator } from '../host/ids.js';
import { LeaderElector } from '../host/lease.js';
import { resourceId, type ClusterResource } from '../host/resources.js';
import type { HostStore } from '../host/store.js';
import type { Logger } from '../log.js';
import { FIRST_PROBE_GRACE_MS } from './connection.js';
import { sanitizeKubeconfig } from './kubeconfig.js';
import { ClusterReconciler, connectionFingerprint } from './reconciler.js';
import { ClusterRegistry } from './registry.js';

/** A Cluster as the admin API shows it (CONTRACT section 5); config is never returned. */
export interface ClusterView {
  id: number;
  name: string;
  description: string;
  config: '';
  prometheusURL: string;
  inCluster: boolean;
  isDefault: boolean;
  enabled: boolean;
  impersonate: boolean;
  version: string;
  ready: boolean;
  error: string;
}

/** Where a just-written cluster connects: the host's own credentials, or a sanitized kubeconfig. */
export type WrittenConnection = { inCluster: true } | { inCluster: false; kubeconfig: string | undefined };

export class ClusterManager {
  readonly registry = new ClusterRegistry();
  readonly writes: ClusterWrites;
  readonly lease: LeaderElector;
  readonly reconciler: ClusterReconciler;
  /** The longest a registration answer waits for its cluster's first probe. */
  private readonly firstProbeWaitMs: number;

  constructor(
    readonly host: HostStore,
    config: Pick<Config, 'replicaId' | 'clusterProbeIntervalMs' | 'upstreamConnectTimeoutMs' | 'coalesceReads' | 'writeTurns' | 'maxWatchesPerPrincipal' | 'maxRequestsPerPrincipal'>,
    log: Logger,
    leaseOptions: ConstructorParameters<typeof LeaderElector>[4] = {},
  ) {
    const ids = new IdAllocator(host.core, host.namespace);
    this.writes = new ClusterWrites(host, ids);
    // Like client-go: the replica id plus a random suffix, so two processes never share an identity.
    const identity = `${config.replicaId}_${randomUUID().slice(0, 8)}`;
    this.lease = new LeaderElector(host.kc, host.namespace, identity, log, leaseOptions);
    this.reconciler = new ClusterReconciler(host, this.registry, this.writes, ids, this.lease, config, log);
    this.firstProbeWaitMs = config.upstreamConnectTimeoutMs + FIRST_PROBE_GRACE_MS;
  }

  /**
   * Waits until this replica has connected a Cluster object as just written (with that kubeconfig,
   * or the host's credentials; `kubeconfig: undefined` means whatever it stores) and probed it
   * once: at most the connect timeout plus FIRST_PROBE_GRACE_MS in all. The route that wrote it
   * answers after this, so the cluster serves (or shows its probe's error) at once.
   */
  async firstProbeAfterWrite(objectName: string, written: WrittenConnection): Promise<void> {
    const deadline = Date.now() + this.firstProbeWaitMs;
    const fingerprint = written.inCluster
      ? connectionFingerprint(undefined)
      : written.kubeconfig === undefined
        ? undefined
        : connectionFingerprint(sanitizeKubeconfig(written.kubeconfig).kubeconfig);
    const conn = await this.reconciler.connectionFor(objectName, fingerprint, this.firstProbeWaitMs);
    await conn?.firstProbe(Math.max(0, deadline - Date.now()));
  }

  /** Call after the host caches have synced. */
  start(): void {
    this.reconciler.start();
  }

  stop(): Promise<void> {
    return this.reconciler.stop();
  }

  /** Cluster objects that have an id, ordered by id (objects still waiting for one are left out). */
  listResources(): ClusterResource[] {
    return this.host.clusters
      .list()
      .filter((cr) => resourceId(cr) !== undefined)
      .sort((a, b) => resourceId(a)! - resourceId(b)!);
  }

  findById(id: number): ClusterResource | undefined {
    return this.host.clusters.list().find((cr) => resourceId(cr) === id);
  }

  /** Health from this replica's warm connection when it has one, else the recorded status. */
  view(cr: ClusterResource): ClusterView {
    const conn = this.registry.forObject(cr.metadata.name);
    const serving = conn && this.registry.isServing(cr.metadata.name);
    const status = cr.status ?? {};
    const enabled = cr.spec?.enabled !== false;
    return {
      id: resourceId(cr) ?? 0,
      name: clusterDisplayName(cr),
      description: cr.spec?.description ?? '',
      config: '',
      prometheusURL: cr.spec?.prometheusURL ?? '',
      inCluster: cr.spec?.inCluster === true,
      isDefault: cr.spec?.isDefault === true,
      enabled,
      impersonate: cr.spec?.impersonate === true,
      version: (serving ? conn.version : '') || status.version || '',
      ready: serving ? conn.ready : false,
      error: serving ? conn.lastError : enabled ? (this.reconciler.desiredStatus(cr).error ?? '') : '',
    };
  }
}
