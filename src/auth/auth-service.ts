// AuthService: who is calling (sessions and API keys, from the host caches only), what they may do
// (the one authorization function over their roles), and password login. Everything on the
// per-request path is synchronous and cache-only. It reads the identity stores (host/
// identity-stores.ts) and administers nothing: user, role and API-key writes are the stores' own
// (the routes call them). Its only writes are a login's bookkeeping: "last seen" times, hashing a
// plain password applied with kubectl, and the id of a user applied with kubectl.
import { createHmac } from 'node:crypto';
import type { Config } from '../config.js';
import { apiKeySecretMatches, parseApiKey } from '../credentials/apikey-token.js';
import { dummyPasswordHash, verifyPassword } from '../credentials/passwords.js';
import { constantTimeEqual } from '../credentials/secrets-compare.js';
import {
  ForbiddenError,
  NotFoundError,
  SecondFactorRequiredError,
  ServiceUnavailableError,
  UnauthorizedError,
} from '../errors.js';
import { apiKeyName, isExpired, tokenAudience } from '../host/apikeys.js';
import type { IdentityStores } from '../host/identity-stores.js';
import {
  resourceId,
  type APIKeyOwner,
  type APIKeyResource,
  type RoleSpec,
  type UserResource,
} from '../host/resources.js';
import { ADMIN_ROLE } from '../host/roles.js';
import {
  isPasswordUser,
  providerVerifiedAt,
  userGroupSubjects,
  userProvider,
  userSubject,
  type ExternalIdentity,
} from '../host/users.js';
import type { Logger } from '../log.js';
import {
  agentDenied,
  agentWriteUnconfirmed,
  rolesAllow,
  rolesAllowNamed,
  rolesGrantVerb,
  rolesNameResource,
  rolesReachCluster,
} from './authorize.js';
import { sessionCookie } from './cookies.js';
import { LastSeenRecorder } from './last-seen.js';
import { LDAP_PROVIDER, type LdapAuthenticator } from './ldap.js';
import { RateLimiter } from './rate-limiter.js';
import {
  clusterGroups,
  tokenRefusal,
  type AccessRequest,
  type Principal,
  type TokenDoor,
  type Verb,
} from './principal.js';
import { sessionStamp, signSession, verifySession } from './session-token.js';

/** The outcome of reading credentials: a principal, or why there is none. */
/**
 * Who calls, or why not. `refused`: a valid token offered at a door its audience does not open
 * (a 403, not a 401; the refusal is audited as that principal's).
 */
export type Authentication = { principal: Principal } | { failure: string; refused?: Principal };

const INVALID_LOGIN = 'invalid username or password';

/** The verified claims of a session cookie that its later checks need. */
interface SessionFacts {
  uid: number;
  /** The stamp the cookie carries (password hash and session epoch, keyed). */
  stamp: string;
  /** The login time, seconds since the epoch. */
  startedAt: number;
  /** When the session last proved a second factor (seconds since the epoch). */
  secondFactorAt?: number;
  /** The session may only enrol a second factor. */
  enrolmentOnly?: boolean;
}

/** What a new session cookie says of its second factor. */
export interface SessionProof {
  /** When a second factor was last proved (seconds since the epoch). */
  secondFactorAt?: number;
  /** The session may only enrol a second factor (the admins require one, and the user has none). */
  enrolmentOnly?: boolean;
}

/** What a fresh second factor guards (docs/second-factors.md): terminals, exec and attach, deletes. */
const STEP_UP_RESOURCES: ReadonlySet<string> = new Set([
  'pods/exec',
  'pods/attach',
  'pods/portforward',
  'pods/eviction',
  'nodes/proxy',
  'nodes/terminal',
  'kubectl-terminal',
]);

/**
 * The access is one a step-up rule guards: a delete of anything; a shell, session, port-forward or
 * eviction of a pod, or the kubelet's API (nodes/proxy runs commands in containers); a write of a
 * pod's ephemeral containers (a container added to a running pod).
 */
