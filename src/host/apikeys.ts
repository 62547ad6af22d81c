// The API key store: APIKey custom resources named objectNameFor('apikey', name) (so the atomic
// create decides name uniqueness) with the SHA-256 of the key's secret in an owned Secret (key
// keyHash). Deleting the APIKey revokes the key at once: the gateway only trusts keys in its cache.
// The kind's rules live here: a key's name, roles (existing ones) and expiry (in the future) are
// checked on create; a kubeconfig token is a key owned by its user, with the caller's roles, minted
// only for a signed-in user, at most a configured number live per user; a deleted role is taken
// from every key.
// Reads come from the watch-backed cache (KindStore); every write returns once this replica's
// cache shows it.
import { randomBytes } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { formatApiKey, generateApiKeySecret, storedKeyDigest } from '../credentials/apikey-token.js';
import { BadRequestError, ForbiddenError, NotFoundError, ServiceUnavailableError } from '../errors.js';
import type { IdAllocator } from './ids.js';
import { ownerReference } from './crud.js';
import { ignoreGone, KindStore } from './kind-store.js';
import { objectNameFor } from './names.js';
import { secretValue } from './owned-secrets.js';
import { resourceId, type APIKeyResource, type TokenAudience, type UserResource } from './resources.js';
import type { HostStore } from './store.js';
import type { UserStore } from './users.js';

export const KEY_HASH_KEY = 'keyHash';

const KEY_NAME = /^[A-Za-z0-9._@-]{1,63}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** An API key as an administrator asks for it (POST /api/v1/admin/apikeys). */
export interface NewApiKey {
  name: string;
  roles: string[];
  /** ISO 8601 date-time in the future; null: never expires. */
  expiresAt: string | null;
  createdBy: string;
}

/** Who asks for a kubeconfig token (only a signed-in user gets one). */
export interface TokenCaller {
  kind: 'user' | 'apikey';
  id: number;
  /** What the key's createdBy records. */
  name: string;
  /** The roles the token gets. */
  roles: readonly string[];
  /** When the caller's session last proved a second factor (seconds since the epoch): the token inherits it. */
  secondFactorAt?: number;
}

/**
 * A token minted for a user is an API key that acts for that user (spec.owner): only
 * POST /api/v1/kubeconfig and POST /api/v1/mcp/token make those (kubeconfig and MCP tokens).
 */
export function isKubeconfigToken(key: APIKeyResource): boolean {
  return key.spec?.owner !== undefined;
}

const AUDIENCES: ReadonlySet<string> = new Set<TokenAudience>(['kubernetes', 'mcp', 'console']);

/**
 * What a token minted for a user is for; undefined for a plain API key (it has no owner), null for
 * an audience this release does not know (a newer kiteline wrote it): such a key opens no door.
 */
export function tokenAudience(key: APIKeyResource): TokenAudience | null | undefined {
  if (!isKubeconfigToken(key)) return undefined;
  const audience = key.spec.audience ?? 'kubernetes';
  return AUDIENCES.has(audience) ? audience : null;
}

export function isExpired(key: APIKeyResource, now = Date.now()): boolean {
  return key.spec?.expiresAt ? !(Date.parse(key.spec.expiresAt) > now) : false;
}

export function apiKeyName(key: APIKeyResource): string {
  return key.spec?.name || key.metadata.name;
}

/** The "kubeconfig-<username, cut>-<8 hex>" name of a kubeconfig token, within the 63 characters of a key name. */
function tokenName(username: string, audience: TokenAudience): string {
  const prefix = audience === 'kubernetes' ? 'kubeconfig' : audience;
  return `${prefix}-${username.slice(0, 42)}-${randomBytes(4).toString('hex')}`;
}

const isoSeconds = (time: number) => new Date(time).toISOString().replace(/\.\d{3}Z$/, 'Z');

export class APIKeyStore extends KindStore<APIKeyResource> {
  /** Decoded key digests by the cached Secret object they came from (keyDigest). */
  private readonly digests = new WeakMap<k8s.V1Secret, Buffer | undefined>();

