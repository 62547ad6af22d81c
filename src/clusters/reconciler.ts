// The cluster reconciler. Every replica watches Cluster objects and their kubeconfig Secrets
// (through the host store's caches) and keeps one connection per enabled cluster in its
// ClusterRegistry: a warm one (WarmConnection) for the clusters the fleet gives this replica to
// hold (fleet.ts), and for the others a RemoteConnection through their holder's internal hop. A
// change to a Cluster, its Secret or the fleet's members takes effect as soon as the event
// arrives, without a restart. A cluster's holder writes its status (ready, version, error,
// conditions, observedGeneration; only when something changed), so each status is written once;
// the elected leader runs the store's housekeeping after every change: settling the one default
// cluster (ClusterStore.settleDefaults) and re-opening the import once no cluster is left. (Ids of
// Clusters applied with kubectl are back-filled by IdBackfill, as for every kind: ClusterManager.)
import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import type { Config } from '../config.js';
import {
  clusterDisplayName,
  clusterOf,
  describeSource,
  KUBECONFIG_KEY,
  SOURCE_ERROR_ANNOTATION,
  sourceOf,
  type ClusterStore,
} from '../host/clusters.js';
import { describeApiError } from '../host/host-errors.js';
import type { LeaderElector } from '../host/lease.js';
import type { ClusterResource, ClusterStatus, Condition } from '../host/resources.js';
import type { HostStore } from '../host/store.js';
import type { Logger } from '../log.js';
import { WarmConnection, type ConnectionMeta } from './connection.js';
import type { Fleet } from './fleet.js';
import { RemoteConnection } from './remote-connection.js';
import { KubeconfigError, sanitizeKubeconfig } from '../credentials/kubeconfig.js';
import { targetFromCredentials, targetFromKubeConfig, type ConnectionTarget } from './target.js';
import type { ClusterRegistry, RegisteredConnection } from './registry.js';
import { within } from '../within.js';

/** Why a cluster has no connection, for its status. */
interface Unserved {
  reason:
    'Disabled' | 'KubeconfigMissing' | 'KubeconfigInvalid' | 'NameConflict' | 'ConnectionFailed' | 'SourceInvalid';
  message: string;
}

/** The fingerprint of a connection with the host's own credentials (spec.inCluster). */
const IN_CLUSTER_FINGERPRINT = 'in-cluster';

/**
 * What a connection was built from, to tell whether it is current: a hash of the sanitized
 * kubeconfig, or the in-cluster marker when there is none.
 */
export function connectionFingerprint(sanitizedKubeconfig: string | undefined): string {
  return sanitizedKubeconfig === undefined
    ? IN_CLUSTER_FINGERPRINT
    : createHash('sha256').update(sanitizedKubeconfig).digest('hex');
}

/** What the reconciler reads of the configuration (and hands its connections). */
export type ReconcilerConfig = Pick<
  Config,
  | 'clusterProbeIntervalMs'
  | 'upstreamConnectTimeoutMs'
  | 'coalesceReads'
  | 'writeTurns'
  | 'maxWatchesPerPrincipal'
  | 'maxRequestsPerPrincipal'
  | 'clusterLookup'
>;

/** Reconciling work done per turn of the event loop before it yields (sync). */
const SYNC_SLICE_MS = 10;

/** What a served cluster's connection is built from. */
interface Served {
  target: ConnectionTarget;
  fingerprint: string;
  insecure: boolean;
}

/** Status writes in flight at once. */
const STATUS_WRITERS = 8;
/** How long after the last Cluster event the leader's housekeeping runs. */
const HOUSEKEEPING_DELAY_MS = 300;
/** An import lock older than this, with no cluster left, is removed (so import opens again). */
const STALE_IMPORT_LOCK_MS = 30_000;