export function guardedByStepUp(access: Pick<AccessRequest, 'resource' | 'verb'>): boolean {
  if (access.verb === 'delete' || STEP_UP_RESOURCES.has(access.resource)) return true;
  return access.resource === 'pods/ephemeralcontainers' && ['create', 'update', 'patch'].includes(access.verb);
}

/** What an AI agent acting for a principal may do beyond the principal's rules (its roles' mcp blocks). */
export interface AgentPolicy {
  /** A role denies agents this tool. */
  toolDenied(tool: string): boolean;
  /** A role denies agents this resource. */
  resourceDenied(resource: string): boolean;
  /** A role granting this write lets it run without a human's confirmation. */
  writeUnconfirmed(access: AccessRequest): boolean;
  /** Some role grants the verb somewhere (a write tool is listed at all). */
  grantsVerb(verb: Verb): boolean;
}

export class AuthService {
  readonly limiter: RateLimiter;
  private readonly users: IdentityStores['users'];
  private readonly roles: IdentityStores['roles'];
  private readonly apiKeys: IdentityStores['apiKeys'];
  private readonly sessionKey: IdentityStores['sessionKey'];
  private readonly oauthProviders: IdentityStores['oauthProviders'];
  private readonly generalSettings: IdentityStores['generalSettings'];
  private readonly lastSeen: LastSeenRecorder;
  /** Where groups come from now ("ldap" and the OAuthProviders' names: IdentityStores.groupSources). */
  readonly groupSources: () => string[];
  /** What a session principal's cookie said, for recheck (never the cookie itself). */
  private readonly sessions = new WeakMap<Principal, SessionFacts>();

  constructor(
    identity: Pick<
      IdentityStores,
      'users' | 'roles' | 'apiKeys' | 'sessionKey' | 'oauthProviders' | 'generalSettings' | 'groupSources'
    >,
    private readonly config: Config,
    log: Logger,
    /** Sign-in against the LDAP directory in force (none: LDAP sign-in is off). */
    readonly ldap: LdapAuthenticator,
    /** A cluster's step-up label (minutes), if it has one (host/clusters.ts STEP_UP_LABEL). */
    private readonly clusterStepUp: (cluster: string) => number | undefined = () => undefined,
  ) {
    this.users = identity.users;
    this.roles = identity.roles;
    this.apiKeys = identity.apiKeys;
    this.sessionKey = identity.sessionKey;
    this.oauthProviders = identity.oauthProviders;
    this.generalSettings = identity.generalSettings;
    this.groupSources = () => identity.groupSources();
    this.limiter = new RateLimiter(config.loginMaxFailures, config.loginWindowSeconds);
    this.lastSeen = new LastSeenRecorder(log);
  }

  /**
   * Seconds a session cookie issued now may live: the session TTL, but never past the session's
   * absolute lifetime, counted from its login at `startedAt` (refreshes do not extend that).
   */
  sessionMaxAge(startedAt = nowSeconds()): number {
    const left = startedAt + this.config.sessionMaxLifetimeSeconds - nowSeconds();
    return Math.max(0, Math.min(this.config.sessionTtlSeconds, left));
  }

  // ---- authentication (cache-only) ----

  /**
   * `Authorization: <key>` or `Authorization: Bearer <key>`, offered at `door` (kiteline's own API,
   * the Kubernetes API proxy or /mcp): a token minted for one of them opens no other.
   */
  authenticateApiKey(header: string, door: TokenDoor): Authentication {
    const value = /^bearer\s+/i.test(header) ? header.replace(/^bearer\s+/i, '') : header.trim();
    const parts = parseApiKey(value);
    if (!parts) return { failure: 'invalid API key' };
    const key = this.apiKeys.byId(parts.id);
    const digest = key ? this.apiKeys.keyDigest(key) : undefined;
    if (!key || !digest || !apiKeySecretMatches(parts.secret, digest)) return { failure: 'invalid API key' };
    const result = this.keyHolder(key, parts.id);
    if (!('principal' in result)) return result;
    const refusal = tokenRefusal(result.principal, door);
    if (refusal) return { failure: refusal, refused: result.principal };
    // Only a use that is let in is one: a token tried at the wrong door does not count.
    this.lastSeen.record(`apikey:${parts.id}`, key.status?.lastUsedAt, (at) => this.apiKeys.recordUse(key, at));
    return result;
  }

