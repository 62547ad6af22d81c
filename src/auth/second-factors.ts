// Second factors (docs/second-factors.md): TOTP codes (otplib) with hashed recovery codes, and
// passkeys (WebAuthn, @simplewebauthn/server), for signing in and for proving a fresh factor
// before dangerous actions (step-up). The storage is host/second-factors.ts; this file decides.
//
// Challenges (a passkey ceremony's, a password sign-in waiting for its code) are tokens signed with
// the session key that every replica shares, carried in an HttpOnly cookie: any replica checks
// them, and asking for one writes nothing (an anonymous caller cannot fill the host). A challenge
// counts once: its correct answer creates a UsedChallenge named after it first (atomic across
// replicas). A signed-in ceremony's token names the user and the session's start, so it only
// completes in the session that began it. TOTP codes are single use too: the time step of each
// accepted code is written to the user's Secret with a compare-and-swap, and only later steps count.
import { createHash, randomBytes } from 'node:crypto';
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { verifyPassword } from '../credentials/passwords.js';
import { constantTimeEqual } from '../credentials/secrets-compare.js';
import { BadRequestError, ConflictError, UnauthorizedError } from '../errors.js';
import type { IdentityStores } from '../host/identity-stores.js';
import { resourceId, type PasskeyResource, type UserResource } from '../host/resources.js';
import { isPasswordUser } from '../host/users.js';
import type { AuthService } from './auth-service.js';
import type { Principal } from './principal.js';

// The WebAuthn, TOTP and QR code libraries load at their first use: together about half a second
// of the process's start, for features many installations never turn on (docs/fleet.md).
const webauthn = () => import('@simplewebauthn/server');
const totpCodes = () => import('otplib');
const qrCodes = () => import('qrcode');

/** What a challenge is for. */
export type ChallengePurpose = 'mfa-login' | 'passkey-register' | 'passkey-login' | 'passkey-step-up';

/** Where passkeys are bound: the relying party's id (a host name) and the web origin of kiteline. */
export interface RelyingParty {
  id: string;
  origin: string;
}

/** How long a challenge may be answered. */
export const CHALLENGE_SECONDS = 300;
/** How long a TOTP secret made by setup waits for its first code. */
const PENDING_SETUP_MS = 10 * 60_000;
/** Codes one step (30 s) early or late are accepted: clocks drift. */
const TOTP_TOLERANCE_SECONDS = 30;
const RECOVERY_CODES = 10;
const ISSUER = 'kiteline';
const TOTP_CODE = /^\d{6}$/;
/** Ten letters of base32, shown as two groups of five. */
const RECOVERY_CODE = /^[a-z2-7]{5}-?[a-z2-7]{5}$/;

interface ChallengeClaims {
  /** Purpose. */
  p: ChallengePurpose;
  /** The challenge (base64url); for a pending sign-in, a random id. */
  c: string;
  /** The user (signed-in ceremonies, a pending sign-in). */
  u?: number;
  /** The session's start, for a signed-in ceremony: it completes in that session only. */
  s?: number;
  /** A new passkey's name, given when its registration began (Kite's shape). */
  n?: string;
  /** The relying party the ceremony is bound to. */
  rp?: string;
  o?: string;
  /** Expiry, seconds since the epoch. */
  exp: number;
}

