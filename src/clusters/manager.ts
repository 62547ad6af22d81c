// The clusters part of a replica, assembled: the registry of warm connections (the
// ClusterDirectory resource routes use), the cluster store (admin writes and views, host/clusters.ts),
// the id back-fill of Clusters applied with kubectl, the leader lease and the reconciler. It gives
// the store what only the warm connections know: a cluster's health for its view, and the wait
// for a just-written cluster's first probe. server.ts builds one and starts it once the host
// caches are synced.
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.js';
import {
  clusterDisplayName,
  ClusterStore,
  type ClusterConnections,
  type ClusterHealth,
  type WrittenConnection,
} from '../host/clusters.js';
import { IdBackfill } from '../host/id-backfill.js';
import { IdAllocator } from '../host/ids.js';
import { LeaderElector } from '../host/lease.js';
import { ReplicaLeases } from '../host/replicas.js';
import type { ClusterResource } from '../host/resources.js';
import type { HostStore } from '../host/store.js';
import type { Logger } from '../log.js';
import { FIRST_PROBE_GRACE_MS, WarmConnection } from './connection.js';
import { Fleet } from './fleet.js';
import { sanitizeKubeconfig } from '../credentials/kubeconfig.js';
import { ClusterReconciler, connectionFingerprint, type ReconcilerConfig } from './reconciler.js';
import { ClusterRegistry, type RegisteredConnection } from './registry.js';
import { ClusterProfilePublisher } from './profile-publisher.js';
import { ClusterSources } from './sources.js';

/** How long a leaving replica keeps serving its hop for the others to see it gone (their list interval, a margin). */
const FLEET_HANDOVER_MS = 1_500;

export class ClusterManager implements ClusterConnections {
  readonly registry = new ClusterRegistry();
  readonly store: ClusterStore;
  readonly lease: LeaderElector;
  /** Which replica holds which cluster (the others reach it through the holder's hop). */
  readonly fleet: Fleet;
  private readonly replicas: ReplicaLeases;
  readonly reconciler: ClusterReconciler;
  /** Clusters read from Argo CD, Cluster API and ClusterProfile objects (off unless configured). */
  readonly sources: ClusterSources;
  /** ClusterProfiles for kiteline's own clusters (KITELINE_PUBLISH_CLUSTERPROFILES), else undefined. */
  readonly publisher: ClusterProfilePublisher | undefined;
  private readonly idBackfill: IdBackfill;
  /** The longest a registration answer waits for its cluster's first probe. */
  private readonly firstProbeWaitMs: number;
  private liveList: Promise<ClusterResource[]> | undefined;
  private nextLiveList: Promise<ClusterResource[]> | undefined;

  constructor(
    readonly host: HostStore,
    config: ReconcilerConfig &
      Pick<Config, 'replicaId'> &
      Partial<Pick<Config, 'clusterSources' | 'publishClusterProfiles' | 'externalUrl'>>,
    log: Logger,
    leaseOptions: ConstructorParameters<typeof LeaderElector>[4] = {},
  ) {
    const ids = new IdAllocator(host.core, host.namespace);
    this.store = new ClusterStore(host, ids, this, log);
    this.idBackfill = new IdBackfill(ids, log, [this.store]);
    // Like client-go: the replica id plus a random suffix, so two processes never share an identity.
    const identity = `${config.replicaId}_${randomUUID().slice(0, 8)}`;
    this.lease = new LeaderElector(host.kc, host.namespace, identity, log, leaseOptions);
    this.replicas = new ReplicaLeases(host.kc, host.namespace, identity, log);
    this.fleet = new Fleet(this.replicas);
    this.reconciler = new ClusterReconciler(host, this.registry, this.store, this.lease, this.fleet, config, log);
    this.sources = new ClusterSources(
      host.kc,
      config.clusterSources ?? { argocd: [], capi: [], clusterprofile: [] },
      this.store,
      this.lease,
      log,
    );
    this.publisher = config.publishClusterProfiles
      ? new ClusterProfilePublisher(host, config.publishClusterProfiles, config.externalUrl, this.lease, log)
      : undefined;
    this.firstProbeWaitMs = config.upstreamConnectTimeoutMs + FIRST_PROBE_GRACE_MS;
    this.registry.findUnseenWith((name) => this.connectUnseen(name));
  }