  /** Who a key whose secret matched acts as, if it is still in force: not deleted, expired or orphaned. */
  private keyHolder(key: APIKeyResource, id: number): Authentication {
    if (key.metadata.deletionTimestamp) return { failure: 'invalid API key' };
    if (isExpired(key)) return { failure: 'API key expired' };
    const owner = key.spec.owner;
    if (owner && !this.ownerStillHolds(owner, key.spec.roles ?? []))
      return { failure: 'API key no longer valid: its user was disabled or deleted, or lost a role' };
    // A key that acts for a user (a kubeconfig or MCP token) is that user to logs, audit and clusters
    // (Impersonate-User), and is accepted on its audience's door only.
    if (owner) {
      const audience = tokenAudience(key);
      if (!audience) return { failure: 'API key for a use this kiteline does not know (a newer release made it?)' };
      const clusters = key.spec.clusters;
      if (audience === 'console' && !clusters?.length) return { failure: 'console token without its cluster' };
      const proved = Date.parse(key.spec.secondFactorAt ?? '');
      return {
        principal: {
          ...makePrincipal('apikey', id, owner.username, key.spec.roles ?? []),
          ...(Number.isFinite(proved) ? { secondFactorAt: Math.floor(proved / 1000) } : {}),
          tokenAudience: audience,
          ...(audience === 'console' ? { tokenClusters: clusters } : {}),
        },
      };
    }
    return { principal: makePrincipal('apikey', id, `apikey:${apiKeyName(key)}`, key.spec.roles ?? []) };
  }

  /** The owner of a key still exists (the same user, by id), is enabled and holds every role of the key. */
  private ownerStillHolds(owner: APIKeyOwner, keyRoles: readonly string[]): boolean {
    const user = this.users.byUsername(owner.username);
    if (!user || resourceId(user) !== owner.id || user.spec.enabled === false) return false;
    if (!this.providerStillVouches(user)) return false;
    const held = new Set(this.effectiveRoles(user));
    return keyRoles.every((role) => held.has(role));
  }

  /**
   * A user of an identity provider is trusted for as long as a session lasts after the provider
   * last vouched for them (their last sign-in): their keys stop at most KITELINE_SESSION_MAX_LIFETIME
   * after it, so a user removed from the directory or provider keeps nothing alive by a key.
   */
  private providerStillVouches(user: UserResource): boolean {
    if (isPasswordUser(user)) return true;
    if (!this.providerInService(user)) return false;
    return providerVerifiedAt(user) + this.config.sessionMaxLifetimeSeconds * 1000 > Date.now();
  }

  /**
   * An OpenID Connect user's provider still exists and is enabled: disabling or deleting a provider
   * (a compromised client secret, a provider that is gone) ends its users' sessions and stops their
   * keys at once. Likewise LDAP users while no directory is in force (an LDAPSetting disabled);
   * otherwise they answer to the re-check.
   */
  private providerInService(user: UserResource): boolean {
    const provider = userProvider(user);
    if (provider === 'password') return true;
    if (provider === LDAP_PROVIDER) return this.ldap.configured;
    const registered = this.oauthProviders.byName(provider);
    return registered !== undefined && registered.spec.enabled !== false;
  }

  /**
   * The user's roles: those assigned to the user, plus, for a user of an identity provider, those
   * assigned to the groups the provider gave at their last sign-in, scoped by that provider
   * (`oidc:<provider>/<group>`, `ldap/<group>`; a bare name of before only while that provider is
   * the only one: host/group-subjects.ts).
   */
  effectiveRoles(user: UserResource): string[] {
    const own = user.spec.roles ?? [];
    if (isPasswordUser(user)) return [...own];
    const sources = this.groupSources();
    const subjects = userGroupSubjects(user, sources.length === 1 ? sources[0] : undefined);
    return [...new Set([...own, ...this.roles.namesForGroups(subjects)])];
  }