/** A factor's state as the user sees it. */
export interface SecondFactorStatus {
  totpEnabled: boolean;
  recoveryCodesLeft: number;
  passkeys: number;
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function newRecoveryCodes(): { codes: string[]; hashes: string[] } {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const codes = Array.from({ length: RECOVERY_CODES }, () => {
    const bytes = randomBytes(10);
    const letters = [...bytes].map((b) => alphabet[b & 31]).join('');
    return `${letters.slice(0, 5)}-${letters.slice(5)}`;
  });
  return { codes, hashes: codes.map((code) => sha256Hex(code.replace('-', ''))) };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

export class SecondFactors {
  private readonly users: IdentityStores['users'];
  private readonly totp: IdentityStores['totp'];
  private readonly passkeys: IdentityStores['passkeys'];
  private readonly used: IdentityStores['usedChallenges'];
  /** The code check running (or last queued) per user on this replica: checks of one user take turns. */
  private readonly checking = new Map<string, Promise<void>>();

  constructor(
    identity: Pick<IdentityStores, 'users' | 'totp' | 'passkeys' | 'usedChallenges'>,
    private readonly auth: Pick<AuthService, 'sign' | 'signed' | 'limiter'>,
  ) {
    this.users = identity.users;
    this.totp = identity.totp;
    this.passkeys = identity.passkeys;
    this.used = identity.usedChallenges;
  }

  // ---- state ----

  totpEnabled(user: UserResource): boolean {
    return this.totp.state(user).secret !== undefined;
  }

  status(user: UserResource): SecondFactorStatus {
    const state = this.totp.state(user);
    return {
      totpEnabled: state.secret !== undefined,
      recoveryCodesLeft: state.secret ? state.recoveryCodes.length : 0,
      passkeys: this.passkeys.ofUser(resourceId(user)!).length,
    };
  }

  /** The ways the user can prove a second factor now. */
  methods(user: UserResource): Array<'totp' | 'passkey'> {
    const status = this.status(user);
    return [...(status.totpEnabled ? (['totp'] as const) : []), ...(status.passkeys > 0 ? (['passkey'] as const) : [])];
  }

  /**
   * Kite's check before a factor is added: a password user gives their current password (400 when
   * it is wrong; failures count with the sign-in's). Users of an identity provider have none here.
   */
  async checkCurrentPassword(user: UserResource, password: string | undefined, address: string): Promise<void> {
    if (!isPasswordUser(user)) return;
    if (!password) throw new BadRequestError('current_password is required');
    const keys = [`user:${user.spec.username}`, `addr:${address}`];
    this.auth.limiter.refuseWhenLimited(keys, 'too many failed attempts');
    const hash = this.users.passwordHash(user);
    const plain = hash === undefined ? this.users.plainPassword(user) : undefined;
    const ok =
      hash !== undefined
        ? await verifyPassword(password, hash)
        : plain !== undefined && constantTimeEqual(Buffer.from(password), Buffer.from(plain));
    if (!ok) {
      this.auth.limiter.record(keys);
      throw new BadRequestError('current password is incorrect');
    }
  }

  // ---- TOTP ----

  /**
   * A new TOTP secret waiting for its first code (replacing one that waited); 409 while TOTP is on.
   * Answers the secret, its otpauth:// URI and that URI as a QR code (a PNG data URL).
   */
  async setupTotp(user: UserResource): Promise<{ secret: string; otpauthUrl: string; qrCode: string }> {
    const { generateSecret, generateURI } = await totpCodes();
    const secret = generateSecret();
    await this.totp.change(user, (state) => {
      if (state.secret) throw new ConflictError('TOTP is enabled already: disable it first');
      return { ...state, pending: secret, pendingSince: Date.now() };
    });
    const otpauthUrl = generateURI({ issuer: ISSUER, label: user.spec.username, secret });
    return { secret, otpauthUrl, qrCode: await (await qrCodes()).default.toDataURL(otpauthUrl) };
  }

  /** Turns TOTP on with the first code of the secret setup made; answers the recovery codes (shown once). */
  async enableTotp(user: UserResource, code: string, address: string): Promise<string[]> {
    const recovery = newRecoveryCodes();
    await this.withLimit(user, address, async () => {
      let failed = false;
      await this.totp.change(user, async (state) => {
        failed = false;
        if (state.secret) throw new ConflictError('TOTP is enabled already');
        if (!state.pending || Date.now() - (state.pendingSince ?? 0) > PENDING_SETUP_MS)
          throw new BadRequestError('no TOTP setup is waiting (or it is older than 10 minutes): run setup again');
        const step = await this.acceptedStep(state.pending, code, 0);
        if (step === undefined) {
          failed = true;
          return undefined;
        }
        return { secret: state.pending, recoveryCodes: recovery.hashes, lastTimeStep: step };
      });
      return !failed;
    });
    return recovery.codes;
  }

  /** Turns TOTP off (and drops the recovery codes), proved by a current code or a recovery code. */
  async disableTotp(user: UserResource, code: string, address: string): Promise<void> {
    await this.proveTotp(user, code, address, true);
    await this.totp.remove(user);
  }

  /** New recovery codes (the old ones stop), proved by a current code. */
  async renewRecoveryCodes(user: UserResource, code: string, address: string): Promise<string[]> {
    await this.proveTotp(user, code, address, false);
    const recovery = newRecoveryCodes();
    await this.totp.change(user, (state) => {
      if (!state.secret) throw new BadRequestError('TOTP is not enabled');
      return { ...state, recoveryCodes: recovery.hashes };
    });
    return recovery.codes;
  }

  /** An admin's reset: TOTP, recovery codes and every passkey of the user go. What there was. */
  async reset(user: UserResource): Promise<{ totp: boolean; passkeys: number }> {
    const totp = await this.totp.remove(user);
    const passkeys = await this.passkeys.deleteAllOf(resourceId(user)!);
    return { totp, passkeys };
  }

  /**
   * Checks a TOTP code of the user (or, with `recovery`, one of their recovery codes, which is then
   * used up): 401 when wrong, already used or TOTP is off; failures count per user and per client
   * address with the password logins' (429 over the limit). Answers which kind it was.
   */
  async proveTotp(user: UserResource, code: string, address: string, recovery: boolean): Promise<'totp' | 'recovery'> {
    const given = code.trim().toLowerCase();
    let kind: 'totp' | 'recovery' = 'totp';
    await this.withLimit(user, address, async () => {
      let ok = false;
      await this.totp.change(user, async (state) => {
        ok = false;
        if (!state.secret) return undefined;
        if (TOTP_CODE.test(given)) {
          const step = await this.acceptedStep(state.secret, given, state.lastTimeStep);
          if (step === undefined) return undefined;
          ok = true;
          return { ...state, lastTimeStep: step };
        }
        if (!recovery || !RECOVERY_CODE.test(given)) return undefined;
        const hash = sha256Hex(given.replace('-', ''));
        if (!state.recoveryCodes.includes(hash)) return undefined;
        ok = true;
        kind = 'recovery';
        return { ...state, recoveryCodes: state.recoveryCodes.filter((h) => h !== hash) };
      });
      return ok;
    });
    return kind;
  }

  /** The time step of a valid code later than `after` (replay), or undefined. */
  private async acceptedStep(secret: string, code: string, after: number): Promise<number | undefined> {
    if (!TOTP_CODE.test(code)) return undefined;
    try {
      const { verify } = await totpCodes();
      const result = await verify({
        secret,
        token: code,
        epochTolerance: TOTP_TOLERANCE_SECONDS,
        ...(after > 0 ? { afterTimeStep: after } : {}),
      });
      return result.valid && 'timeStep' in result ? result.timeStep : undefined;
    } catch {
      // otplib refuses an afterTimeStep past this replica's window (another replica's clock ran
      // ahead): no code of now can be newer, so none is accepted.
      return undefined;
    }
  }

  /**
   * Runs a code check under a rate limit of its own per user (`mfa:`, which a right password never
   * resets) and the client address's: `check` false counts a failure and is a 401. Checks of one
   * user run one at a time on this replica, so parallel guesses cannot all pass the gate before the
   * first failure is counted.
   */
  private async withLimit(user: UserResource, address: string, check: () => Promise<boolean>): Promise<void> {
    const keys = [`mfa:${user.spec.username}`, `addr:${address}`];
    const previous = this.checking.get(keys[0]) ?? Promise.resolve();
    const turn = previous.then(async () => {
      this.auth.limiter.refuseWhenLimited(keys, 'too many failed attempts');
      if (!(await check())) {
        this.auth.limiter.record(keys);
        throw new UnauthorizedError('invalid or already used code');
      }
      this.auth.limiter.reset(keys[0]);
    });
    const settled = turn.catch(() => undefined);
    this.checking.set(keys[0], settled);
    void settled.then(() => {
      if (this.checking.get(keys[0]) === settled) this.checking.delete(keys[0]);
    });
    return turn;
  }

  // ---- challenges ----

  /** A signed challenge token (the cookie's value). */
  issue(claims: Omit<ChallengeClaims, 'exp'>): string {
    const payload = Buffer.from(JSON.stringify({ ...claims, exp: nowSeconds() + CHALLENGE_SECONDS })).toString(
      'base64url',
    );
    return `${payload}.${this.auth.sign('challenge', payload)}`;
  }

  /** The claims of a well-signed, unexpired challenge token for `purpose`; 401 otherwise. */
  private open(token: string | undefined, purpose: ChallengePurpose): ChallengeClaims {
    const refused = new UnauthorizedError('no valid challenge: start again');
    if (!token || token.length > 2048) throw refused;
    const [payload, signature] = token.split('.');
    if (!payload || !signature || !this.auth.signed('challenge', payload, signature)) throw refused;
    let claims: ChallengeClaims;
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as ChallengeClaims;
    } catch {
      throw refused;
    }
    if (claims.p !== purpose || !(claims.exp > nowSeconds())) throw refused;
    return claims;
  }

  /** A signed-in ceremony's token, checked to be this session's. */
  private openFor(token: string | undefined, purpose: ChallengePurpose, principal: Principal): ChallengeClaims {
    const claims = this.open(token, purpose);
    if (claims.u !== principal.id || claims.s !== principal.sessionStartedAt)
      throw new UnauthorizedError('this challenge belongs to another session: start again');
    return claims;
  }

  /** Marks the challenge answered; 401 when it was answered before (on any replica). */
  private async consume(claims: ChallengeClaims): Promise<void> {
    const first = await this.used.use(
      sha256Hex(`${claims.p}\n${claims.c}`).slice(0, 60),
      claims.p,
      claims.u ?? 0,
      claims.exp * 1000,
    );
    if (!first) throw new UnauthorizedError('this challenge was answered already: start again');
  }

  // ---- a password sign-in's second step ----

  /** The token of a password sign-in that waits for the user's TOTP code. */
  pendingSignIn(user: UserResource): string {
    return this.issue({ p: 'mfa-login', c: randomBytes(16).toString('base64url'), u: resourceId(user)! });
  }

  /**
   * Completes a password sign-in with a TOTP or recovery code: the user (still enabled), once. A
   * wrong code keeps the sign-in pending (until the rate limit or expiry ends it).
   */
  async finishSignIn(
    token: string | undefined,
    code: string,
    address: string,
  ): Promise<{ user: UserResource; kind: 'totp' | 'recovery' }> {
    const claims = this.open(token, 'mfa-login');
    const user = this.users.byId(claims.u ?? 0);
    if (!user || user.spec.enabled === false) throw new UnauthorizedError('invalid username or password');
    const kind = await this.proveTotp(user, code, address, true);
    await this.consume(claims);
    return { user, kind };
  }

  // ---- passkeys ----

  /** Options for navigator.credentials.create() of a new passkey of the signed-in user, and its token. */
  async registrationOptions(
    user: UserResource,
    principal: Principal,
    rp: RelyingParty,
    name?: string,
  ): Promise<{ options: PublicKeyCredentialCreationOptionsJSON; token: string }> {
    const existing = this.passkeys.ofUser(resourceId(user)!);
    const { generateRegistrationOptions } = await webauthn();
    const options = await generateRegistrationOptions({
      rpName: ISSUER,
      rpID: rp.id,
      userName: user.spec.username,
      userDisplayName: user.spec.name || user.spec.username,
      userID: new TextEncoder().encode(`kiteline-user-${resourceId(user)}`),
      attestationType: 'none',
      excludeCredentials: existing.map((p) => ({ id: p.spec.credentialId, transports: p.spec.transports })),
      authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
      timeout: CHALLENGE_SECONDS * 1000,
    });
    const token = this.issue({
      p: 'passkey-register',
      c: options.challenge,
      ...(name ? { n: name } : {}),
      u: principal.id,
      s: principal.sessionStartedAt,
      rp: rp.id,
      o: rp.origin,
    });
    return { options, token };
  }

  /** Registers the passkey the authenticator made for the ceremony of `token`. */
  async register(
    user: UserResource,
    principal: Principal,
    token: string | undefined,
    response: RegistrationResponseJSON,
    name: string | undefined,
  ): Promise<PasskeyResource> {
    const claims = this.openFor(token, 'passkey-register', principal);
    let verified;
    try {
      const { verifyRegistrationResponse } = await webauthn();
      verified = await verifyRegistrationResponse({
        response,
        expectedChallenge: claims.c,
        expectedOrigin: claims.o!,
        expectedRPID: claims.rp!,
        requireUserVerification: true,
      });
    } catch (err) {
      throw new BadRequestError(`the passkey could not be verified: ${(err as Error).message}`);
    }
    if (!verified.verified) throw new BadRequestError('the passkey could not be verified');
    await this.consume(claims);
    const info = verified.registrationInfo;
    return this.passkeys.create(user, {
      name: name ?? claims.n ?? 'Passkey',
      credentialId: info.credential.id,
      publicKey: Buffer.from(info.credential.publicKey).toString('base64url'),
      counter: info.credential.counter,
      transports: (info.credential.transports ?? []).slice(0, 8),
      deviceType: info.credentialDeviceType,
      backedUp: info.credentialBackedUp,
    });
  }

  /**
   * Options for navigator.credentials.get(): without a user, for a usernameless sign-in (any
   * passkey of this kiteline); with one, a step-up with that user's passkeys.
   */
  async assertionOptions(
    rp: RelyingParty,
    principal?: Principal,
  ): Promise<{ options: PublicKeyCredentialRequestOptionsJSON; token: string }> {
    const allow = principal ? this.passkeys.ofUser(principal.id) : [];
    if (principal && allow.length === 0) throw new BadRequestError('you have no passkey: register one first');
    const { generateAuthenticationOptions } = await webauthn();
    const options = await generateAuthenticationOptions({
      rpID: rp.id,
      userVerification: 'required',
      timeout: CHALLENGE_SECONDS * 1000,
      ...(principal
        ? { allowCredentials: allow.map((p) => ({ id: p.spec.credentialId, transports: p.spec.transports })) }
        : {}),
    });
    const token = this.issue({
      p: principal ? 'passkey-step-up' : 'passkey-login',
      c: options.challenge,
      ...(principal ? { u: principal.id, s: principal.sessionStartedAt } : {}),
      rp: rp.id,
      o: rp.origin,
    });
    return { options, token };
  }

  /**
   * Checks a passkey assertion for the ceremony of `token`: a usernameless sign-in (no principal;
   * password users only: a provider's users sign in at their provider) or a step-up of the
   * principal. Answers the user.
   */
  async verifyAssertion(
    token: string | undefined,
    response: AuthenticationResponseJSON,
    address: string,
    principal?: Principal,
  ): Promise<UserResource> {
    const claims = principal ? this.openFor(token, 'passkey-step-up', principal) : this.open(token, 'passkey-login');
    // Failed answers count per client address (and user) with the password sign-in's (429 past the limit).
    const keys = [`addr:${address}`, ...(principal ? [`user:${principal.name}`] : [])];
    this.auth.limiter.refuseWhenLimited(keys, 'too many failed attempts');
    try {
      return await this.checkAssertion(claims, response, principal);
    } catch (err) {
      if (err instanceof UnauthorizedError) this.auth.limiter.record(keys);
      throw err;
    }
  }

  private async checkAssertion(
    claims: ChallengeClaims,
    response: AuthenticationResponseJSON,
    principal: Principal | undefined,
  ): Promise<UserResource> {
    const refused = new UnauthorizedError('this passkey is not accepted');
    if (typeof response?.id !== 'string') throw new BadRequestError('a passkey assertion is required');
    const passkey = this.passkeys.byCredentialId(response.id);
    if (!passkey || (principal && passkey.spec.userId !== principal.id)) throw refused;
    const user = this.users.byId(passkey.spec.userId);
    if (!user || user.spec.enabled === false || resourceId(user) !== passkey.spec.userId) throw refused;
    if (!principal && !isPasswordUser(user))
      throw new UnauthorizedError('a user of an identity provider signs in there; passkeys prove a step-up only');
    let verified;
    try {
      const { verifyAuthenticationResponse } = await webauthn();
      verified = await verifyAuthenticationResponse({
        response,
        expectedChallenge: claims.c,
        expectedOrigin: claims.o!,
        expectedRPID: claims.rp!,
        requireUserVerification: true,
        credential: {
          id: passkey.spec.credentialId,
          publicKey: Buffer.from(passkey.spec.publicKey, 'base64url'),
          counter: passkey.status?.counter ?? passkey.spec.counter ?? 0,
          transports: passkey.spec.transports,
        },
      });
    } catch {
      throw refused;
    }
    if (!verified.verified) throw refused;
    await this.consume(claims);
    await this.passkeys.recordUse(passkey, verified.authenticationInfo.newCounter);
    return user;
  }

  /** The user's passkeys, as the owner sees them. */
  list(user: UserResource): PasskeyResource[] {
    return this.passkeys.ofUser(resourceId(user)!);
  }

  rename(user: UserResource, id: string, name: string): Promise<PasskeyResource> {
    return this.passkeys.rename(this.passkeys.ofUserByName(resourceId(user)!, id), name);
  }

  async remove(user: UserResource, id: string): Promise<PasskeyResource> {
    const passkey = this.passkeys.ofUserByName(resourceId(user)!, id);
    await this.passkeys.delete(passkey);
    return passkey;
  }
}
