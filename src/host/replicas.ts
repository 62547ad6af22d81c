// Who is in the fleet: each replica holds a Lease of its own in the install namespace (labelled
// kiteline.io/replica, its internal address in an annotation) and renews it every RENEW_MS; every
// replica lists those Leases every LIST_MS and counts as live the ones renewed within their
// duration, measured on its own clock (as the leader election does), from when it saw the Lease
// move; a Lease seen for the first time counts from its renewTime.
// A replica that stops deletes its Lease, so the others see it gone at their next list; one that
// dies is gone once its Lease has not moved for LEASE_SECONDS, or at once when a newer Lease names
// its address (one process listens at an address: a container restarted in its pod, or a pod IP
// taken by a new pod, is the successor there). clusters/fleet.ts decides from
// these members which replica holds which cluster.
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { describeApiError, isAlreadyExists, isNotFound, isStale } from './host-errors.js';
import { hostApiClient } from './kube.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';

export const REPLICA_LABEL = 'kiteline.io/replica';
export const ADDRESS_ANNOTATION = 'kiteline.io/internal-address';
/** A Lease not renewed for this long is a replica gone. */
export const LEASE_SECONDS = 6;
const RENEW_MS = 2_000;
const LIST_MS = 1_000;
/** A dead replica's Lease is deleted this long after it expired. */
const FORGET_DEAD_MS = 60_000;

export interface Replica {
  /** The replica's identity (its Lease's holder): unique per process. */
  identity: string;
  /** Where its internal hop listens, e.g. http://10.0.0.7:8080. */
  address: string;
}

interface LeaseObject {
  metadata: {
    name: string;
    resourceVersion?: string;
    creationTimestamp?: string | Date;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    renewTime?: string | null;
    acquireTime?: string | null;
  };
}

const microTime = (date = new Date()) => date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

/** The Lease name of a replica: its identity hashed to a valid name. */
function leaseName(identity: string): string {
  return `kiteline-replica-${createHash('sha256').update(identity).digest('hex').slice(0, 16)}`;
}

/** Emits 'change' (Replica[]) whenever the set of live replicas changes. */
export class ReplicaLeases extends EventEmitter {
  private readonly api: k8s.CustomObjectsApi;
  private readonly log: Logger;
  private readonly name: string;
  private address = '';
  /** When this replica joined (its Lease's acquireTime). */
  private acquired = '';
  private renewTimer: NodeJS.Timeout | undefined;
  private listTimer: NodeJS.Timeout | undefined;
  private running = false;
  /** When (our clock) each Lease's resourceVersion last changed. */
  private readonly seen = new Map<string, { resourceVersion: string; at: number }>();
  private live: Replica[] = [];

  constructor(
    kc: k8s.KubeConfig,
    private readonly namespace: string,
    readonly identity: string,
    log: Logger,
  ) {
    super();
    this.api = hostApiClient(kc, k8s.CustomObjectsApi, log);
    this.name = leaseName(identity);
    this.log = log.child({ component: 'replicas', identity });
  }

  /** The live replicas as last listed, this one included once it has joined. */
  members(): Replica[] {
    return this.live;
  }

  /** Writes this replica's Lease and reads the others once; then keeps both current. */
  async join(address: string): Promise<void> {
    this.address = address;
    this.acquired = microTime();
    this.running = true;
    await this.renew().catch((err) => this.log.warn({ err: describeApiError(err) }, 'could not write replica lease'));
    await this.list().catch((err) => this.log.warn({ err: describeApiError(err) }, 'could not list replicas'));
    const renewLoop = () => {
      this.renewTimer = setTimeout(() => {
        void this.renew()
          .catch((err) => this.log.warn({ err: describeApiError(err) }, 'replica lease renewal failed'))
          .then(() => this.running && renewLoop());
      }, RENEW_MS);
      this.renewTimer.unref();
    };
    const listLoop = () => {
      this.listTimer = setTimeout(() => {
        void this.list()
          .catch((err) => this.log.warn({ err: describeApiError(err) }, 'could not list replicas'))
          .then(() => this.running && listLoop());
      }, LIST_MS);
      this.listTimer.unref();
    };
    renewLoop();
    listLoop();
  }

  /** Deletes this replica's Lease: the others take its clusters at their next list. False when it had left already. */
  async leave(): Promise<boolean> {
    if (!this.running) return false;
    this.running = false;
    clearTimeout(this.renewTimer);
    clearTimeout(this.listTimer);
    try {
      await this.api.deleteNamespacedCustomObject({ ...this.path(), name: this.name });
    } catch (err) {
      if (!isNotFound(err)) this.log.warn({ err: describeApiError(err) }, 'could not delete replica lease');
    }
    return true;
  }