  /** The user holds a role that exists (directly, or through a group). */
  holdsAnyRole(user: UserResource): boolean {
    return this.effectiveRoles(user).some((name) => this.roles.byName(name) !== undefined);
  }

  /** The auth_token cookie. */
  authenticateSession(token: string): Authentication {
    const key = this.sessionKey.current();
    const claims = verifySession(key, token, nowSeconds());
    if (!claims) return { failure: 'invalid or expired session' };
    const session: SessionFacts = {
      uid: claims.uid,
      stamp: claims.st,
      startedAt: claims.iat,
      ...(claims.mf !== undefined ? { secondFactorAt: claims.mf } : {}),
      ...(claims.en === 1 ? { enrolmentOnly: true } : {}),
    };
    const result = this.sessionHolder(session);
    if ('principal' in result) this.sessions.set(result.principal, session);
    return result;
  }

  /** Who a correctly signed session is, if it still holds: lifetime, user, provider, password and epoch. */
  private sessionHolder(session: SessionFacts): Authentication {
    if (this.sessionMaxAge(session.startedAt) <= 0)
      return { failure: 'session reached its maximum lifetime; log in again' };
    const user = this.users.byId(session.uid);
    if (!user) return { failure: 'invalid or expired session' };
    if (user.spec.enabled === false) return { failure: 'user is disabled' };
    if (!this.providerInService(user)) return { failure: "session ended (the user's sign-in provider is disabled)" };
    const credential = this.credentialOf(user);
    if (!credential || !constantTimeEqual(Buffer.from(session.stamp), Buffer.from(this.stampOf(user, credential)))) {
      return { failure: 'session ended (password changed or user disabled)' };
    }
    return {
      principal: {
        ...this.principalOfUser(user),
        sessionStartedAt: session.startedAt,
        ...(session.secondFactorAt !== undefined ? { secondFactorAt: session.secondFactorAt } : {}),
        ...(session.enrolmentOnly ? { enrolmentOnly: true } : {}),
      },
    };
  }

  /**
   * Whether a principal authenticated earlier would still be now, and with which roles: every check
   * of authentication except the secret itself, which was checked then (a session's stamp, kept
   * aside at authentication, stands in for its cookie). Open streams are checked again with it
   * whenever the identity caches change (auth/open-streams.ts).
   */
  recheck(principal: Principal): Authentication {
    if (principal.kind === 'apikey') {
      const key = this.apiKeys.byId(principal.id);
      if (!key || !this.apiKeys.keyDigest(key)) return { failure: 'API key deleted' };
      return this.keyHolder(key, principal.id);
    }
    const session = this.sessions.get(principal);
    if (!session) return { failure: 'not signed in by a session' };
    return this.sessionHolder(session);
  }

  /**
   * When a principal's credential runs out by itself (ms since the epoch), if ever: an API key's
   * expiresAt (and, for a key of an identity provider's user, the end of the provider's last vouching),
   * a session's absolute lifetime. A session's cookie is refreshed while its page is open, so the
   * absolute lifetime, not the cookie's own expiry, is what bounds a stream.
   */
  credentialExpiresAt(principal: Principal): number | undefined {
    if (principal.kind === 'user') {
      const session = this.sessions.get(principal);
      return session && (session.startedAt + this.config.sessionMaxLifetimeSeconds) * 1000;
    }
    const key = this.apiKeys.byId(principal.id);
    const ends: number[] = [];
    if (key?.spec.expiresAt) ends.push(Date.parse(key.spec.expiresAt));
    const owner = key?.spec.owner ? this.users.byUsername(key.spec.owner.username) : undefined;
    if (owner && !isPasswordUser(owner))
      ends.push(providerVerifiedAt(owner) + this.config.sessionMaxLifetimeSeconds * 1000);
    const finite = ends.filter((end) => Number.isFinite(end));
    return finite.length > 0 ? Math.min(...finite) : undefined;
  }