export class ClusterReconciler {
  private readonly unserved = new Map<string, Unserved>();
  private readonly insecure = new Set<string>();
  private readonly fingerprints = new Map<string, string>();
  private readonly statusQueue = new Set<string>();
  /** Objects waiting to be reconciled (sync), and whether a drain of them is scheduled. */
  private readonly pending = new Set<string>();
  private draining = false;
  private nameConflictsScheduled = false;
  private started = false;
  /** The last sanitized kubeconfig per object, by the Secret version it came from (target). */
  private readonly sanitizedFrom = new Map<string, { secretVersion: string; result: Served | Unserved }>();
  /** Callbacks run after each sync of an object (see connectionFor). */
  private readonly syncWaiters = new Map<string, Set<() => void>>();
  private statusTimer: NodeJS.Timeout | undefined;
  private statusRunning = false;
  private housekeepingTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly log: Logger;

  constructor(
    private readonly host: HostStore,
    private readonly registry: ClusterRegistry,
    private readonly store: ClusterStore,
    private readonly lease: LeaderElector,
    private readonly fleet: Fleet,
    private readonly config: ReconcilerConfig,
    log: Logger,
  ) {
    this.log = log.child({ component: 'cluster-reconciler' });
    const onCluster = (cr: ClusterResource) => {
      this.sync(cr.metadata.name);
      this.scheduleNameConflicts();
      this.scheduleHousekeeping();
    };
    host.clusters.on('add', onCluster);
    host.clusters.on('update', onCluster);
    host.clusters.on('delete', onCluster);
    const onSecret = (secret: k8s.V1Secret) => {
      for (const cr of host.clusters.list()) {
        if (cr.spec?.kubeconfigSecretRef?.name === secret.metadata?.name) this.sync(cr.metadata.name);
      }
    };
    host.secrets.on('add', onSecret);
    host.secrets.on('update', onSecret);
    host.secrets.on('delete', onSecret);
    lease.on('started', () => this.scheduleHousekeeping());
    // Members came or went: clusters move to (or away from) this replica.
    fleet.on('change', () => {
      if (this.started) this.resyncAll();
    });
  }

  /** Call once the host caches are synced: connects every cluster, then keeps them current. */
  start(): void {
    this.started = true;
    this.resyncAll();
    if (!this.draining) this.registry.startupDone(); // no clusters to connect
    this.lease.start();
    // A slow safety net: anything an event missed (or a Secret holding a file-read token) is redone.
    const resync = () => {
      if (this.stopped) return;
      this.resyncAll();
      this.resyncTimer = setTimeout(resync, 60_000);
      this.resyncTimer.unref();
    };
    this.resyncTimer = setTimeout(resync, 60_000);
    this.resyncTimer.unref();
  }

  private resyncAll(): void {
    const present = new Set(this.host.clusters.list().map((cr) => cr.metadata.name));
    for (const name of present) this.sync(name);
    for (const name of this.registry.objects()) if (!present.has(name)) this.sync(name);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.pending.clear();
    clearTimeout(this.statusTimer);
    clearTimeout(this.housekeepingTimer);
    clearTimeout(this.resyncTimer);
    await this.lease.stop();
    this.registry.closeAll();
  }

  /**
   * A sourced cluster never serves a name a Cluster registered through the API or kubectl claims,
   * whether or not that one is connected now (disabled, its Secret being replaced): otherwise
   * whoever may write source objects could step into an admin's cluster name while it is down.
   */
  private nameHeldByAdmin(cr: ClusterResource): Unserved | undefined {
    if (!sourceOf(cr)) return undefined;
    const name = clusterDisplayName(cr);
    const holder = this.host.clusters
      .list()
      .find(
        (other) => !sourceOf(other) && other.metadata.name !== cr.metadata.name && clusterDisplayName(other) === name,
      );
    return holder
      ? { reason: 'NameConflict', message: `the name "${name}" belongs to ${describeClaimant(holder)}` }
      : undefined;
  }

