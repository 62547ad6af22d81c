// A lock that is a ConfigMap: its atomic creation picks one winner among concurrent callers on any
// number of replicas (a create that collides means someone else holds, or held, it). The
// super-user bootstrap (bootstrap.ts) and the clusters' bootstrap import (clusters.ts) use one each.
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';
import type { HostStore } from './store.js';

export class ConfigMapLock {
  constructor(
    private readonly host: HostStore,
    readonly name: string,
  ) {}

  /** Creates the lock with `data`; false when it exists already. */
  async acquire(data: Record<string, string>): Promise<boolean> {
    try {
      await this.host.core.createNamespacedConfigMap({
        namespace: this.host.namespace,
        body: { metadata: { name: this.name, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } }, data },
      });
      return true;
    } catch (err) {
      if (isAlreadyExists(err)) return false;
      throw err;
    }
  }

  /** Deletes the lock (already gone is fine). */
  async release(): Promise<void> {
    try {
      await this.host.core.deleteNamespacedConfigMap({ name: this.name, namespace: this.host.namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** When the lock was created (the epoch when the API server gave no time); undefined when it does not exist. */
  async createdAt(): Promise<Date | undefined> {
    try {
      const cm = await this.host.core.readNamespacedConfigMap({ name: this.name, namespace: this.host.namespace });
      return cm.metadata?.creationTimestamp ? new Date(cm.metadata.creationTimestamp) : new Date(0);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}