  /** The principal's roles that exist (a role named by a user or key may have been deleted with kubectl). */
  heldRoles(principal: Principal): string[] {
    return principal.roles.filter((name) => this.roles.byName(name) !== undefined);
  }

  principalOfUser(user: UserResource): Principal {
    return makePrincipal('user', resourceId(user)!, user.spec.username, this.effectiveRoles(user));
  }

  // ---- authorization (cache-only) ----

  private rolesOf(principal: Principal): RoleSpec[] {
    const specs: RoleSpec[] = [];
    for (const name of principal.roles) {
      const role = this.roles.byName(name);
      if (role?.spec) specs.push(role.spec);
    }
    return specs;
  }

  /** The one authorization function: some role of the principal matches all four. */
  authorize(principal: Principal, access: AccessRequest): boolean {
    return boundTo(principal, access.cluster) && rolesAllow(this.rolesOf(principal), access);
  }

  /**
   * Like authorize, but only a role that names the resource itself counts (authorize.ts
   * rolesAllowNamed): for features that are admin-only unless a role opens them on purpose.
   */
  authorizeNamed(principal: Principal, access: AccessRequest): boolean {
    return boundTo(principal, access.cluster) && rolesAllowNamed(this.rolesOf(principal), access);
  }

  /** Some role of the principal names the resource itself. */
  namesResource(principal: Principal, resource: string): boolean {
    return rolesNameResource(this.rolesOf(principal), resource);
  }

  canAccessCluster(principal: Principal, cluster: string): boolean {
    return boundTo(principal, cluster) && rolesReachCluster(this.rolesOf(principal), cluster);
  }

  /**
   * The minutes a fresh second factor may be old for a guarded access (guardedByStepUp) of the
   * principal on `cluster`: the least of the cluster's step-up label and the step-up of every role
   * of the principal that reaches the cluster; undefined when nothing asks for one.
   */
  stepUpMinutes(principal: Principal, cluster: string): number | undefined {
    const asked: number[] = [];
    const label = this.clusterStepUp(cluster);
    if (label !== undefined) asked.push(label);
    for (const role of this.rolesOf(principal))
      if (role.stepUpMinutes !== undefined && rolesReachCluster([role], cluster)) asked.push(role.stepUpMinutes);
    return asked.length > 0 ? Math.min(...asked) : undefined;
  }

  /**
   * Throws 401 SecondFactorRequired when the access is guarded (a delete, a terminal, exec or
   * attach) on a cluster or by a role that asks for a fresh second factor and the caller's last proof
   * is older than that (or there is none). Its details say how fresh and how to prove one.
   */
  requireFreshFactor(principal: Principal, access: Pick<AccessRequest, 'cluster' | 'resource' | 'verb'>): void {
    if (!guardedByStepUp(access)) return;
    const minutes = this.stepUpMinutes(principal, access.cluster);
    if (minutes === undefined) return;
    const provedAt = principal.secondFactorAt;
    // A proof time ahead of this clock (written by hand, or a replica's clock ahead) proves nothing.
    const age = provedAt === undefined ? Infinity : nowSeconds() - provedAt;
    if (age <= minutes * 60 && age >= -60) return;
    throw new SecondFactorRequiredError(
      `${access.verb === 'delete' ? `delete of ${access.resource}` : access.resource} on cluster ${access.cluster} ` +
        `needs a second factor proved in the last ${minutes} minutes` +
        (principal.kind === 'apikey' && principal.tokenAudience === undefined
          ? ': an API key has none, use a signed-in session'
          : principal.kind === 'apikey'
            ? ': prove one in the web UI (POST /api/auth/step-up), then mint a new token'
            : ': POST /api/auth/step-up'),
      {
        maxAgeSeconds: minutes * 60,
        cluster: access.cluster,
        ...(provedAt !== undefined ? { secondFactorAt: provedAt } : {}),
      },
    );
  }

