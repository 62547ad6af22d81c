// Integer ids for Users, Clusters, Roles, APIKeys and Templates: unique, stable, never reused, and assigned
// race-free across replicas. One ConfigMap holds a counter per kind; allocating is a
// read-increment-replace guarded by the ConfigMap's resourceVersion (compare-and-swap), retried
// on conflict (retry.ts); running out of attempts is a 409 to try again. A counter only grows, so a
// deleted object's id is never handed out again.
import type * as k8s from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { retryOnConflict } from './retry.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';

export type IdKind = 'users' | 'clusters' | 'roles' | 'apikeys' | 'templates' | 'oauthproviders';

export const ID_COUNTER_CONFIGMAP = 'kiteline-id-counters';

export class IdAllocator {
  constructor(
    private readonly core: k8s.CoreV1Api,
    private readonly namespace: string,
  ) {}

  /** Returns the next id of kind, at least `floor + 1` (so ids above existing ones are never reused). */
  async next(kind: IdKind, floor = 0): Promise<number> {
    return retryOnConflict(
      `the ${kind} id counter`,
      async () => {
        const current = await this.read();
        const id = Math.max(Number(current?.data?.[kind] ?? '0'), floor) + 1;
        const body: k8s.V1ConfigMap = {
          ...current,
          metadata: {
            ...current?.metadata,
            name: ID_COUNTER_CONFIGMAP,
            labels: { ...current?.metadata?.labels, [MANAGED_BY_LABEL]: MANAGED_BY },
          },
          data: { ...current?.data, [kind]: String(id) },
        };
        // Both are compare-and-swaps: the replace carries the resourceVersion read, the create
        // collides with a replica that created the counter first (and then this runs again).
        if (current)
          await this.core.replaceNamespacedConfigMap({ name: ID_COUNTER_CONFIGMAP, namespace: this.namespace, body });
        else await this.core.createNamespacedConfigMap({ namespace: this.namespace, body });
        return id;
      },
      { attempts: 50, retryOn: isAlreadyExists },
    );
  }

  private async read(): Promise<k8s.V1ConfigMap | undefined> {
    try {
      return await this.core.readNamespacedConfigMap({ name: ID_COUNTER_CONFIGMAP, namespace: this.namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}
