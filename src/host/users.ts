// The user store: User custom resources (object name objectNameFor('user', username), so the
// atomic create decides username uniqueness) and their password Secrets (key passwordHash), with
// every rule about users as one operation:
//   - the first super user (create_super_user): only while no user was ever created, decided by
//     the bootstrap lock's atomic create (bootstrap.ts);
//   - nobody deletes or disables themselves;
//   - there is always an enabled admin: every write that takes admin away from a user (disable,
//     delete, unassign the admin role) goes through the LastAdminGuard (last-admin.ts), on any
//     number of replicas;
//   - disabling and "log out everywhere" bump the session epoch (a compare-and-swap on the live
//     user), which ends every session; a new password hash ends them too.
// Reads come from the watch-backed cache (KindStore); every write returns once this replica's
// cache shows it.
import { createHash } from 'node:crypto';
import { hashPassword } from '../credentials/passwords.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError } from '../errors.js';
import { claimSuperUserBootstrap } from './bootstrap.js';
import { managedByOf, refuseGitOpsManaged } from './gitops.js';
import { groupSubjectsOf } from './group-subjects.js';
import type { IdAllocator } from './ids.js';
import { ignoreGone, KindStore, sameList } from './kind-store.js';
import { LastAdminGuard } from './last-admin.js';
import { objectNameFor } from './names.js';
import { secretValue } from './owned-secrets.js';
import { resourceId, type UserResource } from './resources.js';
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

/** Who an identity provider (OIDC, LDAP) says signed in. */
export interface ExternalIdentity {
  /** "ldap" or the OAuthProvider's name: the user's `provider`. */
  provider: string;
  /** The identity at the provider, which the user cannot change (OIDC "<issuer> <sub>", LDAP entryUUID or DN). */
  subject: string;
  /**
   * Older forms of the subject that name this identity too (the LDAP DN, which releases before
   * entryUUID recorded): a user recorded under one is bound to it and gets `subject` instead.
   */
  formerSubjects?: string[];
  username: string;
  name?: string;
  avatarURL?: string;
  groups: string[];
}

/**
 * A user of an identity provider carries it in metadata, which every version of the User schema
 * keeps (a replica of an older release, whose CRD knows no such fields, would otherwise prune
 * them while it runs): the label names the provider ("ldap" or an OAuthProvider), the annotations
 * hold the subject at the provider (fixed at the first sign-in), the groups it gave at the last
 * sign-in (a JSON array) and when that was.
 */
export const PROVIDER_LABEL = 'kiteline.io/provider';
export const SUBJECT_ANNOTATION = 'kiteline.io/subject';
export const GROUPS_ANNOTATION = 'kiteline.io/groups';
export const VERIFIED_AT_ANNOTATION = 'kiteline.io/verified-at';
/** The verified-at of a user the provider no longer knows. */
const NEVER_VERIFIED = '1970-01-01T00:00:00Z';

/** "password", "ldap", or the OAuthProvider the user signs in with. */
export function userProvider(user: UserResource): string {
  return user.metadata.labels?.[PROVIDER_LABEL] || 'password';
}

export function isPasswordUser(user: UserResource): boolean {
  return userProvider(user) === 'password';
}

export function userSubject(user: UserResource): string | undefined {
  return user.metadata.annotations?.[SUBJECT_ANNOTATION] || undefined;
}

/** A JSON array of strings in an annotation; anything else is none. */
export function groupsIn(annotations: Record<string, string> | undefined): string[] {
  const raw = annotations?.[GROUPS_ANNOTATION];
  if (!raw) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? parsed.filter((g): g is string => typeof g === 'string') : [];
  } catch {
    return [];
  }
}

/** The provider's groups of the user as of their last sign-in (none for a password user). */
export function userGroups(user: UserResource): string[] {
  return isPasswordUser(user) ? [] : groupsIn(user.metadata.annotations);
}

/**
 * The group subjects the user holds (group-subjects.ts): its provider's groups scoped by the
 * provider, and the bare names too when that provider is the only source configured (`soleSource`).
 */