  /**
   * An AI agent's limits beyond the rules (the roles' mcp blocks, docs/mcp.md), read from the roles
   * as they are at each question.
   */
  agentPolicy(principal: Principal): AgentPolicy {
    const roles = () => this.rolesOf(principal);
    return {
      toolDenied: (tool) => agentDenied(roles(), 'denyTools', tool),
      resourceDenied: (resource) => agentDenied(roles(), 'denyResources', resource),
      writeUnconfirmed: (access) => boundTo(principal, access.cluster) && agentWriteUnconfirmed(roles(), access),
      grantsVerb: (verb) => rolesGrantVerb(roles(), verb),
    };
  }

  /**
   * A signature of `text` for `purpose` with the key every replica shares (the session key), so
   * what one replica writes into an id another can trust (the MCP session's replica).
   */
  sign(purpose: string, text: string): string {
    return createHmac('sha256', this.sessionKey.current()).update(`${purpose}\0${text}`).digest('base64url');
  }

  /** Whether `signature` is sign(purpose, text) (compared in constant time). */
  signed(purpose: string, text: string, signature: string): boolean {
    return constantTimeEqual(Buffer.from(signature), Buffer.from(this.sign(purpose, text)));
  }

  isAdmin(principal: Principal): boolean {
    return principal.roles.includes(ADMIN_ROLE) && this.roles.byName(ADMIN_ROLE) !== undefined;
  }

  // ---- sessions ----

  private stampOf(user: UserResource, credential: string): string {
    return sessionStamp(this.sessionKey.current(), credential, this.users.sessionEpoch(user));
  }

  /**
   * What a session is bound to besides the epoch: the password hash of a password user, the
   * provider and subject of a provider's user (so a session never outlives a change of either).
   */
  private credentialOf(user: UserResource): string | undefined {
    if (isPasswordUser(user)) return this.users.passwordCredential(user);
    const subject = userSubject(user);
    return subject ? `provider\n${userProvider(user)}\n${subject}` : undefined;
  }

  /**
   * A signed session token for the user (callers checked the password, or the session being
   * refreshed, which passes its `startedAt`: `iat` stays the login time, so the absolute lifetime
   * holds however often a cookie is refreshed).
   */
  issueSession(user: UserResource, startedAt = nowSeconds(), proof: SessionProof = {}): string {
    const credential = this.credentialOf(user);
    if (!credential) throw new ServiceUnavailableError('the password of this user is not stored yet; try again');
    return signSession(this.sessionKey.current(), {
      uid: resourceId(user)!,
      st: this.stampOf(user, credential),
      iat: startedAt,
      exp: nowSeconds() + this.sessionMaxAge(startedAt),
      ...(proof.secondFactorAt !== undefined ? { mf: proof.secondFactorAt } : {}),
      ...(proof.enrolmentOnly ? { en: 1 as const } : {}),
    });
  }

  /** The Set-Cookie value of a session: a new one, or the refresh of one that started at `startedAt`. */
  sessionSetCookie(user: UserResource, secure: boolean, startedAt?: number, proof?: SessionProof): string {
    return sessionCookie(
      this.issueSession(user, startedAt, proof),
      this.sessionMaxAge(startedAt),
      secure,
      this.config.basePath,
    );
  }