  /** Where to connect: the host's own config for inCluster, else the sanitized kubeconfig Secret. */
  private target(cr: ClusterResource): Served | Unserved {
    const sourceError = cr.metadata.annotations?.[SOURCE_ERROR_ANNOTATION];
    const source = sourceOf(cr);
    if (source && sourceError) return { reason: 'SourceInvalid', message: `${describeSource(source)}: ${sourceError}` };
    if (cr.spec?.inCluster) {
      try {
        return {
          target: targetFromKubeConfig(this.host.kc),
          fingerprint: connectionFingerprint(undefined),
          insecure: false,
        };
      } catch (err) {
        return { reason: 'ConnectionFailed', message: `host credentials unusable: ${(err as Error).message}` };
      }
    }
    const ref = cr.spec?.kubeconfigSecretRef;
    if (!ref?.name)
      return {
        reason: 'KubeconfigMissing',
        message: 'spec.kubeconfigSecretRef is not set and spec.inCluster is false',
      };
    const secret = this.host.secrets.get(ref.name, this.host.namespace);
    const key = ref.key || KUBECONFIG_KEY;
    const raw = secret?.data?.[key];
    if (!secret) return { reason: 'KubeconfigMissing', message: `kubeconfig Secret "${ref.name}" not found` };
    if (!raw) return { reason: 'KubeconfigMissing', message: `kubeconfig Secret "${ref.name}" has no key "${key}"` };
    // Sanitizing parses YAML and certificates: done once per version of the Secret, not at every
    // event and resync that passes by (a start-up sees each Cluster and its Secret several times).
    const secretVersion = `${secret.metadata?.uid}/${secret.metadata?.resourceVersion}/${key}`;
    const known = this.sanitizedFrom.get(cr.metadata.name);
    if (known?.secretVersion === secretVersion) return known.result;
    const result = sanitizedTarget(raw);
    this.sanitizedFrom.set(cr.metadata.name, { secretVersion, result });
    return result;
  }

  /**
   * Brings one Cluster object's connection in line with its object and Secret: soon, not inside
   * the caller. Watch callbacks and resyncs only queue the name; the queue is worked through a
   * slice at a time between turns of the event loop, so 200 clusters arriving at start-up neither
   * hold up the host caches' sync (and /readyz) nor the requests being served meanwhile.
   */
  sync(objectName: string): void {
    if (this.stopped) return;
    this.pending.add(objectName);
    // Before start() the host caches are still filling: the names wait, and start() connects them
    // once the gateway has what it needs to serve (so /readyz does not wait for 200 TLS handshakes).
    if (this.draining || !this.started) return;
    this.draining = true;
    setImmediate(() => this.drainPending());
  }

  private drainPending(): void {
    const sliceEnd = performance.now() + SYNC_SLICE_MS;
    for (const objectName of this.pending) {
      if (this.stopped) break;
      this.pending.delete(objectName);
      this.reconcile(objectName);
      for (const waiter of this.syncWaiters.get(objectName) ?? []) waiter();
      if (performance.now() >= sliceEnd) break;
    }
    if (this.pending.size > 0 && !this.stopped) return void setImmediate(() => this.drainPending());
    this.draining = false;
    this.registry.startupDone();
  }

  /**
   * This replica's connection of an object once it is built from `fingerprint` (any connection when
   * undefined) and is one `wanted` takes, as soon as the sync that builds it has run; undefined
   * when that has not happened within `timeoutMs`.
   */
  async connectionFor(
    objectName: string,
    fingerprint: string | undefined,
    timeoutMs: number,
    wanted: (conn: RegisteredConnection) => boolean = () => true,
  ): Promise<RegisteredConnection | undefined> {
    const current = () => {
      const conn = this.registry.forObject(objectName);
      return conn && wanted(conn) && (fingerprint === undefined || this.fingerprints.get(objectName) === fingerprint)
        ? conn
        : undefined;
    };
    const now = current();
    if (now) return now;
    let check: () => void = () => undefined;
    const found = new Promise<RegisteredConnection>((resolve) => {
      check = () => {
        const conn = current();
        if (conn) resolve(conn);
      };
    });
    const waiters = this.syncWaiters.get(objectName) ?? new Set();
    this.syncWaiters.set(objectName, waiters.add(check));
    try {
      return await within(found, timeoutMs);
    } finally {
      waiters.delete(check);
      if (waiters.size === 0) this.syncWaiters.delete(objectName);
    }
  }

