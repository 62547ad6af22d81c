// Users in the host cluster: User custom resources (object name objectNameFor('user', username),
// so an atomic create decides username uniqueness) and their password Secrets (key passwordHash).
// Reads come from the watch-backed cache through an index; writes go to the API server and wait
// until this replica's cache shows them. Every write that takes admin away from a user goes
// through the LastAdminGuard (last-admin.ts): there is always an enabled admin, on any number of
// replicas.
import { hashPassword } from '../auth/passwords.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { CacheIndex } from './cache-index.js';
import { hasVersion, isGone } from './cache-sync.js';
import { CustomResources } from './crud.js';
import { ensureId } from './id-assign.js';
import { LastAdminGuard } from './last-admin.js';
import type { IdAllocator } from './ids.js';
import { apiStatus } from './host-errors.js';
import { objectNameFor } from './names.js';
import { deleteOwnedSecret, secretValue, upsertSecret } from './owned-secrets.js';
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, resourceId, type UserResource } from './resources.js';
import type { HostStore } from './store.js';

export const PASSWORD_HASH_KEY = 'passwordHash';
export const PLAIN_PASSWORD_KEY = 'password';
/** Bumped when a user is disabled: part of every session's stamp, so all sessions end. */
export const SESSION_EPOCH_ANNOTATION = 'kiteline.io/session-epoch';

export interface NewUser {
  username: string;
  password: string;
  name?: string;
  roles?: string[];
}

export class UserStore {
  readonly index: CacheIndex<UserResource>;
  readonly crs: CustomResources<UserResource>;
  private readonly lastAdmin: LastAdminGuard;

  constructor(
    private readonly host: HostStore,
    private readonly ids: IdAllocator,
    /** The role whose last enabled holder cannot be disabled, deleted or demoted. */
    private readonly adminRole: string,
  ) {
    this.index = new CacheIndex(host.users, (u) => u.spec?.username);
    this.crs = new CustomResources<UserResource>(host.customObjects, host.namespace, 'users', 'User');
    this.lastAdmin = new LastAdminGuard(host, this.crs, adminRole);
  }

  byId(id: number): UserResource | undefined {
    return this.index.byId(id);
  }

  /** The user holding username (the oldest, should two CRs claim it), id or not. */
  byUsername(username: string): UserResource | undefined {
    return this.index.byKey(username);
  }

  /** Users with an id: the ones the API shows. */
  list(): readonly UserResource[] {
    return this.index.all();
  }

  /** Any User CR exists (with or without an id yet). */
  any(): boolean {
    return this.host.users.list().length > 0;
  }

  passwordHash(user: UserResource): string | undefined {
    return secretValue(this.passwordSecret(user), PASSWORD_HASH_KEY);
  }

  /** A plain password put in the Secret by hand, before it is hashed away. */
  plainPassword(user: UserResource): string | undefined {
    return secretValue(this.passwordSecret(user), PLAIN_PASSWORD_KEY);
  }

  sessionEpoch(user: UserResource): string {
    return user.metadata.annotations?.[SESSION_EPOCH_ANNOTATION] ?? '0';
  }

  private passwordSecret(user: UserResource) {
    const ref = user.spec?.passwordSecretRef?.name;
    return ref ? this.host.secrets.get(ref, this.host.namespace) : undefined;
  }

