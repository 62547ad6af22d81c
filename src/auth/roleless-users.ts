// Deletes the users of identity providers that hold no role. Anyone with an account at a provider
// can sign in; one who holds no role is refused (403, Kite's `insufficient_permissions`) but, as in
// Kite, their user is created, so an administrator sees who asked and can give them a role. Such a
// user is kept for `ttlMs` after their last sign-in, then deleted, so accounts at the provider
// cannot pile User objects up in the host cluster. Kept for good: a user holding a role (directly,
// or through a group now), a disabled user (an administrator's decision, which the next sign-in
// must meet again), and a user declared with kubectl that never signed in (no verified-at).
// No polling: one timer for the earliest user due, re-planned on every change of users or roles.
// Every replica runs it; the check and the delete are one compare-and-swap, so a role given
// meanwhile keeps the user, and a user another replica deleted first is skipped.
import { describeApiError } from '../host/host-errors.js';
import type { RoleStore } from '../host/roles.js';
import { SerialTask } from '../host/serial-task.js';
import { isPasswordUser, providerVerifiedAt, userProvider, type UserStore } from '../host/users.js';
import type { UserResource } from '../host/resources.js';
import type { Logger } from '../log.js';

/** setTimeout's largest delay; a later due time is re-planned when that timer fires. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class RolelessUserSweeper {
  private readonly task: SerialTask;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly users: UserStore,
    private readonly roles: RoleStore,
    /** The user holds a role that exists, directly or through a group (AuthService.holdsAnyRole). */
    private readonly holdsAnyRole: (user: UserResource) => boolean,
    private readonly ttlMs: number,
    private readonly log: Logger,
  ) {
    this.task = new SerialTask(
      () => this.sweep(),
      (err) => this.log.warn({ err: describeApiError(err) }, 'deleting role-less users failed; will retry'),
    );
  }

  start(): void {
    for (const cache of [this.users.cache, this.roles.cache])
      for (const event of ['add', 'update', 'delete'] as const) cache.on(event, () => this.task.request());
    this.task.request();
  }

  stop(): void {
    this.task.stop();
    clearTimeout(this.timer);
  }

  /** When the user is due for deletion (ms since the epoch); undefined: never. */
  private dueAt(user: UserResource): number | undefined {
    if (isPasswordUser(user) || user.spec?.enabled === false || (user.spec?.roles ?? []).length > 0) return undefined;
    const verifiedAt = providerVerifiedAt(user);
    if (Number.isNaN(verifiedAt) || this.holdsAnyRole(user)) return undefined;
    return verifiedAt + this.ttlMs;
  }

  private async sweep(): Promise<void> {
    const now = Date.now();
    let next = Infinity;
    for (const user of this.users.list()) {
      const due = this.dueAt(user);
      if (due === undefined) continue;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
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
    clearTimeout(this.timer);
    if (next === Infinity) return;
    this.timer = setTimeout(() => this.task.request(), Math.min(next - now + 50, MAX_DELAY_MS));
    this.timer.unref();
  }
}