  /**
   * The connection that replaces `previous` (a remote one whose holder was just suspected) once
   * the reconciler has built it; undefined when none comes within the first-probe wait.
   */
  private async replacementOf(
    objectName: string,
    previous: RegisteredConnection,
  ): Promise<RegisteredConnection | undefined> {
    this.sync(objectName);
    return this.connectionFor(objectName, undefined, this.config.upstreamConnectTimeoutMs, (c) => c !== previous);
  }

  private reconcile(objectName: string): void {
    const cr = this.host.clusters.get(objectName, this.host.namespace);
    const existing = this.registry.forObject(objectName);
    if (!cr || cr.spec?.enabled === false) {
      if (existing) {
        this.registry.remove(objectName)?.close();
        this.log.info(
          { cluster: existing.name },
          cr ? 'cluster disabled; connection closed' : 'cluster removed; connection closed',
        );
      }
      this.fingerprints.delete(objectName);
      this.insecure.delete(objectName);
      this.sanitizedFrom.delete(objectName);
      if (cr) this.unserved.set(objectName, { reason: 'Disabled', message: 'the cluster is disabled' });
      else this.unserved.delete(objectName);
      if (cr) this.queueStatus(objectName);
      return;
    }
    const meta: ConnectionMeta = clusterOf(cr);
    const target = this.nameHeldByAdmin(cr) ?? this.target(cr);
    if ('reason' in target) {
      if (existing) this.registry.remove(objectName)?.close();
      this.fingerprints.delete(objectName);
      this.unserved.set(objectName, target);
      this.queueStatus(objectName);
      return;
    }
    this.unserved.delete(objectName);
    if (target.insecure) this.insecure.add(objectName);
    else this.insecure.delete(objectName);

    const holder = this.fleet.holderOf(objectName);
    const held = holder.identity === this.fleet.identity;
    const sameHolder =
      existing instanceof RemoteConnection
        ? !held && existing.holder.identity === holder.identity && existing.holder.address === holder.address
        : held;
    if (existing && sameHolder && this.fingerprints.get(objectName) === target.fingerprint) {
      const renamed =
        existing.meta.name !== meta.name ||
        existing.meta.id !== meta.id ||
        existing.meta.source?.kind !== meta.source?.kind;
      existing.meta = meta;
      if (renamed) this.registry.reindex();
      this.queueStatus(objectName);
      return;
    }
    if (!held) {
      const remote: RemoteConnection = new RemoteConnection(meta, {
        fleet: this.fleet,
        holder,
        fingerprint: target.fingerprint,
        callerLimits: { watches: this.config.maxWatchesPerPrincipal, requests: this.config.maxRequestsPerPrincipal },
        connectTimeoutMs: this.config.upstreamConnectTimeoutMs,
        recorded: () => this.host.clusters.get(objectName, this.host.namespace)?.status,
        rehome: (): Promise<RegisteredConnection | undefined> => this.replacementOf(objectName, remote),
      });
      this.fingerprints.set(objectName, target.fingerprint);
      this.registry.set(remote);
      retire(existing);
      if (existing instanceof WarmConnection)
        this.log.info({ cluster: meta.name, holder: holder.identity }, 'cluster handed to another replica');
      return;
    }
    let conn: WarmConnection;
    try {
      conn = new WarmConnection(meta, {
        target: target.target,
        connectTimeoutMs: this.config.upstreamConnectTimeoutMs,
        probeIntervalMs: this.config.clusterProbeIntervalMs,
        coalesceReads: this.config.coalesceReads,
        writeTurns: this.config.writeTurns,
        callerLimits: { watches: this.config.maxWatchesPerPrincipal, requests: this.config.maxRequestsPerPrincipal },
        lookup: this.config.clusterLookup,
        log: this.log,
        rehome: () => this.replacementOf(objectName, conn),
      });
    } catch (err) {
      if (existing) this.registry.remove(objectName)?.close();
      this.fingerprints.delete(objectName);
      this.unserved.set(objectName, { reason: 'ConnectionFailed', message: (err as Error).message });
      this.queueStatus(objectName);
      return;
    }
    conn.on('health', () => this.queueStatus(objectName));
    this.fingerprints.set(objectName, target.fingerprint);
    this.registry.set(conn);
    retire(existing);
    conn.startProbing();
    this.log.info(
      { cluster: meta.name, server: conn.serverUrl, replaced: existing instanceof WarmConnection },
      existing instanceof WarmConnection
        ? 'cluster connection replaced'
        : existing
          ? 'cluster taken over from another replica'
          : 'cluster connected',
    );
    // Its status is written once its first probe has told something (the 'health' event).
  }