  /** Creates a password user; 409 AlreadyExists when the username is taken (also under races). */
  async create(input: NewUser): Promise<UserResource> {
    if (this.byUsername(input.username)) throw alreadyExists(input.username);
    const hash = await hashPassword(input.password);
    const id = await this.ids.next('users', this.index.maxId());
    const name = objectNameFor('user', input.username);
    let created: UserResource;
    try {
      created = await this.crs.create({
        metadata: { name, labels: { [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY } },
        spec: {
          username: input.username,
          ...(input.name ? { name: input.name } : {}),
          provider: 'password',
          enabled: true,
          roles: input.roles ?? [],
          passwordSecretRef: { name: `${name}-password` },
        },
      });
    } catch (err) {
      if (apiStatus(err) === 409) throw alreadyExists(input.username);
      throw err;
    }
    try {
      const secret = await upsertSecret(this.host.core, this.host.namespace, `${name}-password`, { [PASSWORD_HASH_KEY]: hash }, {
        owner: created,
        drop: [PLAIN_PASSWORD_KEY],
      });
      await this.host.secrets.waitFor(secret.metadata!.name!, hasVersion(secret));
    } catch (err) {
      await this.crs.delete(name, created.metadata.uid).catch(() => undefined);
      throw err;
    }
    await this.host.users.waitFor(name, hasVersion(created));
    return created;
  }

  async update(user: UserResource, changes: { name?: string; avatarURL?: string; sidebarPreference?: string }): Promise<UserResource> {
    return this.patch(user, { spec: changes });
  }

  /** Enables or disables; disabling the last enabled admin is a 409. */
  async setEnabled(user: UserResource, enabled: boolean): Promise<UserResource> {
    if (enabled) return this.patch(user, { spec: { enabled } });
    return this.lastAdmin.removeAdmin(user, 'disable', () => this.patch(user, { metadata: { annotations: this.nextEpoch(user) }, spec: { enabled } }));
  }

  /** Ends every session of the user (bumps the session epoch). */
  async endSessions(user: UserResource): Promise<UserResource> {
    return this.patch(user, { metadata: { annotations: this.nextEpoch(user) } });
  }

  private nextEpoch(user: UserResource): Record<string, string> {
    return { [SESSION_EPOCH_ANNOTATION]: String((Number(this.sessionEpoch(user)) || 0) + 1) };
  }

  /** Sets a new password hash (ending the user's sessions: their stamp includes the hash). */
  async setPassword(user: UserResource, password: string): Promise<UserResource> {
    const hash = await hashPassword(password);
    const secretName = user.spec.passwordSecretRef?.name ?? `${user.metadata.name}-password`;
    const existing = this.host.secrets.get(secretName, this.host.namespace);
    const secret = await upsertSecret(this.host.core, this.host.namespace, secretName, { [PASSWORD_HASH_KEY]: hash }, {
      ...(existing ? {} : { owner: { ...user, kind: 'User', apiVersion: 'kiteline.io/v1alpha1' } }),
      drop: [PLAIN_PASSWORD_KEY],
    });
    await this.host.secrets.waitFor(secretName, hasVersion(secret));
    if (!user.spec.passwordSecretRef) return this.patch(user, { spec: { passwordSecretRef: { name: secretName } } });
    return user;
  }

  /**
   * Changes spec.roles with a compare-and-swap on the live object, retried on conflict; taking
   * the admin role from the last enabled admin is a 409.
   */
  async updateRoles(user: UserResource, change: (roles: string[]) => string[]): Promise<UserResource> {
    const roles = user.spec.roles ?? [];
    if (roles.includes(this.adminRole) && !change([...roles]).includes(this.adminRole)) {
      return this.lastAdmin.removeAdmin(user, 'remove the admin role from', () => this.swapRoles(user, change));
    }
    return this.swapRoles(user, change);
  }

  private async swapRoles(user: UserResource, change: (roles: string[]) => string[]): Promise<UserResource> {
    for (let attempt = 0; ; attempt++) {
      let live: UserResource;
      try {
        live = await this.crs.read(user.metadata.name);
      } catch (err) {
        if (apiStatus(err) === 404) throw new NotFoundError(`user not found: ${user.spec.username}`);
        throw err;
      }
      const before = live.spec.roles ?? [];
      const after = change([...before]);
      if (after.length === before.length && after.every((r, i) => r === before[i])) return live;
      try {
        const written = await this.crs.patch(live.metadata.name, {
          metadata: { resourceVersion: live.metadata.resourceVersion },
          spec: { roles: after },
        });
        await this.host.users.waitFor(written.metadata.name, hasVersion(written));
        return written;
      } catch (err) {
        if (apiStatus(err) !== 409 || attempt >= 10) throw err;
      }
    }
  }

  /** Deletes the user and its password Secret; deleting the last enabled admin is a 409. */
  async delete(user: UserResource): Promise<void> {
    await this.lastAdmin.removeAdmin(user, 'delete', () => this.deleteNow(user));
  }

  private async deleteNow(user: UserResource): Promise<void> {
    const secret = this.passwordSecret(user);
    try {
      await this.crs.delete(user.metadata.name, user.metadata.uid);
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError(`user not found: ${user.spec.username}`);
      if (apiStatus(err) === 409) throw new ConflictError('the user changed meanwhile; try again');
      throw err;
    }
    await deleteOwnedSecret(this.host.core, this.host.namespace, secret);
    await this.host.users.waitFor(user.metadata.name, isGone(user.metadata.uid));
  }

  /** Writes status.lastLoginAt (callers throttle). */
  async recordLogin(user: UserResource, at: Date): Promise<void> {
    await this.crs.patchStatus(user.metadata.name, { lastLoginAt: at.toISOString().replace(/\.\d{3}Z$/, 'Z') });
  }

  /** The user's id, assigning one first when a kubectl-applied user has none yet. */
  async ensureId(user: UserResource): Promise<number | undefined> {
    return resourceId(user) ?? ensureId(this.crs, this.ids, 'users', user, this.index.maxId());
  }

  private async patch(user: UserResource, patch: object): Promise<UserResource> {
    let written: UserResource;
    try {
      written = await this.crs.patch(user.metadata.name, patch);
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError(`user not found: ${user.spec.username}`);
      throw err;
    }
    await this.host.users.waitFor(written.metadata.name, hasVersion(written));
    return written;
  }
}

function alreadyExists(username: string): ConflictError {
  return new ConflictError(`user already exists: ${username}`, 'AlreadyExists');
}