  constructor(
    host: HostStore,
    ids: IdAllocator,
    private readonly users: UserStore,
    /** Whether a role of this name exists (the role store's cache). */
    private readonly roleExists: (name: string) => boolean,
  ) {
    super(host, ids, {
      plural: 'apikeys',
      kind: 'APIKey',
      noun: 'API key',
      keyOf: apiKeyName,
      cache: (h) => h.apiKeys,
    });
  }

  /**
   * The key's stored digest, decoded once per Secret object (the cache replaces the object when the
   * Secret changes, which drops the memo with it): every request with an API key checks it.
   */
  keyDigest(key: APIKeyResource): Buffer | undefined {
    const ref = key.spec?.secretRef?.name;
    const secret = ref ? this.host.secrets.get(ref, this.host.namespace) : undefined;
    if (!secret) return undefined;
    let digest = this.digests.get(secret);
    if (digest === undefined && !this.digests.has(secret)) {
      const hex = secretValue(secret, KEY_HASH_KEY);
      digest = hex === undefined ? undefined : storedKeyDigest(hex);
      this.digests.set(secret, digest);
    }
    return digest;
  }

  /**
   * Creates a key as an administrator asks for it: 400 for a bad name, an unknown role or an
   * expiry that is not a future date-time; 409 when the name is taken. The returned `key` value
   * exists only in this answer.
   */
  async create(input: NewApiKey): Promise<{ resource: APIKeyResource; key: string }> {
    if (!KEY_NAME.test(input.name))
      throw new BadRequestError("name must be 1 to 63 characters of letters, digits, '.', '_', '@' and '-'");
    for (const role of input.roles) if (!this.roleExists(role)) throw new BadRequestError(`unknown role: ${role}`);
    let expiresAt: string | null = null;
    if (input.expiresAt !== null) {
      const time = Date.parse(input.expiresAt);
      if (!ISO_DATE_TIME.test(input.expiresAt) || Number.isNaN(time))
        throw new BadRequestError('expiresAt must be an ISO 8601 date-time, e.g. 2030-01-01T00:00:00Z');
      if (time <= Date.now()) throw new BadRequestError('expiresAt must be in the future');
      expiresAt = new Date(time).toISOString().replace(/\.000Z$/, 'Z');
    }
    return this.insert({ name: input.name, roles: [...new Set(input.roles)], expiresAt, createdBy: input.createdBy });
  }

  /**
   * The user a kubeconfig for `caller` is for: only a signed-in user mints kubeconfig tokens (an API
   * key, a kubeconfig token included, mints none: a leaked token cannot renew itself). 403 for an
   * API key, 404 for a user that is gone.
   */
  tokenOwner(caller: Pick<TokenCaller, 'kind' | 'id'>): UserResource {
    if (caller.kind !== 'user') throw new ForbiddenError('kubeconfig tokens are minted for a signed-in user: sign in');
    const user = this.users.byId(caller.id);
    if (!user) throw new NotFoundError('user not found');
    return user;
  }

  /** The kubeconfig tokens (keys acting for a user) owned by the user with this id, oldest first. */
  tokensOf(userId: number): APIKeyResource[] {
    return this.kubeconfigTokens()
      .filter((key) => key.spec.owner?.id === userId)
      .sort((a, b) => resourceId(a)! - resourceId(b)!);
  }

  /** Every kubeconfig token, of every user. */
  kubeconfigTokens(): APIKeyResource[] {
    return [...this.cache.list()].filter(isKubeconfigToken);
  }

  /**
   * A token for one door (`audience`: a kubeconfig's, or an MCP agent's): a key owned by the
   * caller's user (deleted with it, and failing once the user is disabled or loses a role:
   * AuthService), with the caller's roles, expiring after ttlSeconds. A user keeps at most
   * `maxLive` unexpired tokens of each audience: minting one more revokes the oldest, so no caller
   * can fill the host's etcd with keys (and every replica's memory).
   */
  async createUserToken(
    caller: TokenCaller,
    audience: 'kubernetes' | 'mcp',
    ttlSeconds: number,
    maxLive: number,
  ): Promise<{ resource: APIKeyResource; key: string; user: UserResource }> {
    const created = await this.mint(caller, audience, ttlSeconds);
    const live = this.tokensOf(resourceId(created.user)!).filter(
      (key) => tokenAudience(key) === audience && !isExpired(key),
    );
    for (const old of live.slice(0, Math.max(0, live.length - maxLive))) await this.delete(old).catch(ignoreGone);
    return created;
  }

