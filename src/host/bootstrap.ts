// The super-user bootstrap lock: a ConfigMap with a fixed name whose atomic creation makes exactly
// one concurrent create_super_user call the winner (the others see 409 and get 403). Once the
// super user exists, the lock is owned by that User, so Kubernetes garbage-collects it with the
// user; bootstrap only reopens when no user exists at all (the route checks that first).
import type { KubernetesObject } from '@kubernetes/client-node';
import { ownerReference } from './crud.js';
import { apiStatus } from './kube.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';
import type { HostStore } from './store.js';

export const SUPERUSER_LOCK = 'kiteline-bootstrap-superuser';

export interface BootstrapClaim {
  /** Ties the lock to the created user (best effort: a lock left unowned keeps bootstrap closed). */
  ownBy(owner: KubernetesObject): Promise<void>;
  /** Gives the lock up after a failed bootstrap. */
  release(): Promise<void>;
}

/** Creates the lock; undefined when another caller holds it. */
export async function claimSuperUserBootstrap(host: HostStore): Promise<BootstrapClaim | undefined> {
  const { core, namespace } = host;
  try {
    await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: SUPERUSER_LOCK, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } }, data: { claimedAt: new Date().toISOString() } },
    });
  } catch (err) {
    if (apiStatus(err) === 409) return undefined;
    throw err;
  }
  return {
    async ownBy(owner) {
      try {
        await core.patchNamespacedConfigMap(
          { name: SUPERUSER_LOCK, namespace, body: [{ op: 'add', path: '/metadata/ownerReferences', value: [ownerReference(owner)] }] },
        );
      } catch {
        /* best effort */
      }
    },
    async release() {
      await core.deleteNamespacedConfigMap({ name: SUPERUSER_LOCK, namespace }).catch(() => undefined);
    },
  };
}