  // ---- status (the holder of each cluster) ----

  /**
   * Queues the status of every Cluster that shares its name with another, or whose status still
   * reports a NameConflict: a change to one claimant changes what the others' statuses say.
   */
  /** Once per turn of the event loop, however many Cluster events arrived (a start-up brings thousands). */
  private scheduleNameConflicts(): void {
    if (this.nameConflictsScheduled) return;
    this.nameConflictsScheduled = true;
    setImmediate(() => {
      this.nameConflictsScheduled = false;
      if (!this.stopped) this.queueNameConflicts();
    });
  }

  private queueNameConflicts(): void {
    const claims = new Map<string, number>();
    const all = this.host.clusters.list();
    for (const cr of all) claims.set(clusterDisplayName(cr), (claims.get(clusterDisplayName(cr)) ?? 0) + 1);
    for (const cr of all) {
      const reported = cr.status?.conditions?.some((c) => c.type === 'NameConflict');
      if ((claims.get(clusterDisplayName(cr)) ?? 0) > 1 || reported) this.queueStatus(cr.metadata.name);
    }
  }

  /**
   * The NameConflict condition of a Cluster whose name another Cluster object claims too, on both
   * (every claimant): who serves the name and who does not. undefined without a rival.
   */
  private nameConflict(cr: ClusterResource): { served: boolean; message: string } | undefined {
    const name = clusterDisplayName(cr);
    const rivals = this.host.clusters
      .list()
      .filter((other) => other.metadata.name !== cr.metadata.name && clusterDisplayName(other) === name);
    if (rivals.length === 0) return undefined;
    const serving = this.registry.get(name)?.meta.objectName;
    if (serving === cr.metadata.name) {
      return {
        served: true,
        message:
          `this cluster serves the name "${name}"; also claimed by ${describeClaimants(rivals)}, ` +
          'which is not served under it (rename or remove one)',
      };
    }
    const winner = rivals.find((r) => r.metadata.name === serving);
    const holder = winner ? `served by ${describeClaimant(winner)}` : `claimed by ${describeClaimants(rivals)}`;
    return {
      served: false,
      message: `the name "${name}" is ${holder}; this cluster is not served under it (rename or remove one)`,
    };
  }

  private queueStatus(objectName: string): void {
    if (this.stopped || !this.fleet.holds(objectName)) return;
    this.statusQueue.add(objectName);
    if (!this.statusTimer && !this.statusRunning) {
      this.statusTimer = setTimeout(() => void this.flushStatus(), 20);
      this.statusTimer.unref();
    }
  }

