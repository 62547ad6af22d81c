// The super-user bootstrap lock: a ConfigMap with a fixed name whose atomic creation makes exactly
// one concurrent create_super_user call the winner (the others collide with it and get 403). The lock is
// kept for good once a super user was created: the public set-up routes (create_super_user and the
// anonymous cluster import) stay closed even if every user is later deleted by hand, so no path
// re-opens a public route. To start set-up over, a host-cluster admin deletes the ConfigMap
// (docs/auth.md, "First-run set-up").
import { ConfigMapLock } from './configmap-lock.js';
import type { HostStore } from './store.js';

export const SUPERUSER_LOCK = 'kiteline-bootstrap-superuser';

export interface BootstrapClaim {
  /** Gives the lock up after a failed bootstrap. */
  release(): Promise<void>;
}

/** True once a super user was ever created here (the lock exists): set-up is over for good. */
export async function bootstrapClaimed(host: HostStore): Promise<boolean> {
  return (await new ConfigMapLock(host, SUPERUSER_LOCK).createdAt()) !== undefined;
}

/** Creates the lock; undefined when another caller holds it. */
export async function claimSuperUserBootstrap(host: HostStore): Promise<BootstrapClaim | undefined> {
  const lock = new ConfigMapLock(host, SUPERUSER_LOCK);
  if (!(await lock.acquire({ claimedAt: new Date().toISOString() }))) return undefined;
  return { release: () => lock.release().catch(() => undefined) };
}