  /**
   * Checks a password login. Unknown user, wrong password and a disabled user give the same 401
   * (and cost the same scrypt); failures count per username and per client address (429 over the
   * limit).
   */
  async login(username: string, password: string, address: string): Promise<UserResource> {
    const keys = [`user:${username}`, `addr:${address}`];
    this.limiter.refuseWhenLimited(keys, 'too many failed logins');

    // A user of an identity provider has no password here: the same answer as an unknown user;
    // with a directory configured, a name that is no password user's is the directory's (so Kite's
    // login page, which has only the password form, signs LDAP users in too).
    // With password login disabled (Kite's general setting), the form still signs directory users in.
    const found = this.users.byUsername(username);
    const passwordLogin = !this.generalSettings.passwordLoginDisabled();
    if (this.ldap.configured && !(passwordLogin && found && isPasswordUser(found)))
      return this.loginLdap(username, password, address);
    if (!passwordLogin) throw new ForbiddenError('password login is disabled');
    let user = found && isPasswordUser(found) ? found : undefined;
    const hash = user ? this.users.passwordHash(user) : undefined;
    const plain = user && hash === undefined ? this.users.plainPassword(user) : undefined;
    let ok: boolean;
    if (hash !== undefined) {
      ok = await verifyPassword(password, hash);
    } else {
      await verifyPassword(password, await dummyPasswordHash());
      ok = plain !== undefined && constantTimeEqual(Buffer.from(password), Buffer.from(plain));
    }
    if (!user || !ok || user.spec.enabled === false) {
      this.limiter.record(keys);
      throw new UnauthorizedError(INVALID_LOGIN);
    }
    this.limiter.reset(keys[0]);

    if (hash === undefined && !this.users.passwordFromGit(user)) {
      // Applied with a plain `password` key and not hashed yet: hash it now, before the session
      // is bound to the hash. (A Secret from Git stays as Git has it: docs/gitops.md.)
      await this.users.setPassword(user, password);
    }
    // A user applied with kubectl gets its id now (the store returns once the cache shows it).
    const id = await this.users.ensureId(user);
    if (id === undefined) throw new UnauthorizedError(INVALID_LOGIN);
    user = this.users.byId(id) ?? user;
    const current = user;
    this.lastSeen.record(`user:${id}`, current.status?.lastLoginAt, (at) => this.users.recordLogin(current, at));
    return user;
  }

  /**
   * Signs in with the LDAP directory: the same rate limit (shared with password logins, per
   * username and address) and the same 401 for an unknown user, a wrong password and a disabled
   * user.
   */
  async loginLdap(username: string, password: string, address: string): Promise<UserResource> {
    if (!this.ldap.configured) throw new NotFoundError('LDAP sign-in is not configured');
    const keys = [`user:${username}`, `addr:${address}`];
    this.limiter.refuseWhenLimited(keys, 'too many failed logins');
    const identity = await this.ldap.authenticate(username, password);
    const existing = identity ? this.users.findExternal(identity) : undefined;
    if (!identity || existing?.spec.enabled === false) {
      this.limiter.record(keys);
      throw new UnauthorizedError(INVALID_LOGIN);
    }
    let user: UserResource;
    try {
      user = await this.signInExternal(identity);
    } catch (err) {
      if (err instanceof UnauthorizedError) {
        this.limiter.record(keys);
        throw new UnauthorizedError(INVALID_LOGIN);
      }
      throw err;
    }
    this.limiter.reset(keys[0]);
    return user;
  }

  /**
   * The user an identity provider vouched for, created or updated (store rules: a username held by
   * another account is 401), once it has an id. A disabled user: 401; a user holding no role at
   * all: 403 (Kite's `insufficient_permissions`; the user is kept for a while, so an admin can
   * assign roles, then deleted unless it got one: auth/roleless-users.ts).
   */
  async signInExternal(identity: ExternalIdentity): Promise<UserResource> {
    // Disabled: refused before anything is written.
    if (this.users.findExternal(identity)?.spec.enabled === false) throw new UnauthorizedError('user is disabled');
    let user = await this.users.signInExternal(identity);
    if (user.spec.enabled === false) throw new UnauthorizedError('user is disabled');
    const id = await this.users.ensureId(user);
    if (id === undefined) throw new UnauthorizedError('user not found');
    user = this.users.byId(id) ?? user;
    if (!this.holdsAnyRole(user))
      throw new ForbiddenError(`user ${user.spec.username} holds no role: ask an administrator to assign one`);
    const current = user;
    this.lastSeen.record(`user:${id}`, current.status?.lastLoginAt, (at) => this.users.recordLogin(current, at));
    return user;
  }
}

function makePrincipal(kind: Principal['kind'], id: number, name: string, roles: string[]): Principal {
  return {
    kind,
    id,
    name,
    roles: [...roles],
    groups: clusterGroups(roles),
  };
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** A token bound to some clusters reaches only those; every other principal, any its roles reach. */
function boundTo(principal: Principal, cluster: string): boolean {
  return principal.tokenClusters === undefined || principal.tokenClusters.includes(cluster);
}