  /**
   * A kubectl console's token: like a kubeconfig token, but reaching `cluster` only, and revoked by
   * the console when its session ends. Outside the kubeconfig-token count (the route bounds how many
   * consoles a user holds open).
   */
  createConsoleToken(
    caller: TokenCaller,
    cluster: string,
    ttlSeconds: number,
  ): Promise<{ resource: APIKeyResource; key: string; user: UserResource }> {
    return this.mint(caller, 'console', ttlSeconds, [cluster]);
  }

  private async mint(
    caller: TokenCaller,
    audience: TokenAudience,
    ttlSeconds: number,
    clusters?: string[],
  ): Promise<{ resource: APIKeyResource; key: string; user: UserResource }> {
    const user = this.tokenOwner(caller);
    const created = await this.insert({
      name: tokenName(user.spec.username, audience),
      roles: [...caller.roles],
      expiresAt: isoSeconds(Date.now() + ttlSeconds * 1000),
      createdBy: caller.name,
      owner: user,
      ...(audience === 'kubernetes' ? {} : { audience }),
      ...(clusters ? { clusters } : {}),
      ...(caller.secondFactorAt !== undefined ? { secondFactorAt: isoSeconds(caller.secondFactorAt * 1000) } : {}),
    });
    if (tokenAudience(created.resource) !== audience) {
      // The installed APIKey CRD predates `audience` (or this value of it) and pruned it: the key would open another
      // door.
      await this.delete(created.resource).catch(ignoreGone);
      throw new ServiceUnavailableError(
        `the installed APIKey CRD is outdated (it dropped spec.audience): apply crds/ of this release`,
      );
    }
    return { ...created, user };
  }

  private async insert(
    input: NewApiKey & { owner?: UserResource; audience?: TokenAudience; clusters?: string[]; secondFactorAt?: string },
  ): Promise<{ resource: APIKeyResource; key: string }> {
    const name = objectNameFor('apikey', input.name);
    const secretName = `${name}-key`;
    const { secret, keyHash } = generateApiKeySecret();
    const owner = input.owner;
    const resource = await this.createWithId(
      input.name,
      () => ({
        // The owner's User as ownerReference: deleting the user deletes the key (and its Secret).
        metadata: { name, ...(owner ? { ownerReferences: [ownerReference({ ...owner, kind: 'User' })] } : {}) },
        spec: {
          name: input.name,
          roles: input.roles,
          expiresAt: input.expiresAt,
          createdBy: input.createdBy,
          ...(owner ? { owner: { username: owner.spec.username, id: resourceId(owner)! } } : {}),
          ...(input.audience ? { audience: input.audience } : {}),
          ...(input.clusters ? { clusters: input.clusters } : {}),
          ...(input.secondFactorAt ? { secondFactorAt: input.secondFactorAt } : {}),
          secretRef: { name: secretName },
        },
      }),
      { name: secretName, values: { [KEY_HASH_KEY]: keyHash } },
    );
    return { resource, key: formatApiKey(resourceId(resource)!, secret) };
  }

  /** Deletes (revokes) the key and its Secret. */
  async delete(key: APIKeyResource): Promise<void> {
    await this.remove(key, key.spec?.secretRef?.name);
  }

  /** Deletes (revokes) the key with this id; 404 when there is none. */
  async deleteById(id: number): Promise<void> {
    await this.delete(this.getById(id));
  }

  /** Removes a deleted role from every key that holds it (compare-and-swap per key). */
  async dropRole(role: string): Promise<void> {
    for (const key of this.cache.list()) {
      if (!(key.spec?.roles ?? []).includes(role)) continue;
      await this.swap(key, (live) =>
        (live.spec.roles ?? []).includes(role)
          ? { spec: { roles: (live.spec.roles ?? []).filter((r) => r !== role) } }
          : undefined,
      ).catch(ignoreGone);
    }
  }

  /** Writes status.lastUsedAt (callers throttle). */
  async recordUse(key: APIKeyResource, at: Date): Promise<void> {
    await this.crs.patchStatus(key.metadata.name, { lastUsedAt: isoSeconds(at.getTime()) });
  }
}