  private async flushStatus(): Promise<void> {
    this.statusTimer = undefined;
    this.statusRunning = true;
    const names = [...this.statusQueue];
    this.statusQueue.clear();
    const retry: string[] = [];
    // A few at a time: a start-up with a thousand clusters writes a thousand statuses, and the
    // host's API server (and its etcd) should not take them all at once while the probes run.
    let next = 0;
    const writer = async () => {
      while (next < names.length && !this.stopped) {
        const name = names[next++];
        try {
          if (!(await this.writeStatus(name))) retry.push(name);
        } catch (err) {
          this.log.warn({ object: name, err: describeApiError(err) }, 'could not write cluster status');
          retry.push(name);
        }
      }
    };
    await Promise.all(Array.from({ length: STATUS_WRITERS }, writer));
    this.statusRunning = false;
    if (this.stopped) return;
    if (retry.length > 0) {
      // A conflict means our cached copy was stale: the watch brings the new one, then retry.
      setTimeout(() => retry.forEach((n) => this.queueStatus(n)), 200).unref();
    }
    if (this.statusQueue.size > 0 && !this.statusTimer) {
      this.statusTimer = setTimeout(() => void this.flushStatus(), 20);
      this.statusTimer.unref();
    }
  }

  /** The status this replica observes for one Cluster object. */
  desiredStatus(cr: ClusterResource): ClusterStatus {
    const objectName = cr.metadata.name;
    const previous = cr.status ?? {};
    const conn = this.registry.forObject(objectName);
    let ready = false;
    let version = previous.version ?? '';
    let error = '';
    let reason: string;
    let message: string;
    const unserved = this.unserved.get(objectName);
    const conflict = this.nameConflict(cr);
    if (conn && !this.registry.isServing(objectName)) {
      const winner = this.registry.get(conn.name);
      reason = 'NameConflict';
      error = message =
        conflict?.message ?? `another cluster (id ${winner?.id ?? '?'}) already uses the name "${conn.name}"`;
    } else if (conn) {
      const health = conn.currentHealth;
      ready = health.ready;
      version = health.version || version;
      error = health.error;
      reason = health.ready ? 'Reachable' : 'Unreachable';
      message = health.ready ? `API server ${health.version} answers` : health.error;
    } else if (unserved) {
      reason = unserved.reason;
      message = unserved.message;
      error = unserved.reason === 'Disabled' ? '' : unserved.message;
    } else {
      reason = 'Pending';
      message = 'not connected yet';
    }
    const generation = cr.metadata.generation;
    const conditions: Condition[] = [
      condition(previous.conditions, 'Ready', ready ? 'True' : 'False', reason, message, generation),
    ];
    if (conflict) {
      conditions.push(
        condition(
          previous.conditions,
          'NameConflict',
          'True',
          conflict.served ? 'ServesName' : 'NameTaken',
          conflict.message,
          generation,
        ),
      );
    }
    if (this.insecure.has(objectName)) {
      conditions.push(
        condition(
          previous.conditions,
          'TLSVerified',
          'False',
          'InsecureSkipTLSVerify',
          'the kubeconfig sets insecure-skip-tls-verify: the server certificate is not checked',
          generation,
        ),
      );
    }
    const status: ClusterStatus = {
      ready,
      version,
      error,
      conditions,
      lastProbeTime: previous.lastProbeTime ?? new Date().toISOString(),
    };
    if (generation !== undefined) status.observedGeneration = generation;
    return status;
  }

  /** Writes the status when it differs; false when the write lost a race (retry later). */
  private async writeStatus(objectName: string): Promise<boolean> {
    if (!this.fleet.holds(objectName)) return true;
    const cr = this.host.clusters.get(objectName, this.host.namespace);
    if (!cr) return true;
    const conn = this.registry.forObject(objectName);
    if (conn instanceof WarmConnection && !conn.probed) return true; // its first probe queues it again
    const next = this.desiredStatus(cr);
    if (sameStatus(cr.status, next)) return true;
    next.lastProbeTime = new Date().toISOString();
    return this.store.writeStatus({ ...cr, status: next });
  }