export function userGroupSubjects(user: UserResource, soleSource: string | undefined): string[] {
  return isPasswordUser(user) ? [] : groupSubjectsOf(userProvider(user), userGroups(user), soleSource);
}

/** The identity is the one the user was bound to (its subject, or a former form of it). */
export function identityHasSubject(identity: ExternalIdentity, subject: string | undefined): boolean {
  return subject !== undefined && (subject === identity.subject || (identity.formerSubjects ?? []).includes(subject));
}

/** When the provider last vouched for the user (ms since the epoch; NaN: never). */
export function providerVerifiedAt(user: UserResource): number {
  const raw = user.metadata.annotations?.[VERIFIED_AT_ANNOTATION];
  return raw ? Date.parse(raw) : NaN;
}

export interface UserChanges {
  name?: string;
  avatarURL?: string;
  sidebarPreference?: string;
}

export class UserStore extends KindStore<UserResource> {
  private readonly lastAdmin: LastAdminGuard;

  constructor(
    host: HostStore,
    ids: IdAllocator,
    /** The role whose last enabled holder cannot be disabled, deleted or demoted. */
    readonly adminRole: string,
  ) {
    super(host, ids, {
      plural: 'users',
      kind: 'User',
      noun: 'user',
      keyOf: (u) => u.spec?.username,
      cache: (h) => h.users,
    });
    this.lastAdmin = new LastAdminGuard(host, this.crs, adminRole);
  }

  /** The user holding username (the oldest, should two CRs claim it), id or not. */
  byUsername(username: string): UserResource | undefined {
    return this.byKey(username);
  }

  /** Any User CR exists (with or without an id yet). */
  any(): boolean {
    return this.cache.list().length > 0;
  }

  passwordHash(user: UserResource): string | undefined {
    return secretValue(this.passwordSecret(user), PASSWORD_HASH_KEY);
  }

  /** A plain password put in the Secret by hand, before it is hashed away. */
  plainPassword(user: UserResource): string | undefined {
    return secretValue(this.passwordSecret(user), PLAIN_PASSWORD_KEY);
  }

  /**
   * What a password user's sessions are bound to: the hash, or for a password Secret from Git that
   * keeps the password plain (passwordFromGit), a digest of it, so a new password in Git ends them.
   */
  passwordCredential(user: UserResource): string | undefined {
    const hash = this.passwordHash(user);
    if (hash !== undefined) return hash;
    const plain = this.plainPassword(user);
    return plain === undefined ? undefined : `plain\n${createHash('sha256').update(plain).digest('base64')}`;
  }

  /** The password Secret is a GitOps engine's (gitops.ts): kiteline never rewrites it. */
  passwordFromGit(user: UserResource): boolean {
    const secret = this.passwordSecret(user);
    return secret !== undefined && managedByOf(secret) !== undefined;
  }

  sessionEpoch(user: UserResource): string {
    return user.metadata.annotations?.[SESSION_EPOCH_ANNOTATION] ?? '0';
  }

  private passwordSecretName(user: UserResource): string {
    return user.spec?.passwordSecretRef?.name ?? `${user.metadata.name}-password`;
  }

  private passwordSecret(user: UserResource) {
    const ref = user.spec?.passwordSecretRef?.name;
    return ref ? this.host.secrets.get(ref, this.host.namespace) : undefined;
  }

  /** Creates a password user; 409 AlreadyExists when the username is taken (also under races). */
  async create(input: NewUser): Promise<UserResource> {
    if (this.byUsername(input.username)) throw this.alreadyExists(input.username);
    const hash = await hashPassword(input.password);
    const name = objectNameFor('user', input.username);
    const secretName = `${name}-password`;
    return this.createWithId(
      input.username,
      () => ({
        metadata: { name },
        spec: {
          username: input.username,
          ...(input.name ? { name: input.name } : {}),
          provider: 'password',
          enabled: true,
          roles: input.roles ?? [],
          passwordSecretRef: { name: secretName },
        },
      }),
      { name: secretName, values: { [PASSWORD_HASH_KEY]: hash }, drop: [PLAIN_PASSWORD_KEY] },
    );
  }

