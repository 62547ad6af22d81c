// "There is always an enabled admin", kept under concurrency on any number of replicas. Checking
// the cache and then writing would let two replicas disable the last two admins at once, each
// seeing the other still enabled. Instead every write that takes admin away from a user (disable,
// delete, unassign the admin role) first registers a removal intent in one ConfigMap with a
// compare-and-swap on its resourceVersion, and only then writes the user:
//   1. read the intents ConfigMap (resourceVersion R), then list the users from the API server
//      (a consistent read, in that order);
//   2. the admins that stay are the enabled admins, less the target, less every pending intent;
//      none: 409, nothing written;
//   3. replace the ConfigMap at R with the target's intent added (a lost race: start over at 1,
//      through retryOnConflict);
//   4. write the user; then drop the intent (done or failed, the live users now tell the truth).
// Two concurrent removals cannot both pass step 3 on the same R, and the later one sees the
// earlier one's intent (or, once it is dropped, its finished write). An intent left behind by a
// crashed replica only makes the guard stricter, and expires after INTENT_TTL_MS.
// Changes made with kubectl bypass this guard: the cluster's own RBAC governs those.
import type * as k8s from '@kubernetes/client-node';
import { ConflictError } from '../errors.js';
import type { CustomResources } from './crud.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { MANAGED_BY, MANAGED_BY_LABEL, type UserResource } from './resources.js';
import { retryOnConflict } from './retry.js';
import type { HostStore } from './store.js';

export const ADMIN_REMOVALS_CONFIGMAP = 'kiteline-admin-removals';
const INTENT_TTL_MS = 60_000;
const MAX_ATTEMPTS = 20;
const WHAT = 'the set of enabled admins';

/** Whether the user, as given, is an enabled holder of the admin role. */
export function isEnabledAdmin(user: UserResource, adminRole: string): boolean {
  return user.spec?.enabled !== false && (user.spec?.roles ?? []).includes(adminRole);
}

interface Intents {
  resourceVersion: string | undefined;
  data: Record<string, string>;
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
    const outcome = await retryOnConflict(
      WHAT,
      async (): Promise<'registered' | 'no admin taken' | 'last admin'> => {
        const intents = await this.readIntents();
        const now = Date.now();
        const pending = new Set(
          Object.entries(intents.data)
            .filter(([, until]) => Number(until) > now)
            .map(([name]) => name),
        );
        const live = await this.users.list();
        const self = live.find((u) => u.spec?.username === username);
        if (!self || !isEnabledAdmin(self, this.adminRole)) return 'no admin taken';
        const staying = live.filter(
          (u) => isEnabledAdmin(u, this.adminRole) && u.spec.username !== username && !pending.has(u.spec.username),
        );
        if (staying.length === 0) return 'last admin';
        const data = {
          ...Object.fromEntries([...pending].map((name) => [name, intents.data[name]])),
          [username]: String(now + INTENT_TTL_MS),
        };
        await this.writeIntents(intents.resourceVersion, data);
        return 'registered';
      },
      { attempts: MAX_ATTEMPTS, retryOn: isAlreadyExists },
    );
    if (outcome === 'last admin') throw new ConflictError(`cannot ${action} the last enabled admin`);
    if (outcome === 'no admin taken') return write();
    try {
      return await write();
    } finally {
      await this.dropIntent(username);
    }
  }

  private async readIntents(): Promise<Intents> {
    try {
      const cm = await this.host.core.readNamespacedConfigMap({
        name: ADMIN_REMOVALS_CONFIGMAP,
        namespace: this.host.namespace,
      });
      return { resourceVersion: cm.metadata?.resourceVersion, data: cm.data ?? {} };
    } catch (err) {
      if (isNotFound(err)) return { resourceVersion: undefined, data: {} };
      throw err;
    }
  }

  /**
   * Writes the intents if the ConfigMap is still at resourceVersion (absent: creates it). A lost
   * race is a ConflictError (Conflict, or AlreadyExists for the create): retryOnConflict runs again.
   */
  private async writeIntents(resourceVersion: string | undefined, data: Record<string, string>): Promise<void> {
    const body: k8s.V1ConfigMap = {
      metadata: {
        name: ADMIN_REMOVALS_CONFIGMAP,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      data,
    };
    const { core, namespace } = this.host;
    if (resourceVersion) await core.replaceNamespacedConfigMap({ name: ADMIN_REMOVALS_CONFIGMAP, namespace, body });
    else await core.createNamespacedConfigMap({ namespace, body });
  }

  /** Drops one intent (best effort: a leftover only expires later). */
  private async dropIntent(username: string): Promise<void> {
    await retryOnConflict(
      WHAT,
      async () => {
        const intents = await this.readIntents();
        if (!(username in intents.data)) return;
        const rest = { ...intents.data };
        delete rest[username];
        await this.writeIntents(intents.resourceVersion, rest);
      },
      { attempts: MAX_ATTEMPTS, retryOn: isAlreadyExists },
    ).catch(() => undefined);
  }
}
