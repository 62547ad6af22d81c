// Sign-in with an OpenID Connect provider (openid-client, a certified relying party): discovery from
// the issuer, the authorization code flow with PKCE (S256), state and nonce, and the ID token
// validated by the library (issuer, audience, expiry, nonce, and its signature with the provider's
// published keys: enableNonRepudiationChecks, without which openid-client trusts the TLS channel
// to the token endpoint instead). A key the cached key set lacks makes the library fetch the set again (at most
// once a minute; the set is also refreshed every 5 minutes), so the provider may rotate keys.
//
// The flow's secrets (state, nonce, PKCE verifier, provider, expiry) travel in a short-lived
// cookie encrypted and authenticated with a key derived from the shared session key, so the
// callback may land on any replica. A state is accepted once per replica; the provider accepts a
// code once, which stops a replay on another replica.
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import * as client from 'openid-client';
import { ServiceUnavailableError } from '../errors.js';
import { isLoopbackHost } from '../config.js';
import { providerName, type OAuthProviderStore } from '../host/oauth-providers.js';
import type { OAuthProviderResource } from '../host/resources.js';
import type { ExternalIdentity } from '../host/users.js';
import type { Logger } from '../log.js';

export const FLOW_COOKIE = 'kiteline_oidc';
/** How long a sign-in may take at the provider. */
export const FLOW_SECONDS = 600;
const DISCOVERY_TTL_MS = 10 * 60_000;
/** Used states remembered at most (the oldest go first; the provider still refuses a used code). */
const MAX_USED_STATES = 100_000;
const USERNAME = /^[A-Za-z0-9._@-]{1,63}$/;

/** Why a callback failed: Kite's login page shows each code (`/login?error=<code>`). */
export type SignInFailureCode =
  | 'callback_failed'
  | 'token_exchange_failed'
  | 'user_info_failed'
  | 'user_disabled'
  | 'callback_error'
  | 'insufficient_permissions';