  /**
   * The first user, with the admin role: only while no user exists and the bootstrap lock was
   * never taken (its atomic create decides between concurrent calls); 403 afterwards, for good.
   * A failed create gives the lock back.
   */
  async createSuperUser(input: Omit<NewUser, 'roles'>): Promise<UserResource> {
    const closed = () => new ForbiddenError('super user already exists');
    if (this.any()) throw closed();
    const claim = await claimSuperUserBootstrap(this.host);
    if (!claim) throw closed();
    try {
      return await this.create({ ...input, roles: [this.adminRole] });
    } catch (err) {
      await claim.release();
      throw err;
    }
  }

  /** Changes the name, avatar URL or sidebar preference (nothing given: nothing written). */
  async update(user: UserResource, changes: UserChanges): Promise<UserResource> {
    if (Object.keys(changes).length === 0) return user;
    // The sidebar layout is the user's own preference, not Git's.
    if (changes.name !== undefined || changes.avatarURL !== undefined) this.refuseManaged(user, 'changed');
    return this.patch(user, { spec: changes });
  }

  /**
   * Enables or disables (disabling ends every session). Disabling yourself (`actorId`, the
   * caller's user id) or the last enabled admin is a 409; no change is no write.
   */
  async setEnabled(user: UserResource, enabled: boolean, actorId?: number): Promise<UserResource> {
    if (!enabled) this.refuseSelf(user, actorId, 'disable');
    if ((user.spec.enabled !== false) === enabled) return user;
    this.refuseManaged(user, 'changed');
    if (enabled)
      return this.swap(user, (live) => (live.spec.enabled === false ? { spec: { enabled: true } } : undefined));
    return this.lastAdmin.removeAdmin(user, 'disable', () =>
      this.swap(user, (live) =>
        live.spec.enabled === false
          ? undefined
          : { metadata: { annotations: this.nextEpoch(live) }, spec: { enabled: false } },
      ),
    );
  }

  /** Ends every session of the user with this id ("log out everywhere"); no such user: nothing. */
  async endSessions(id: number): Promise<void> {
    const user = this.byId(id);
    if (user) await this.swap(user, (live) => ({ metadata: { annotations: this.nextEpoch(live) } }));
  }

  private nextEpoch(user: UserResource): Record<string, string> {
    return { [SESSION_EPOCH_ANNOTATION]: String((Number(this.sessionEpoch(user)) || 0) + 1) };
  }

  /** Sets a new password hash (ending the user's sessions: their stamp includes the hash). */
  async setPassword(user: UserResource, password: string): Promise<UserResource> {
    const secret = this.passwordSecret(user);
    // A password kept in Git: the engine would put Git's back on its next sync. A user from Git
    // without a password Secret would need its spec changed: that is Git's too.
    if (secret) refuseGitOpsManaged(secret, `the password of user "${user.spec.username}"`, 'changed');
    if (!user.spec.passwordSecretRef) this.refuseManaged(user, 'changed');
    const hash = await hashPassword(password);
    const secretName = this.passwordSecretName(user);
    await this.writeSecret(user, {
      name: secretName,
      values: { [PASSWORD_HASH_KEY]: hash },
      drop: [PLAIN_PASSWORD_KEY],
    });
    if (!user.spec.passwordSecretRef) return this.patch(user, { spec: { passwordSecretRef: { name: secretName } } });
    return user;
  }

