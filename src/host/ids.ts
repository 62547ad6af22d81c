// Integer ids for Users, Clusters, Roles, APIKeys and Templates: unique, stable, never reused, and assigned
// race-free across replicas. One ConfigMap holds a counter per kind; allocating is a
// read-increment-replace guarded by the ConfigMap's resourceVersion (compare-and-swap), retried
// on conflict. A counter only grows, so a deleted object's id is never handed out again.
import * as k8s from '@kubernetes/client-node';
import { apiStatus } from './kube.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';

export type IdKind = 'users' | 'clusters' | 'roles' | 'apikeys' | 'templates';

export const ID_COUNTER_CONFIGMAP = 'kiteline-id-counters';

export class IdAllocator {
  constructor(
    private readonly core: k8s.CoreV1Api,
    private readonly namespace: string,
  ) {}

  /** Returns the next id of kind, at least `floor + 1` (so ids above existing ones are never reused). */
  async next(kind: IdKind, floor = 0): Promise<number> {
    for (let attempt = 0; attempt < 50; attempt++) {
      const current = await this.read();
      if (!current) {
        try {
          await this.core.createNamespacedConfigMap({
            namespace: this.namespace,
            body: {
              metadata: { name: ID_COUNTER_CONFIGMAP, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
              data: { [kind]: String(floor + 1) },
            },
          });
          return floor + 1;
        } catch (err) {
          if (apiStatus(err) === 409) continue; // another replica created it first
          throw err;
        }
      }
      const last = Number(current.data?.[kind] ?? '0');
      const id = Math.max(last, floor) + 1;
      try {
        await this.core.replaceNamespacedConfigMap({
          name: ID_COUNTER_CONFIGMAP,
          namespace: this.namespace,
          body: { ...current, data: { ...current.data, [kind]: String(id) } },
        });
        return id;
      } catch (err) {
        if (apiStatus(err) === 409) {
          await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
          continue; // someone else allocated: read again
        }
        throw err;
      }
    }
    throw new Error(`could not allocate a ${kind} id: too much contention`);
  }

  private async read(): Promise<k8s.V1ConfigMap | undefined> {
    try {
      return await this.core.readNamespacedConfigMap({ name: ID_COUNTER_CONFIGMAP, namespace: this.namespace });
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }
}