  private forget(name: string): void {
    this.api.deleteNamespacedCustomObject({ ...this.path(), name }).catch(() => undefined);
  }

  private path() {
    return { group: 'coordination.k8s.io', version: 'v1', namespace: this.namespace, plural: 'leases' };
  }

  private body(resourceVersion?: string): LeaseObject & { apiVersion: string; kind: string } {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        ...(resourceVersion ? { resourceVersion } : {}),
        labels: { [REPLICA_LABEL]: 'true', [MANAGED_BY_LABEL]: MANAGED_BY },
        annotations: { [ADDRESS_ANNOTATION]: this.address },
      },
      spec: {
        holderIdentity: this.identity,
        leaseDurationSeconds: LEASE_SECONDS,
        acquireTime: this.acquired,
        renewTime: microTime(),
      },
    };
  }

  private async renew(): Promise<void> {
    if (!this.running) return;
    let current: LeaseObject | undefined;
    try {
      current = (await this.api.getNamespacedCustomObject({ ...this.path(), name: this.name })) as LeaseObject;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    try {
      if (!current) await this.api.createNamespacedCustomObject({ ...this.path(), body: this.body() });
      else
        await this.api.replaceNamespacedCustomObject({
          ...this.path(),
          name: this.name,
          body: this.body(current.metadata.resourceVersion),
        });
    } catch (err) {
      if (!isAlreadyExists(err) && !isStale(err)) throw err; // a race with ourselves: next renewal
    }
  }

  private async list(): Promise<void> {
    const answer = (await this.api.listNamespacedCustomObject({
      ...this.path(),
      labelSelector: `${REPLICA_LABEL}=true`,
    })) as { items: LeaseObject[] };
    if (!this.running) return;
    const now = Date.now();
    /** Live by their renewals, and when each was acquired; then one per address. */
    const renewing: Array<Replica & { since: number }> = [];
    const names = new Set<string>();
    for (const lease of answer.items) {
      const { name, resourceVersion = '', annotations } = lease.metadata;
      names.add(name);
      const duration = (lease.spec?.leaseDurationSeconds ?? LEASE_SECONDS) * 1000;
      const known = this.seen.get(name);
      if (!known || known.resourceVersion !== resourceVersion) {
        // A Lease moved: renewed now. On first sight it was renewed at its renewTime (the writer's
        // clock), so a replica that joins agrees at once with the others on one that died a moment
        // before; a live one renews within RENEW_MS and counts from then, so only a clock behind
        // this one's by more than LEASE_SECONDS - RENEW_MS makes it look dead, for one renewal.
        const renewed = Date.parse(lease.spec?.renewTime ?? '') || now;
        this.seen.set(name, { resourceVersion, at: known ? now : Math.min(now, renewed) });
      }
      const at = this.seen.get(name)!.at;
      const identity = lease.spec?.holderIdentity ?? '';
      const address = annotations?.[ADDRESS_ANNOTATION] ?? '';
      const mine = identity === this.identity;
      if (!mine && address === this.address) {
        // A process at this replica's address before it (a container restarted in its pod): gone.
        this.forget(name);
      } else if (mine || (identity && address && now - at <= duration)) {
        const since = Date.parse(lease.spec?.acquireTime ?? '') || Date.parse(String(lease.metadata.creationTimestamp));
        renewing.push({ identity, address: mine ? this.address : address, since: since || 0 });
      } else if (now - at > duration + FORGET_DEAD_MS) {
        // A replica that died without deleting its Lease: any replica tidies it away.
        this.forget(name);
      }
    }
    for (const name of this.seen.keys()) if (!names.has(name)) this.seen.delete(name);
    // One process listens at an address: of the Leases naming one, the last acquired is the live
    // one (the others were processes before it there, e.g. a container the kubelet restarted).
    const atAddress = new Map<string, Replica & { since: number }>();
    for (const replica of renewing) {
      const other = atAddress.get(replica.address);
      if (!other || replica.since > other.since) atAddress.set(replica.address, replica);
    }
    const live: Replica[] = [...atAddress.values()].map(({ identity, address }) => ({ identity, address }));
    if (!live.some((r) => r.identity === this.identity)) live.push({ identity: this.identity, address: this.address });
    live.sort((a, b) => a.identity.localeCompare(b.identity));
    const key = (list: Replica[]) => list.map((r) => `${r.identity}@${r.address}`).join(' ');
    if (key(live) === key(this.live)) return;
    this.log.info({ replicas: live.map((r) => r.identity) }, 'fleet membership changed');
    this.live = live;
    this.emit('change', live);
  }
}