  /**
   * Changes spec.roles with a compare-and-swap on the live object; taking the admin role from the
   * last enabled admin is a 409.
   */
  async updateRoles(user: UserResource, change: (roles: string[]) => string[]): Promise<UserResource> {
    const write = () =>
      this.swap(user, (live) => {
        const before = live.spec.roles ?? [];
        const after = change([...before]);
        return sameList(before, after) ? undefined : { spec: { roles: after } };
      });
    const roles = user.spec.roles ?? [];
    if (!sameList(roles, change([...roles]))) this.refuseManaged(user, 'changed');
    if (roles.includes(this.adminRole) && !change([...roles]).includes(this.adminRole)) {
      return this.lastAdmin.removeAdmin(user, 'remove the admin role from', write);
    }
    return write();
  }

  /** The user by username, or 404 "user not found: <username>". */
  private byUsernameOrThrow(username: string): UserResource {
    const user = this.byUsername(username);
    if (!user) throw this.notFound(username);
    return user;
  }

  /** Gives the user the role; `added` is false when the user already held it. */
  async assignRole(username: string, role: string): Promise<{ user: UserResource; added: boolean }> {
    const user = this.byUsernameOrThrow(username);
    let added = false;
    const written = await this.updateRoles(user, (roles) => {
      added = !roles.includes(role);
      return added ? [...roles, role] : roles;
    });
    return { user: written, added };
  }

  /** Takes the role from the user (admin from the last enabled admin: 409). */
  async unassignRole(username: string, role: string): Promise<UserResource> {
    return this.updateRoles(this.byUsernameOrThrow(username), (roles) => roles.filter((r) => r !== role));
  }

  /** Takes a deleted role from every user holding it, so a later role of that name grants nothing. */
  async dropRole(role: string): Promise<void> {
    for (const user of this.list()) {
      // A user from Git keeps what Git says (the role's name then grants what a later role of that
      // name grants, as Git declares it).
      if (!(user.spec.roles ?? []).includes(role) || managedByOf(user)) continue;
      await this.updateRoles(user, (roles) => roles.filter((r) => r !== role)).catch(ignoreGone);
    }
  }

  /** Deletes the user and its password Secret; yourself or the last enabled admin: 409. */
  async delete(user: UserResource, actorId?: number): Promise<void> {
    this.refuseSelf(user, actorId, 'delete');
    this.refuseManaged(user, 'deleted');
    await this.lastAdmin.removeAdmin(user, 'delete', () => this.remove(user, user.spec?.passwordSecretRef?.name));
  }

  /** 409 for a user applied from Git (gitops.ts): it is changed there. */
  private refuseManaged(user: UserResource, verb: 'changed' | 'deleted'): void {
    refuseGitOpsManaged(user, `user "${user.spec.username}"`, verb);
  }

  private refuseSelf(user: UserResource, actorId: number | undefined, action: string): void {
    if (actorId !== undefined && resourceId(user) === actorId) throw new ConflictError(`you cannot ${action} yourself`);
  }

  /**
   * The user of the provider bound to the identity's subject (its stable id there), else the user
   * holding the identity's username (which may be another account's: signInExternal refuses it).
   */
  findExternal(identity: ExternalIdentity): UserResource | undefined {
    const bound = this.list().find(
      (u) => userProvider(u) === identity.provider && identityHasSubject(identity, userSubject(u)),
    );
    return bound ?? this.byUsername(identity.username);
  }

  /**
   * The user an identity provider signed in: the user bound to its subject at the provider (whatever
   * username the provider shows now: a username claim may be the user's own choice), else one
   * created on the first sign-in (no roles, no password), updated with the groups, name and avatar
   * the provider sent now (and the time it vouched). A username held by a password user, another
   * provider's user, or a user of this provider bound to another subject or to none (one declared
   * with kubectl without `kiteline.io/subject`) is not taken over: 401.
   */
  async signInExternal(identity: ExternalIdentity): Promise<UserResource> {
    const metadata = {
      labels: { [PROVIDER_LABEL]: identity.provider },
      annotations: {
        [SUBJECT_ANNOTATION]: identity.subject,
        [GROUPS_ANNOTATION]: JSON.stringify([...new Set(identity.groups)].sort()),
        [VERIFIED_AT_ANNOTATION]: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      },
    };
    const profile = {
      ...(identity.name !== undefined ? { name: identity.name } : {}),
      ...(identity.avatarURL !== undefined ? { avatarURL: identity.avatarURL } : {}),
    };
    const existing = this.findExternal(identity);
    if (!existing) {
      const name = objectNameFor('user', identity.username);
      try {
        return await this.createWithId(identity.username, () => ({
          metadata: { name, ...metadata },
          spec: { username: identity.username, ...profile, enabled: true, roles: [] },
        }));
      } catch (err) {
        // Two first sign-ins at once: the other one created the user; update it below.
        if (!(err instanceof ConflictError)) throw err;
        const winner = this.findExternal(identity);
        if (!winner) throw err;
        return this.updateExternal(winner, identity, metadata, profile);
      }
    }
    return this.updateExternal(existing, identity, metadata, profile);
  }

