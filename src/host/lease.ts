// Leader election over a coordination.k8s.io/v1 Lease in the install namespace, as client-go does
// it: the holder renews every few seconds with a resourceVersion compare-and-swap; another
// replica takes over once it has seen no renewal for the lease duration (measured on its own
// clock, so clock skew between replicas does not matter), or at once when the holder released it.
// Emits 'started' and 'stopped' when this replica gains or loses leadership.
import { EventEmitter } from 'node:events';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { describeApiError, isAlreadyExists, isNotFound, isStale } from './host-errors.js';
import { hostApiClient } from './kube.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';

export const LEADER_LEASE_NAME = 'kiteline-leader';

export interface LeaseOptions {
  name?: string;
  leaseDurationSeconds?: number;
  renewIntervalMs?: number;
  retryIntervalMs?: number;
}

interface LeaseObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number;
  };
}

/** RFC 3339 with microseconds, the format of a Lease's MicroTime fields. */
function microTime(date = new Date()): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector extends EventEmitter {
  private readonly api: k8s.CustomObjectsApi;
  private readonly name: string;
  private readonly durationMs: number;
  private readonly renewIntervalMs: number;
  private readonly retryIntervalMs: number;
  private readonly log: Logger;
  private leader = false;
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  /** The acquire or renewal in flight: stop() lets it land before it releases. */
  private attempt: Promise<void> | undefined;
  private lastRenewed = 0;
  /** The lease as last seen and when (our clock) its resourceVersion last changed. */
  private observed: { resourceVersion: string; at: number } | undefined;

  constructor(
    kc: k8s.KubeConfig,
    private readonly namespace: string,
    readonly identity: string,
    log: Logger,
    options: LeaseOptions = {},
  ) {
    super();
    this.api = hostApiClient(kc, k8s.CustomObjectsApi, log);
    this.name = options.name ?? LEADER_LEASE_NAME;
    this.durationMs = (options.leaseDurationSeconds ?? 15) * 1000;
    this.renewIntervalMs = options.renewIntervalMs ?? 5000;
    this.retryIntervalMs = options.retryIntervalMs ?? 2000;
    this.log = log.child({ lease: this.name, identity });
  }

  get isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.tick();
  }

  private async tick(): Promise<void> {
    if (!this.running) return;
    this.attempt = this.tryAcquireOrRenew().catch((err: unknown) => {
      this.log.warn({ err: describeApiError(err) }, 'lease update failed');
    });
    await this.attempt;
    this.attempt = undefined;
    // could not renew in time
    if (this.leader && Date.now() - this.lastRenewed > this.durationMs) this.setLeader(false);
    if (!this.running) return;
    this.timer = setTimeout(() => void this.tick(), this.leader ? this.renewIntervalMs : this.retryIntervalMs);
    this.timer.unref();
  }

  private path() {
    return { group: 'coordination.k8s.io', version: 'v1', namespace: this.namespace, plural: 'leases' };
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const now = new Date();
    let current: LeaseObject | undefined;
    try {
      current = (await this.api.getNamespacedCustomObject({ ...this.path(), name: this.name })) as LeaseObject;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const spec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.round(this.durationMs / 1000),
      renewTime: microTime(now),
    };
    if (!current) {
      try {
        await this.api.createNamespacedCustomObject({
          ...this.path(),
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.name, namespace: this.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
            spec: { ...spec, acquireTime: microTime(now), leaseTransitions: 0 },
          },
        });
        this.renewed();
      } catch (err) {
        if (!isAlreadyExists(err)) throw err; // another replica created it first
      }
      return;
    }

    const rv = current.metadata.resourceVersion ?? '';
    if (!this.observed || this.observed.resourceVersion !== rv) this.observed = { resourceVersion: rv, at: Date.now() };
    const holder = current.spec?.holderIdentity ?? '';
    const heldByMe = holder === this.identity;
    const duration = (current.spec?.leaseDurationSeconds ?? 15) * 1000;
    const expired = holder === '' || Date.now() - this.observed.at > duration;
    if (!heldByMe && !expired) {
      if (this.leader) this.setLeader(false);
      return;
    }
    const body: LeaseObject = {
      ...current,
      spec: {
        ...current.spec,
        ...spec,
        acquireTime: heldByMe ? (current.spec?.acquireTime ?? microTime(now)) : microTime(now),
        leaseTransitions: (current.spec?.leaseTransitions ?? 0) + (heldByMe ? 0 : 1),
      },
    };
    try {
      await this.api.replaceNamespacedCustomObject({ ...this.path(), name: this.name, body });
      this.renewed();
    } catch (err) {
      if (isStale(err)) return; // someone else wrote it: look again next tick
      throw err;
    }
  }

  private renewed(): void {
    this.lastRenewed = Date.now();
    // A renewal that lands after stop() does not make a stopping replica the leader again; stop()
    // releases what it wrote.
    if (!this.leader && this.running) this.setLeader(true);
  }

  private setLeader(value: boolean): void {
    if (this.leader === value) return;
    this.leader = value;
    this.log.info(value ? 'became leader' : 'lost leadership');
    this.emit(value ? 'started' : 'stopped');
  }

  /** Stops campaigning; a leader releases the lease so another replica takes over at once. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearTimeout(this.timer);
    // A renewal sent just before would otherwise land after the release (a conflict for the
    // release, and the lease held by a replica that is gone until it expires).
    await this.attempt;
    const held = this.leader || Date.now() - this.lastRenewed < this.durationMs;
    this.setLeader(false);
    if (!held) return;
    try {
      const current = (await this.api.getNamespacedCustomObject({ ...this.path(), name: this.name })) as LeaseObject;
      if (current.spec?.holderIdentity !== this.identity) return;
      await this.api.replaceNamespacedCustomObject({
        ...this.path(),
        name: this.name,
        body: {
          ...current,
          spec: { ...current.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime() },
        },
      });
    } catch (err) {
      this.log.warn({ err: describeApiError(err) }, 'could not release the lease');
    }
  }
}