export class SignInFailure extends Error {
  constructor(
    readonly code: SignInFailureCode,
    message: string,
    readonly provider?: string,
    readonly user?: string,
    /** The login page's `reason` when it has a word of its own for it (else the message). */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** Kite's login page reason for a user in none of the provider's allowedGroups. */
export const NOT_IN_ALLOWED_GROUPS = 'not_in_allowed_groups';

interface FlowState {
  /** Provider name, state, nonce, PKCE verifier, redirect URI, expiry (seconds). */
  p: string;
  s: string;
  n: string;
  v: string;
  r: string;
  exp: number;
}

interface CachedConfiguration {
  key: string;
  at: number;
  configuration: Promise<client.Configuration>;
}

export class OidcSignIn {
  private readonly configurations = new Map<string, CachedConfiguration>();
  /** States already used on this replica, until their flow would have expired anyway. */
  private readonly usedStates = new Map<string, number>();

  constructor(
    private readonly providers: OAuthProviderStore,
    private readonly sessionKey: () => Buffer,
    private readonly log: Logger,
  ) {}

  private enabledProvider(name: string): OAuthProviderResource | undefined {
    const provider = this.providers.byName(name);
    return provider && provider.spec.enabled !== false ? provider : undefined;
  }

  /** The discovered configuration of a provider (cached; a changed provider or secret is discovered anew). */
  private configuration(provider: OAuthProviderResource): Promise<client.Configuration> {
    const name = providerName(provider);
    const key = JSON.stringify([provider.metadata.resourceVersion, this.providers.clientSecretVersion(provider)]);
    const cached = this.configurations.get(name);
    if (cached && cached.key === key && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.configuration;
    const issuer = new URL(provider.spec.issuer);
    const secret = this.providers.clientSecret(provider);
    const configuration = client.discovery(
      issuer,
      provider.spec.clientId,
      secret ? { client_secret: secret } : undefined,
      secret ? client.ClientSecretPost(secret) : client.None(),
      {
        timeout: 10,
        execute: [
          // The ID token's signature is checked with the provider's keys even though it came
          // straight from the token endpoint (OIDC Core lets a client rely on TLS alone there).
          client.enableNonRepudiationChecks,
          // http only for a provider on this machine (tests, development): the store refuses others.
          ...(issuer.protocol === 'http:' && isLoopbackHost(issuer.hostname) ? [client.allowInsecureRequests] : []),
        ],
      },
    );
    const entry = { key, at: Date.now(), configuration };
    this.configurations.set(name, entry);
    configuration.catch(() => {
      if (this.configurations.get(name) === entry) this.configurations.delete(name);
    });
    return configuration;
  }

  /**
   * Starts a sign-in: the provider's authorization URL, and the flow cookie's value. An unknown or
   * disabled provider is undefined (the route answers 400).
   */
  async start(name: string, redirectUri: string): Promise<{ authUrl: string; flow: string } | undefined> {
    const provider = this.enabledProvider(name);
    if (!provider) return undefined;
    let configuration: client.Configuration;
    try {
      configuration = await this.configuration(provider);
    } catch (err) {
      this.log.warn({ provider: name, err: errorText(err) }, 'OpenID Connect discovery failed');
      throw new ServiceUnavailableError(`the identity provider ${name} cannot be reached; try again later`);
    }
    const verifier = client.randomPKCECodeVerifier();
    const state: FlowState = {
      p: name,
      s: client.randomState(),
      n: client.randomNonce(),
      v: verifier,
      r: redirectUri,
      exp: nowSeconds() + FLOW_SECONDS,
    };
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri,
      scope: scopesOf(provider),
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: state.s,
      nonce: state.n,
    });
    return { authUrl: url.href, flow: this.seal(state) };
  }

  /**
   * Finishes a sign-in at the callback: checks the flow cookie and the state, redeems the code
   * (with the PKCE verifier), validates the ID token (and nonce), and returns who signed in.
   */
  async finish(query: Record<string, string | undefined>, flowCookie: string | undefined): Promise<ExternalIdentity> {
    const flow = flowCookie ? this.open(flowCookie) : undefined;
    if (!flow) throw new SignInFailure('callback_failed', 'no sign-in in progress (or it expired): start again');
    const provider = this.enabledProvider(flow.p);
    if (!provider) throw new SignInFailure('callback_failed', 'unknown or disabled provider', flow.p);
    if (query.error) {
      // Logged, not shown: Kite's login page displays the reason, and anyone can put text in a URL.
      this.log.info({ provider: flow.p, error: query.error.slice(0, 100) }, 'the provider refused the sign-in');
      throw new SignInFailure('callback_failed', 'the provider refused the sign-in', flow.p);
    }
    if (!query.state || query.state !== flow.s)
      throw new SignInFailure('callback_failed', 'the state does not match this sign-in', flow.p);
    this.forgetOldStates();
    if (this.usedStates.has(flow.s))
      throw new SignInFailure('callback_failed', 'this sign-in was used already', flow.p);
    this.usedStates.set(flow.s, flow.exp);
    if (this.usedStates.size > MAX_USED_STATES) this.usedStates.delete(this.usedStates.keys().next().value!);

    let configuration: client.Configuration;
    try {
      configuration = await this.configuration(provider);
    } catch (err) {
      this.log.warn({ provider: flow.p, err: errorText(err) }, 'OpenID Connect discovery failed');
      throw new SignInFailure('token_exchange_failed', 'the identity provider cannot be reached', flow.p);
    }
    const callbackUrl = new URL(flow.r);
    for (const [name, value] of Object.entries(query))
      if (value !== undefined) callbackUrl.searchParams.set(name, value);
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(configuration, callbackUrl, {
        pkceCodeVerifier: flow.v,
        expectedState: flow.s,
        expectedNonce: flow.n,
        idTokenExpected: true,
      });
    } catch (err) {
      this.log.warn({ provider: flow.p, err: errorText(err) }, 'OpenID Connect code exchange or ID token check failed');
      throw new SignInFailure('token_exchange_failed', 'the sign-in could not be verified', flow.p);
    }
    const claims: Record<string, unknown> = { ...tokens.claims() };
    const groupsClaim = provider.spec.groupsClaim || 'groups';
    const usernameClaims = provider.spec.usernameClaim
      ? [provider.spec.usernameClaim]
      : ['preferred_username', 'email'];
    const needsUserInfo =
      claims[groupsClaim] === undefined || usernameClaims.every((c) => typeof claims[c] !== 'string');
    if (needsUserInfo && configuration.serverMetadata().userinfo_endpoint) {
      try {
        const info = await client.fetchUserInfo(configuration, tokens.access_token, String(claims.sub));
        // The ID token's claims win; the user info endpoint fills what it lacks.
        for (const [name, value] of Object.entries(info)) if (claims[name] === undefined) claims[name] = value;
      } catch (err) {
        this.log.warn({ provider: flow.p, err: errorText(err) }, 'OpenID Connect user info failed');
        throw new SignInFailure('user_info_failed', 'the user info could not be read', flow.p);
      }
    }
    const identity = identityOf(flow.p, claims, usernameClaims, groupsClaim);
    // Kite's allowedGroups: only members of one of them sign in, refused before any user is made.
    const allowed = allowedGroups(provider);
    if (allowed.length > 0 && !identity.groups.some((group) => allowed.includes(group))) {
      this.log.info({ provider: flow.p, user: identity.username }, 'sign-in refused: in none of the allowed groups');
      throw new SignInFailure(
        'insufficient_permissions',
        `${identity.username} is in none of the groups allowed to sign in with ${flow.p}`,
        flow.p,
        identity.username,
        NOT_IN_ALLOWED_GROUPS,
      );
    }
    return identity;
  }