  private async updateExternal(
    user: UserResource,
    identity: ExternalIdentity,
    metadata: { labels: Record<string, string>; annotations: Record<string, string> },
    profile: UserChanges,
  ): Promise<UserResource> {
    const refuse = () => new UnauthorizedError('this username belongs to another account');
    // A user declared with kubectl without a subject is bound to no one: a username claim is no
    // proof (the account's owner may choose it at the provider); its administrator sets the subject.
    const bound = (live: UserResource) =>
      Boolean(live.metadata.labels?.[PROVIDER_LABEL]) && // not a password user
      userProvider(live) === identity.provider &&
      identityHasSubject(identity, userSubject(live));
    if (!bound(user)) throw refuse();
    return this.swap(user, (live) => {
      if (!bound(live)) throw refuse();
      return { metadata, spec: profile };
    });
  }

  /**
   * The provider says the user is gone: their API keys stop (the provider's word is made older than
   * any session) and every session ends (the epoch). No change when that was done already.
   */
  async revokeExternal(user: UserResource): Promise<UserResource> {
    return this.swap(user, (live) =>
      providerVerifiedAt(live) === 0
        ? undefined
        : { metadata: { annotations: { [VERIFIED_AT_ANNOTATION]: NEVER_VERIFIED, ...this.nextEpoch(live) } } },
    );
  }

  /**
   * The provider still knows the user, with these groups: records them (and the time) when the
   * groups changed or the last word is older than `staleAfterMs`; no write otherwise.
   */
  async confirmExternal(user: UserResource, groups: string[], staleAfterMs: number): Promise<UserResource> {
    const sorted = JSON.stringify([...new Set(groups)].sort());
    return this.swap(user, (live) => {
      if (providerVerifiedAt(live) === 0) return undefined; // revoked: only a sign-in brings it back
      const same = (live.metadata.annotations?.[GROUPS_ANNOTATION] ?? '[]') === sorted;
      if (same && Date.now() - providerVerifiedAt(live) < staleAfterMs) return undefined;
      return {
        metadata: {
          annotations: {
            [GROUPS_ANNOTATION]: sorted,
            [VERIFIED_AT_ANNOTATION]: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
          },
        },
      };
    });
  }

  /**
   * Deletes a provider's user that holds no role, when `stillRoleless` says so of the live object
   * (checked and deleted as one compare-and-swap: a role given meanwhile keeps the user). false: it
   * was kept (or was gone already).
   */
  async deleteRoleless(user: UserResource, stillRoleless: (live: UserResource) => boolean): Promise<boolean> {
    const kept = new Error('kept');
    try {
      await this.remove(user, user.spec?.passwordSecretRef?.name, (live) => {
        // A user from Git is Git's to remove (its engine would create it again).
        if (isPasswordUser(live) || managedByOf(live) || !stillRoleless(live)) throw kept;
      });
      return true;
    } catch (err) {
      if (err === kept || err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Writes status.lastLoginAt (callers throttle). */
  async recordLogin(user: UserResource, at: Date): Promise<void> {
    await this.crs.patchStatus(user.metadata.name, { lastLoginAt: at.toISOString().replace(/\.\d{3}Z$/, 'Z') });
  }
}