  // ---- housekeeping (leader only) ----

  private scheduleHousekeeping(): void {
    if (this.stopped || !this.lease.isLeader) return;
    clearTimeout(this.housekeepingTimer);
    this.housekeepingTimer = setTimeout(() => {
      this.housekeeping().catch((err) => {
        this.log.warn({ err: describeApiError(err) }, 'cluster housekeeping failed; retrying');
        setTimeout(() => this.scheduleHousekeeping(), 2000).unref();
      });
    }, HOUSEKEEPING_DELAY_MS);
    this.housekeepingTimer.unref();
  }

  /** Exactly one default cluster; a stale import lock removed once no cluster is left. */
  async housekeeping(): Promise<void> {
    if (!this.lease.isLeader || this.stopped) return;
    await this.store.settleDefaults();
    if (await this.store.reopenImportIfStale(STALE_IMPORT_LOCK_MS))
      this.log.info('no cluster left: import is open again');
  }
}

/** Ends a connection that was replaced: a warm one lets its requests in flight finish first. */
function retire(conn: RegisteredConnection | undefined): void {
  if (conn instanceof WarmConnection) conn.retire();
  else conn?.close();
}

/** A condition with lastTransitionTime kept while its status stays the same. */
function condition(
  previous: Condition[] | undefined,
  type: string,
  status: Condition['status'],
  reason: string,
  message: string,
  generation?: number,
): Condition {
  const before = previous?.find((c) => c.type === type);
  const c: Condition = {
    type,
    status,
    reason,
    message,
    lastTransitionTime:
      before && before.status === status && before.lastTransitionTime
        ? before.lastTransitionTime
        : new Date().toISOString(),
  };
  if (generation !== undefined) c.observedGeneration = generation;
  return c;
}

function sameStatus(current: ClusterStatus | undefined, next: ClusterStatus): boolean {
  if (!current) return false;
  const strip = (s: ClusterStatus) =>
    JSON.stringify({
      ready: s.ready ?? false,
      version: s.version ?? '',
      error: s.error ?? '',
      observedGeneration: s.observedGeneration,
      conditions: (s.conditions ?? []).map((c) => [
        c.type,
        c.status,
        c.reason ?? '',
        c.message ?? '',
        c.observedGeneration,
      ]),
    });
  return strip(current) === strip(next);
}

/** The connection target of a kubeconfig (base64, as the Secret holds it), or why it is unusable. */
function sanitizedTarget(base64: string): Served | Unserved {
  try {
    const sanitized = sanitizeKubeconfig(Buffer.from(base64, 'base64').toString('utf8'));
    return {
      target: targetFromCredentials(sanitized.credentials),
      fingerprint: connectionFingerprint(sanitized.kubeconfig),
      insecure: sanitized.credentials.insecureSkipTlsVerify,
    };
  } catch (err) {
    const message =
      err instanceof KubeconfigError ? err.message : `kubeconfig cannot be loaded: ${(err as Error).message}`;
    return { reason: 'KubeconfigInvalid', message };
  }
}

/** Claimants for a status message: the first few by name, then how many more (a status has a size limit). */
function describeClaimants(rivals: ClusterResource[]): string {
  const named = rivals.slice(0, MAX_NAMED_CLAIMANTS).map(describeClaimant).join(', ');
  const more = rivals.length - MAX_NAMED_CLAIMANTS;
  return more > 0 ? `${named} and ${more} more` : named;
}
const MAX_NAMED_CLAIMANTS = 5;

/** A Cluster object in another one's status: its object name, id and where it comes from. */
function describeClaimant(cr: ClusterResource): string {
  const source = sourceOf(cr);
  const id = clusterOf(cr).id;
  return (
    `cluster object "${cr.metadata.name}" (${id ? `id ${id}, ` : ''}` +
    `${source ? `from the ${describeSource(source)}` : 'registered through the API or kubectl'})`
  );
}