  private forgetOldStates(): void {
    const now = nowSeconds();
    for (const [state, exp] of this.usedStates) if (exp <= now) this.usedStates.delete(state);
  }

  private cipherKey(): Buffer {
    return createHmac('sha256', this.sessionKey()).update('kiteline oidc flow v1').digest();
  }

  /** AES-256-GCM under a key derived from the session key: secret and tamper-evident. */
  private seal(state: FlowState): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.cipherKey(), iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
    return [iv, body, cipher.getAuthTag()].map((b) => b.toString('base64url')).join('.');
  }

  private open(value: string): FlowState | undefined {
    if (value.length > 4096) return undefined;
    const parts = value.split('.');
    if (parts.length !== 3) return undefined;
    try {
      const [iv, body, tag] = parts.map((p) => Buffer.from(p, 'base64url'));
      if (iv.length !== 12 || tag.length !== 16) return undefined;
      const decipher = createDecipheriv('aes-256-gcm', this.cipherKey(), iv);
      decipher.setAuthTag(tag);
      const state = JSON.parse(Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8')) as FlowState;
      const valid = ['p', 's', 'n', 'v', 'r'].every((k) => typeof state[k as keyof FlowState] === 'string');
      return valid && Number.isFinite(state.exp) && state.exp > nowSeconds() ? state : undefined;
    } catch {
      return undefined;
    }
  }
}

/** The provider's allowedGroups (Kite stores them comma-separated); none: everyone may sign in. */
export function allowedGroups(provider: OAuthProviderResource): string[] {
  return (provider.spec.allowedGroups ?? '')
    .split(',')
    .map((group) => group.trim())
    .filter(Boolean);
}

/** "openid" plus the provider's scopes (Kite stores them comma-separated). */
function scopesOf(provider: OAuthProviderResource): string {
  const scopes = (provider.spec.scopes || 'openid,profile,email').split(/[\s,]+/).filter(Boolean);
  return [...new Set(['openid', ...scopes])].join(' ');
}

function identityOf(
  provider: string,
  claims: Record<string, unknown>,
  usernameClaims: string[],
  groupsClaim: string,
): ExternalIdentity {
  const sub = claims.sub;
  if (typeof sub !== 'string' || sub === '') throw new SignInFailure('user_info_failed', 'no subject', provider);
  const claim = usernameClaims.find((c) => typeof claims[c] === 'string' && claims[c] !== '');
  const username = claim ? (claims[claim] as string) : sub;
  // An address the provider does not say it verified names nobody: anyone could have typed it
  // (a missing email_verified too: some providers send a mutable, unverified address without it).
  if (claim === 'email' && claims.email_verified !== true)
    throw new SignInFailure('user_info_failed', 'the e-mail address is not verified', provider);
  if (!USERNAME.test(username))
    throw new SignInFailure(
      'user_info_failed',
      `the ${claim ?? 'sub'} claim is not a valid username (1 to 63 of letters, digits, '.', '_', '@', '-')`,
      provider,
    );
  const raw = claims[groupsClaim];
  const groups = (Array.isArray(raw) ? raw : typeof raw === 'string' ? [raw] : []).filter(
    (g): g is string => typeof g === 'string' && g !== '' && g.length <= 1024,
  );
  const name = typeof claims.name === 'string' ? claims.name.slice(0, 256) : undefined;
  const picture = typeof claims.picture === 'string' && /^https:\/\//.test(claims.picture) ? claims.picture : undefined;
  return {
    provider,
    subject: `${String(claims.iss)} ${sub}`,
    username,
    ...(name !== undefined ? { name } : {}),
    ...(picture !== undefined ? { avatarURL: picture.slice(0, 2048) } : {}),
    groups,
  };
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? `${code}: ${err.message}` : err.message;
}
