// Deletes the users of identity providers that hold no role. Anyone with an account at a provider
// can sign in; one who holds no role is refused (403, Kite's `insufficient_permissions`) but, as in
// Kite, their user is created, so an administrator sees who asked and can give them a role. Such a
// user is kept for `ttlMs` after their last sign-in, then deleted, so accounts at the provider
// cannot pile User objects up in the host cluster. Kept for good: a user holding a role (directly,
// or through a group now), a disabled user (an administrator's decision, which the next sign-in
// must meet again), and a user declared with kubectl that never signed in (no verified-at).
// No polling (host/due-sweeper.ts): one timer for the earliest user due, re-planned on every change
// of users or roles. Every replica runs it; the check and the delete are one compare-and-swap, so a
// role given meanwhile keeps the user, and a user another replica deleted first is skipped.
import { DueSweeper } from '../host/due-sweeper.js';
import { managedByOf } from '../host/gitops.js';
import type { RoleStore } from '../host/roles.js';
import { isPasswordUser, providerVerifiedAt, userProvider, type UserStore } from '../host/users.js';
import type { UserResource } from '../host/resources.js';
import type { Logger } from '../log.js';

export class RolelessUserSweeper extends DueSweeper<UserResource> {
  constructor(
    private readonly users: UserStore,
    roles: RoleStore,
    /** The user holds a role that exists, directly or through a group (AuthService.holdsAnyRole). */
    private readonly holdsAnyRole: (user: UserResource) => boolean,
    private readonly ttlMs: number,
    log: Logger,
  ) {
    super(log, 'deleting role-less users', [users.cache, roles.cache]);
  }

  protected candidates(): readonly UserResource[] {
    return this.users.list();
  }

  protected dueAt(user: UserResource): number | undefined {
    if (isPasswordUser(user) || user.spec?.enabled === false || (user.spec?.roles ?? []).length > 0) return undefined;
    if (managedByOf(user)) return undefined; // a user from Git is Git's to remove
    const verifiedAt = providerVerifiedAt(user);
    if (Number.isNaN(verifiedAt) || this.holdsAnyRole(user)) return undefined;
    return verifiedAt + this.ttlMs;
  }

  protected async remove(user: UserResource): Promise<void> {
    const deleted = await this.users.deleteRoleless(user, (live) => {
      const liveDue = this.dueAt(live);
      return liveDue !== undefined && liveDue <= Date.now();
    });
    if (deleted)
      this.log.info(
        { user: user.spec.username, provider: userProvider(user) },
        'deleted a user of an identity provider that held no role',
      );
  }
}