  /**
   * Waits until this replica has connected a Cluster object as just written (with that kubeconfig,
   * or the host's credentials; `kubeconfig: undefined` means whatever it stores) and probed it
   * once: at most the connect timeout plus FIRST_PROBE_GRACE_MS in all. The store's write returns
   * after this, so the cluster serves (or shows its probe's error) as soon as the route answers.
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

  /**
   * A cluster the API server has under `name` that this replica has not connected yet (applied
   * with kubectl a moment ago, its watch event still on the way): its connection once built, within
   * the first-probe wait; undefined when the API server has no such cluster either.
   */
  private async connectUnseen(name: string): Promise<RegisteredConnection | undefined> {
    const cr = (await this.freshClusterList()).find((c) => clusterDisplayName(c) === name);
    if (!cr || cr.spec?.enabled === false) return undefined;
    return this.reconciler.connectionFor(cr.metadata.name, undefined, this.firstProbeWaitMs);
  }

  /**
   * A live list of Clusters begun after the call: one in flight at a time, and every caller that
   * arrives meanwhile shares the next one (so any number of misses costs the host one list per
   * round trip, and none is answered from a list older than itself).
   */
  private freshClusterList(): Promise<ClusterResource[]> {
    if (!this.liveList) {
      this.liveList = this.store.listLive().finally(() => (this.liveList = undefined));
      return this.liveList;
    }
    this.nextLiveList ??= this.liveList
      .catch(() => undefined)
      .then(() => {
        this.nextLiveList = undefined;
        return this.freshClusterList();
      });
    return this.nextLiveList;
  }

  /**
   * This replica's warm connection of a Cluster object (built from `fingerprint` when given), as
   * the internal hop serves it: waits up to `waitMs` for the reconciler to take the cluster on (the
   * sender saw the fleet change first); undefined when this replica does not hold it.
   */
  async heldConnection(
    objectName: string,
    fingerprint: string | undefined,
    waitMs: number,
  ): Promise<WarmConnection | undefined> {
    const held = (conn: RegisteredConnection) => conn instanceof WarmConnection;
    const conn = await this.reconciler.connectionFor(objectName, fingerprint, waitMs, held);
    return conn instanceof WarmConnection ? conn : undefined;
  }

  /** A hop's sender could not reach these replicas: pass them over here too (fleet.ts suspect). */
  adoptSuspicions(header: string | string[] | undefined): void {
    if (typeof header !== 'string') return;
    for (const identity of header.split(',').slice(0, 16)) if (identity) this.fleet.suspect(identity);
  }

  /**
   * Joins the fleet with this replica's internal address (its Lease) and learns the others, so
   * start() connects only the clusters this replica holds.
   */
  async joinFleet(address: string): Promise<void> {
    await this.replicas.join(address);
  }

  /** Live replicas as this one sees them, and how many clusters this one holds (metrics). */
  fleetSummary(): { replicas: number; held: number } {
    const held = this.registry.objects().filter((name) => this.registry.forObject(name) instanceof WarmConnection);
    return { replicas: this.fleet.members().length, held: held.length };
  }

  /** Call after the host caches have synced (and joinFleet). */
  start(): void {
    this.idBackfill.start();
    this.reconciler.start();
    this.sources.start();
    this.publisher?.start();
  }

  /**
   * Leaves the fleet: the others take this replica's clusters at their next membership list;
   * waits until they have had the time to (only when there are others).
   */
  async leaveFleet(): Promise<void> {
    const others = this.replicas.members().some((m) => m.identity !== this.replicas.identity);
    if ((await this.replicas.leave()) && others) await new Promise((resolve) => setTimeout(resolve, FLEET_HANDOVER_MS));
  }

  async stop(): Promise<void> {
    await this.replicas.leave();
    this.fleet.close();
    this.idBackfill.stop();
    await this.sources.stop();
    await this.publisher?.stop();
    await this.reconciler.stop();
  }

  /** Health from this replica's warm connection when it has one, else the recorded status. */
  health(cr: ClusterResource): ClusterHealth {
    const conn = this.registry.forObject(cr.metadata.name);
    const serving = conn && this.registry.isServing(cr.metadata.name);
    const status = cr.status ?? {};
    const enabled = cr.spec?.enabled !== false;
    return {
      version: (serving ? conn.version : '') || status.version || '',
      ready: serving ? conn.ready : false,
      error: serving ? conn.lastError : enabled ? (this.reconciler.desiredStatus(cr).error ?? '') : '',
    };
  }
}
