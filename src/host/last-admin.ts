// "There is always an enabled admin", kept under concurrency on any number of replicas. Checking
// the cache and then writing would let two replicas disable the last two admins at once, each
// seeing the other still enabled. Instead every write that takes admin away from a user (disable,
// delete, unassign the admin role) first registers a removal intent in one ConfigMap with a
// compare-and-swap on its resourceVersion, and only then writes the user:
//   1. read the intents ConfigMap (resourceVersion R), then list the users from the API server
//      (a consistent read, in that order);
//   2. the admins that stay are the enabled admins, less the target, less every pending intent;
//      none: 409, nothing written;
//   3. replace the ConfigMap at R with the target's intent added (a conflict: start over at 1);
//   4. write the user; then drop the intent (done or failed, the live users now tell the truth).
// Two concurrent removals cannot both pass step 3 on the same R, and the later one sees the
// earlier one's intent (or, once it is dropped, its finished write). An intent left behind by a
// crashed replica only makes the guard stricter, and expires after INTENT_TTL_MS.
// Changes made with kubectl bypass this guard: the cluster's own RBAC governs those.
import type * as k8s from '@kubernetes/client-node';
import { ConflictError } from '../errors.js';
import type { CustomResources } from './crud.js';
import { apiStatus } from './host-errors.js';
import { MANAGED_BY, MANAGED_BY_LABEL, type UserResource } from './resources.js';
import type { HostStore } from './store.js';

export const ADMIN_REMOVALS_CONFIGMAP = 'kiteline-admin-removals';
const INTENT_TTL_MS = 60_000;
const MAX_ATTEMPTS = 20;

/** Whether the user, as given, is an enabled holder of the admin role. */
export function isEnabledAdmin(user: UserResource, adminRole: string): boolean {
  return user.spec?.enabled !== false && (user.spec?.roles ?? []).includes(adminRole);
}

export class LastAdminGuard {
  constructor(
    private readonly host: HostStore,
    private readonly users: CustomResources<UserResource>,
    private readonly adminRole: string,
  ) {}

  /**
   * Runs `write`, which takes admin away from `target`, unless no other enabled admin would be
   * left: then 409 "cannot <action> the last enabled admin" and nothing is written.
   */
  async removeAdmin<T>(target: UserResource, action: string, write: () => Promise<T>): Promise<T> {
    const username = target.spec.username;
    for (let attempt = 1; ; attempt++) {
      const intents = await this.readIntents();
      const now = Date.now();
      const pending = new Set(Object.entries(intents.data).filter(([, until]) => Number(until) > now).map(([name]) => name));
      const live = await this.users.list();
      const self = live.find((u) => u.spec?.username === username);
      if (!self || !isEnabledAdmin(self, this.adminRole)) return write(); // takes no admin away
      const staying = live.filter((u) => isEnabledAdmin(u, this.adminRole) && u.spec.username !== username && !pending.has(u.spec.username));
      if (staying.length === 0) throw new ConflictError(`cannot ${action} the last enabled admin`);
      const data = { ...Object.fromEntries([...pending].map((name) => [name, intents.data[name]!])), [username]: String(now + INTENT_TTL_MS) };
      if (await this.swap(intents.resourceVersion, data)) break;
      if (attempt >= MAX_ATTEMPTS) throw new ConflictError('too many concurrent admin changes; try again');
    }
    try {
      return await write();
    } finally {
      await this.dropIntent(username);
    }
  }

  private async readIntents(): Promise<{ resourceVersion: string | undefined; data: Record<string, string> }> {
    try {
      const cm = await this.host.core.readNamespacedConfigMap({ name: ADMIN_REMOVALS_CONFIGMAP, namespace: this.host.namespace });
      return { resourceVersion: cm.metadata?.resourceVersion, data: cm.data ?? {} };
    } catch (err) {
      if (apiStatus(err) === 404) return { resourceVersion: undefined, data: {} };
      throw err;
    }
  }

  /** Writes the intents if the ConfigMap is still at resourceVersion (absent: creates it); false on a lost race. */
  private async swap(resourceVersion: string | undefined, data: Record<string, string>): Promise<boolean> {
    const body: k8s.V1ConfigMap = {
      metadata: { name: ADMIN_REMOVALS_CONFIGMAP, labels: { [MANAGED_BY_LABEL]: MANAGED_BY }, ...(resourceVersion ? { resourceVersion } : {}) },
      data,
    };
    const { core, namespace } = this.host;
    try {
      if (resourceVersion) await core.replaceNamespacedConfigMap({ name: ADMIN_REMOVALS_CONFIGMAP, namespace, body });
      else await core.createNamespacedConfigMap({ namespace, body });
      return true;
    } catch (err) {
      if (apiStatus(err) === 409) return false;
      throw err;
    }
  }

  /** Drops one intent (best effort: a leftover only expires later). */
  private async dropIntent(username: string): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      try {
        const intents = await this.readIntents();
        if (!(username in intents.data)) return;
        const rest = { ...intents.data };
        delete rest[username];
        if (await this.swap(intents.resourceVersion, rest)) return;
      } catch {
        return;
      }
    }
  }
}
