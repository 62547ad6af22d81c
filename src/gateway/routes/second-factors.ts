// Second factors (docs/second-factors.md): TOTP enrolment (Kite's /api/users/me/mfa/...), its
// sign-in step (POST /api/auth/login/mfa after a password sign-in that asked for it), passkeys
// (Kite's /api/users/me/passkeys... and /api/auth/passkey/login/...), an admin's reset, and the
// step-up that refreshes a session's proof before dangerous actions (POST /api/auth/step-up...).
// The decisions are auth/second-factors.ts's; these routes parse, carry the challenge cookies and
// set the session cookie.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { cookieAttributes, readCookie } from '../../auth/cookies.js';
import type { Principal } from '../../auth/principal.js';
import { CHALLENGE_SECONDS, type RelyingParty } from '../../auth/second-factors.js';
import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  HttpError,
  NotFoundError,
  SecondFactorRequiredError,
  UnauthorizedError,
} from '../../errors.js';
import { parseId } from '../input-rules.js';
import type { PasskeyResource, UserResource } from '../../host/resources.js';
import { isPasswordUser } from '../../host/users.js';
import { publicUrl } from '../base-path.js';
import { wantsSecureCookie } from '../plugins/authenticate.js';
import {
  nullable,
  idParams,
  noContent,
  objectOf,
  PUBLIC,
  ref,
  schemaOf,
  SESSION_ONLY,
  stringEnum,
  type App,
} from '../schemas.js';

const schema = schemaOf('second factors');

/** The cookie of a password sign-in waiting for its code. */
export const MFA_COOKIE = 'kiteline_mfa';
/** The cookie of a passkey ceremony (registration, sign-in, step-up). */
export const WEBAUTHN_COOKIE = 'kiteline_webauthn';
/** Adding or removing a factor of a user who has one needs a factor proved this recently. */
const CHANGE_PROOF_SECONDS = 10 * 60;

const CodeBody = Type.Object(
  {
    code: Type.String({
      minLength: 1,
      maxLength: 32,
      description: 'a 6-digit TOTP code (or a recovery code where said)',
    }),
  },
  { additionalProperties: false },
);
/**
 * A PublicKeyCredential's JSON (its toJSON()), as the browser made it, sent as the body (Kite's
 * shape); checked by @simplewebauthn/server.
 */
const credentialProperties = {
  id: Type.String({ minLength: 1, maxLength: 1400 }),
  rawId: Type.String({ maxLength: 1400 }),
  type: Type.Literal('public-key'),
  response: Type.Record(Type.String(), Type.Unknown()),
  clientExtensionResults: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  authenticatorAttachment: Type.Optional(Type.Union([Type.String({ maxLength: 32 }), Type.Null()])),
};
const PasskeyName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });
const RegisterBody = Type.Object(
  { ...credentialProperties, name: Type.Optional(PasskeyName) },
  { additionalProperties: false, description: "the new credential's toJSON(), and optionally its name" },
);
const AssertionBody = Type.Object(credentialProperties, {
  additionalProperties: false,
  description: "the assertion's toJSON() (PublicKeyCredential)",
});
/** Kite's check before a factor is added: the current password, and a code when TOTP is on. */
const AddFactorBody = nullable(
  Type.Object({
    current_password: Type.Optional(Type.String({ maxLength: 1024, description: "a password user's password" })),
    mfa_code: Type.Optional(Type.String({ maxLength: 32, description: 'a current TOTP code (a fresh proof)' })),
    name: Type.Optional(PasskeyName),
  }),
);
const RenameBody = Type.Object({ name: PasskeyName }, { additionalProperties: false });
const PasskeyParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 63, pattern: '^pk-[0-9a-f]{40}$' }) });
const StepUpQuery = Type.Object({
  cluster: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'the cluster an action is for' })),
});

const Methods = Type.Array(stringEnum(['totp', 'passkey']), { description: 'the factors the user can prove' });
const Status = objectOf({
  totpEnabled: Type.Boolean(),
  recoveryCodesLeft: Type.Integer(),
  passkeys: Type.Integer({ description: 'passkeys registered' }),
  methods: Methods,
  required: Type.Boolean({
    description: 'the admins require a second factor of password users (requireMFA), and this is one',
  }),
  enrolmentOnly: Type.Boolean({ description: 'this session may only enrol a factor until one is enabled' }),
  secondFactorAt: Type.Union([Type.Integer(), Type.Null()], {
    description: 'when this session last proved a factor (seconds since the epoch)',
  }),
});
const Setup = objectOf({
  secret: Type.String({ description: 'base32, for typing into an authenticator app' }),
  otpauth_url: Type.String({ description: 'otpauth://totp/... (what the QR code holds)' }),
  qr_code: Type.String({ description: 'the URL as a QR code: a data:image/png;base64 URL' }),
});
const RecoveryCodes = objectOf({
  recoveryCodes: Type.Array(Type.String(), { description: 'shown this once; each signs in once instead of a code' }),
});
const PasskeyView = objectOf({
  id: Type.String(),
  name: Type.String(),
  createdAt: Type.String(),
  credential_id: Type.String({ description: 'base64url' }),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
  backedUp: Type.Boolean({ description: 'synced by its provider (a multi-device passkey)' }),
});
const Options = objectOf({
  publicKey: Type.Record(Type.String(), Type.Unknown(), {
    description:
      'for PublicKeyCredential.parseCreationOptionsFromJSON / parseRequestOptionsFromJSON; the challenge is also ' +
      `bound to the ${WEBAUTHN_COOKIE} cookie set now (valid ${CHALLENGE_SECONDS} s, once)`,
  }),
});
const StepUpStatus = objectOf({
  required: Type.Boolean({ description: 'a step-up rule guards dangerous actions on the cluster for you' }),
  maxAgeSeconds: Type.Union([Type.Integer(), Type.Null()]),
  fresh: Type.Boolean({ description: 'your last proof is recent enough (or none is required)' }),
  secondFactorAt: Type.Union([Type.Integer(), Type.Null()]),
  methods: Methods,
});
const Message = ref('Message');

function passkeyView(passkey: PasskeyResource) {
  return {
    id: passkey.metadata.name,
    name: passkey.spec.name,
    createdAt: passkey.metadata.creationTimestamp ? new Date(passkey.metadata.creationTimestamp).toISOString() : '',
    credential_id: passkey.spec.credentialId,
    last_used_at: passkey.status?.lastUsedAt ?? null,
    backedUp: passkey.spec.backedUp === true,
  };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** What a password sign-in answers when the admins require a factor the user has not enrolled. */
export const SecondStep = objectOf({
  mfaSetupRequired: Type.Boolean({
    description: 'the admins require a second factor and you have none: this session may only enrol one',
  }),
});

/**
 * Ends a password sign-in (password or LDAP form) whose password was right, as Kite does:
 * - a user with TOTP sends a code with the password (`mfa_code`): right, a session with the factor
 *   proved (a recovery code signs in without counting as a proof); wrong, 401 `invalid_mfa_code`;
 *   none, 401 `mfa_required`, and the pending sign-in's cookie for `POST /api/auth/login/mfa`;
 * - while the admins require a factor (requireMFA), a password user with only passkeys signs in
 *   with one (401 `passkey_required`), and one with none gets an enrolment-only session (200);
 * - anyone else, a session (204).
 */
export async function finishPasswordSignIn(
  app: App,
  request: FastifyRequest,
  reply: FastifyReply,
  user: UserResource,
  mfaCode: string | undefined,
): Promise<FastifyReply> {
  const { auth, secondFactors, generalSettings, config } = app.services;
  const secure = wantsSecureCookie(app, request);
  if (secondFactors.totpEnabled(user)) {
    if (mfaCode !== undefined && mfaCode.trim() !== '') {
      let kind: 'totp' | 'recovery';
      try {
        kind = await secondFactors.proveTotp(user, mfaCode, request.ip, true);
      } catch (err) {
        if (err instanceof UnauthorizedError) throw new UnauthorizedError('invalid_mfa_code');
        throw err;
      }
      const proof = kind === 'totp' ? { secondFactorAt: nowSeconds() } : {};
      reply.header('set-cookie', auth.sessionSetCookie(user, secure, undefined, proof));
      return reply.code(204).send();
    }
    const pending = secondFactors.pendingSignIn(user);
    reply.header(
      'set-cookie',
      `${MFA_COOKIE}=${pending}; ${cookieAttributes(`${config.basePath}/api`, CHALLENGE_SECONDS, secure)}`,
    );
    return reply.code(401).send(
      new HttpError(401, 'SecondFactorRequired', 'mfa_required', {
        methods: ['totp'],
        next: 'send mfa_code with the password, or {code} to POST /api/auth/login/mfa',
      }).toBody(),
    );
  }
  const required = generalSettings.requireMFA() && isPasswordUser(user);
  if (required && secondFactors.methods(user).length > 0)
    throw new UnauthorizedError('passkey_required: the admins require a second factor; sign in with your passkey');
  reply.header('set-cookie', auth.sessionSetCookie(user, secure, undefined, required ? { enrolmentOnly: true } : {}));
  return required ? reply.code(200).send({ mfaSetupRequired: true }) : reply.code(204).send();
}

export default async function secondFactorRoutes(app: App) {
  const { auth, users, secondFactors, generalSettings, config } = app.services;

  /** The signed-in user (a session: second factors are a person's, not an API key's). */
  function signedIn(request: FastifyRequest): { principal: Principal; user: UserResource } {
    const principal = request.principal!;
    if (principal.kind !== 'user') throw new ForbiddenError('second factors belong to signed-in users: sign in');
    const user = users.byId(principal.id);
    if (!user) throw new NotFoundError('user not found');
    return { principal, user };
  }

  /** Where passkeys are bound: kiteline's public address (KITELINE_EXTERNAL_URL, else this request's). */
  function relyingParty(request: FastifyRequest): RelyingParty {
    let url: URL;
    try {
      url = new URL(publicUrl(request, config));
    } catch {
      throw new BadRequestError('the Host header does not name an address passkeys can be bound to');
    }
    return { id: url.hostname, origin: url.origin };
  }

  function challengeCookie(request: FastifyRequest, name: string, value: string, maxAge: number): string {
    return `${name}=${value}; ${cookieAttributes(`${config.basePath}/api`, maxAge, wantsSecureCookie(app, request))}`;
  }

  /**
   * Sets the session cookie: a new session (a sign-in), or this one again; `proved` marks a second
   * factor proved now, else the session keeps its proof. An enrolment-only session becomes whole.
   */
  function setSession(
    request: FastifyRequest,
    reply: FastifyReply,
    user: UserResource,
    how: { fresh: boolean; proved: boolean },
    extraCookies: string[] = [],
  ): void {
    const principal = request.principal;
    const startedAt = how.fresh ? undefined : principal?.sessionStartedAt;
    const secondFactorAt = how.proved ? nowSeconds() : how.fresh ? undefined : principal?.secondFactorAt;
    const cookie = auth.sessionSetCookie(user, wantsSecureCookie(app, request), startedAt, {
      ...(secondFactorAt !== undefined ? { secondFactorAt } : {}),
    });
    reply.header('set-cookie', [cookie, ...extraCookies]);
  }

  /**
   * Ends a ceremony that proved a factor now: a sign-in (`signIn`: a new session, as that user) or a
   * step-up of this session; the challenge's cookie, if any, is cleared. 204.
   */
  function proved(
    request: FastifyRequest,
    reply: FastifyReply,
    user: UserResource,
    signIn: boolean,
    cookie?: string,
    factor = true,
  ): FastifyReply {
    if (signIn) request.actor = user.spec.username;
    const cleared = cookie ? [challengeCookie(request, cookie, '', 0)] : [];
    setSession(request, reply, user, { fresh: signIn, proved: factor }, cleared);
    return reply.code(204).send();
  }

  /**
   * Kite's check before a factor is added: a password user's current password; then, for a user who
   * has a factor already, a fresh proof: a TOTP code given now (`mfa_code`) or one proved in the
   * last 10 minutes.
   */
  async function mayAddFactor(
    request: FastifyRequest,
    principal: Principal,
    user: UserResource,
    body: { current_password?: string; mfa_code?: string } | null | undefined,
  ): Promise<void> {
    await secondFactors.checkCurrentPassword(user, body?.current_password, request.ip);
    if (body?.mfa_code && secondFactors.totpEnabled(user)) {
      await secondFactors.proveTotp(user, body.mfa_code, request.ip, false);
      return;
    }
    requireRecentProof(principal, user);
  }

  /** A user who has a factor adds or removes one only with a factor proved in the last 10 minutes. */
  function requireRecentProof(principal: Principal, user: UserResource): void {
    if (secondFactors.methods(user).length === 0) return;
    const at = principal.secondFactorAt;
    if (at !== undefined && nowSeconds() - at <= CHANGE_PROOF_SECONDS) return;
    throw new SecondFactorRequiredError(
      'changing your second factors needs one proved in the last 10 minutes: POST /api/auth/step-up',
      { maxAgeSeconds: CHANGE_PROOF_SECONDS, ...(at !== undefined ? { secondFactorAt: at } : {}) },
    );
  }

  const signedInOnly = { onRequest: app.requireUser };

  // ---- TOTP ----

  app.get(
    '/api/users/me/mfa',
    {
      ...signedInOnly,
      schema: schema('Your second factors', { security: SESSION_ONLY, response: { 200: Status } }),
    },
    async (request) => {
      const { principal, user } = signedIn(request);
      const status = secondFactors.status(user);
      return {
        ...status,
        methods: secondFactors.methods(user),
        required: generalSettings.requireMFA() && isPasswordUser(user),
        enrolmentOnly: principal.enrolmentOnly === true,
        secondFactorAt: principal.secondFactorAt ?? null,
      };
    },
  );

  app.post(
    '/api/users/me/mfa/setup',
    {
      ...signedInOnly,
      schema: schema('Start enrolling TOTP', {
        description:
          'A new secret, its otpauth:// URI and QR code, waiting (10 minutes) for its first code at `enable`. ' +
          "A password user gives `current_password` (Kite's rule; wrong: 400). TOTP on already: 409. With a passkey " +
          'registered, a factor proved in the last 10 minutes is needed (401 SecondFactorRequired).',
        security: SESSION_ONLY,
        body: AddFactorBody,
        response: { 200: Setup },
      }),
    },
    async (request) => {
      const { principal, user } = signedIn(request);
      await mayAddFactor(request, principal, user, request.body);
      const setup = await secondFactors.setupTotp(user);
      return { secret: setup.secret, otpauth_url: setup.otpauthUrl, qr_code: setup.qrCode };
    },
  );

  app.post(
    '/api/users/me/mfa/enable',
    {
      ...signedInOnly,
      schema: schema('Turn TOTP on with its first code', {
        description:
          'Answers ten recovery codes, shown this once (stored hashed). An enrolment-only session becomes a whole one.',
        security: SESSION_ONLY,
        body: CodeBody,
        response: { 200: RecoveryCodes },
      }),
    },
    async (request, reply) => {
      const { user } = signedIn(request);
      const recoveryCodes = await secondFactors.enableTotp(user, request.body.code, request.ip);
      if (request.principal!.enrolmentOnly) setSession(request, reply, user, { fresh: false, proved: false });
      return { recoveryCodes };
    },
  );

  app.post(
    '/api/users/me/mfa/disable',
    {
      ...signedInOnly,
      schema: schema('Turn TOTP off', {
        description:
          'Proved by a current code or a recovery code. While the admins require a second factor (requireMFA), a ' +
          'password user without a passkey cannot turn it off (409).',
        security: SESSION_ONLY,
        body: CodeBody,
        response: { 200: Message },
      }),
    },
    async (request) => {
      const { user } = signedIn(request);
      if (generalSettings.requireMFA() && isPasswordUser(user) && secondFactors.status(user).passkeys === 0)
        throw new ConflictError('the admins require a second factor: register a passkey before turning TOTP off');
      await secondFactors.disableTotp(user, request.body.code, request.ip);
      return { message: 'TOTP is off' };
    },
  );

  app.post(
    '/api/users/me/mfa/recovery-codes',
    {
      ...signedInOnly,
      schema: schema('New recovery codes', {
        description: 'Proved by a current code; the old recovery codes stop working.',
        security: SESSION_ONLY,
        body: CodeBody,
        response: { 200: RecoveryCodes },
      }),
    },
    async (request) => {
      const { user } = signedIn(request);
      return { recoveryCodes: await secondFactors.renewRecoveryCodes(user, request.body.code, request.ip) };
    },
  );

  app.delete(
    '/api/v1/admin/users/:id/mfa',
    {
      schema: schema("Reset a user's second factors (admins)", {
        description: "Removes the user's TOTP, recovery codes and every passkey; their sessions stay.",
        params: idParams,
        response: { 200: objectOf({ totp: Type.Boolean(), passkeys: Type.Integer() }) },
      }),
    },
    async (request) => {
      const user = users.byId(parseId(request.params.id));
      if (!user) throw new NotFoundError('user not found');
      const caller = request.principal!;
      // Taking away second factors is itself guarded: not your own (turn them off yourself), and a
      // signed-in admin who has a factor proves one first (a stolen admin session alone resets nobody).
      if (caller.kind === 'user' && caller.id === parseId(request.params.id))
        throw new ConflictError('you cannot reset your own second factors: turn them off yourself');
      const admin = caller.kind === 'user' ? users.byId(caller.id) : undefined;
      if (admin) requireRecentProof(caller, admin);
      request.auditDetail = { name: user.spec.username };
      return secondFactors.reset(user);
    },
  );

  app.post(
    '/api/auth/login/mfa',
    {
      schema: schema("Finish a password sign-in with the second factor's code", {
        description:
          `After a password sign-in answered \`mfa_required\` (and set the ${MFA_COOKIE} cookie, valid ` +
          `${CHALLENGE_SECONDS} s): a current TOTP code, or a recovery code (used up). Sets the session cookie. ` +
          'A wrong or already used code: 401 (the sign-in stays pending); failures count with the password ' +
          'logins (429).',
        security: PUBLIC,
        body: CodeBody,
        response: { 204: noContent('signed in: the auth_token cookie is set') },
      }),
    },
    async (request, reply) => {
      const { user, kind } = await secondFactors.finishSignIn(
        readCookie(request.headers.cookie, MFA_COOKIE),
        request.body.code,
        request.ip,
      );
      // A recovery code signs in, but proves no fresh factor (step-up asks for a code or a passkey).
      return proved(request, reply, user, true, MFA_COOKIE, kind === 'totp');
    },
  );

  // ---- passkeys ----

  app.get(
    '/api/users/me/passkeys',
    {
      ...signedInOnly,
      schema: schema('Your passkeys', {
        security: SESSION_ONLY,
        response: { 200: objectOf({ passkeys: Type.Array(PasskeyView) }) },
      }),
    },
    async (request) => {
      const { user } = signedIn(request);
      return { passkeys: secondFactors.list(user).map(passkeyView) };
    },
  );

  app.post(
    '/api/users/me/passkeys/begin',
    {
      ...signedInOnly,
      schema: schema('Start registering a passkey', {
        description:
          'Options for navigator.credentials.create() (a discoverable credential, user verification required). ' +
          "A password user gives `current_password` (Kite's rule; wrong: 400); a user with a factor already gives " +
          '`mfa_code` or has proved one in the last 10 minutes (else 401 SecondFactorRequired).',
        security: SESSION_ONLY,
        body: AddFactorBody,
        response: { 200: Options },
      }),
    },
    async (request, reply) => {
      const { principal, user } = signedIn(request);
      await mayAddFactor(request, principal, user, request.body);
      const rp = relyingParty(request);
      const { options, token } = await secondFactors.registrationOptions(user, principal, rp, request.body?.name);
      reply.header('set-cookie', challengeCookie(request, WEBAUTHN_COOKIE, token, CHALLENGE_SECONDS));
      return { publicKey: options as unknown as Record<string, unknown> };
    },
  );

  app.post(
    '/api/users/me/passkeys/finish',
    {
      ...signedInOnly,
      schema: schema('Register the passkey the browser made', {
        description: 'In the session that began it, once. An enrolment-only session becomes a whole one.',
        security: SESSION_ONLY,
        body: RegisterBody,
        response: { 201: PasskeyView },
      }),
    },
    async (request, reply) => {
      const { principal, user } = signedIn(request);
      const passkey = await secondFactors.register(
        user,
        principal,
        readCookie(request.headers.cookie, WEBAUTHN_COOKIE),
        request.body as never,
        request.body.name,
      );
      request.auditDetail = { name: passkey.spec.name };
      const cleared = challengeCookie(request, WEBAUTHN_COOKIE, '', 0);
      if (principal.enrolmentOnly) setSession(request, reply, user, { fresh: false, proved: false }, [cleared]);
      else reply.header('set-cookie', cleared);
      return reply.code(201).send(passkeyView(passkey));
    },
  );

  app.put(
    '/api/users/me/passkeys/:id',
    {
      ...signedInOnly,
      schema: schema('Rename a passkey', {
        security: SESSION_ONLY,
        params: PasskeyParams,
        body: RenameBody,
        response: { 200: PasskeyView },
      }),
    },
    async (request) => {
      const { user } = signedIn(request);
      return passkeyView(await secondFactors.rename(user, request.params.id, request.body.name));
    },
  );

  app.delete(
    '/api/users/me/passkeys/:id',
    {
      ...signedInOnly,
      schema: schema('Delete a passkey', {
        description: 'Needs a factor proved in the last 10 minutes (401 SecondFactorRequired).',
        security: SESSION_ONLY,
        params: PasskeyParams,
        response: { 200: objectOf({ success: Type.Boolean(), message: Type.String() }) },
      }),
    },
    async (request) => {
      const { principal, user } = signedIn(request);
      requireRecentProof(principal, user);
      const removed = await secondFactors.remove(user, request.params.id);
      return { success: true, message: `passkey ${removed.spec.name} deleted` };
    },
  );

  app.post(
    '/api/auth/passkey/login/begin',
    {
      schema: schema('Start a sign-in with a passkey (no username)', {
        description: 'Options for navigator.credentials.get(); writes nothing.',
        security: PUBLIC,
        response: { 200: Options },
      }),
    },
    async (request, reply) => {
      const { options, token } = await secondFactors.assertionOptions(relyingParty(request));
      reply.header('set-cookie', challengeCookie(request, WEBAUTHN_COOKIE, token, CHALLENGE_SECONDS));
      return { publicKey: options as unknown as Record<string, unknown> };
    },
  );

  app.post(
    '/api/auth/passkey/login/finish',
    {
      schema: schema('Sign in with the passkey the browser chose', {
        description:
          'A password user whose passkey it is (user verification required) is signed in, with a second factor ' +
          'proved now. Once per challenge. Unknown passkey or failed check: 401.',
        security: PUBLIC,
        body: AssertionBody,
        response: { 204: noContent('signed in: the auth_token cookie is set') },
      }),
    },
    async (request, reply) => {
      const user = await secondFactors.verifyAssertion(
        readCookie(request.headers.cookie, WEBAUTHN_COOKIE),
        request.body as never,
        request.ip,
      );
      return proved(request, reply, user, true, WEBAUTHN_COOKIE);
    },
  );

  // ---- step-up ----

  app.get(
    '/api/auth/step-up',
    {
      ...signedInOnly,
      schema: schema('Whether an action on a cluster needs a fresh second factor first', {
        description:
          'Node terminals, pod terminals, exec and attach, the kubectl console and deletes on a cluster labelled ' +
          '`kiteline.io/step-up-minutes`, or for a holder of a role with `stepUpMinutes`, need a factor proved that ' +
          'recently; otherwise they answer 401 with reason `SecondFactorRequired`. A page asks here before opening ' +
          'a WebSocket (whose refusal it cannot read).',
        querystring: StepUpQuery,
        response: { 200: StepUpStatus },
      }),
    },
    async (request) => {
      const principal = request.principal!;
      const cluster = request.query.cluster;
      // Only about a cluster the caller may use: step-up rules of others are not told (nor that they exist).
      if (cluster !== undefined && !auth.canAccessCluster(principal, cluster))
        throw new NotFoundError(`cluster not found: ${cluster.slice(0, 63)}`);
      const minutes = cluster === undefined ? undefined : auth.stepUpMinutes(principal, cluster);
      const at = principal.secondFactorAt;
      const user = principal.kind === 'user' ? users.byId(principal.id) : undefined;
      return {
        required: minutes !== undefined,
        maxAgeSeconds: minutes === undefined ? null : minutes * 60,
        fresh: minutes === undefined || (at !== undefined && nowSeconds() - at <= minutes * 60),
        secondFactorAt: at ?? null,
        methods: user ? secondFactors.methods(user) : [],
      };
    },
  );

  app.post(
    '/api/auth/step-up',
    {
      ...signedInOnly,
      schema: schema('Prove a second factor now with a TOTP code', {
        description:
          'Renews the session cookie with a second factor proved now. Tokens minted afterwards (kubeconfig, MCP) ' +
          'carry this time; earlier ones keep theirs.',
        security: SESSION_ONLY,
        body: CodeBody,
        response: { 204: noContent('the auth_token cookie is renewed') },
      }),
    },
    async (request, reply) => {
      const { user } = signedIn(request);
      await secondFactors.proveTotp(user, request.body.code, request.ip, false);
      return proved(request, reply, user, false);
    },
  );

  app.post(
    '/api/auth/step-up/passkey/begin',
    {
      ...signedInOnly,
      schema: schema('Start proving a second factor with a passkey', {
        description: 'Options for navigator.credentials.get() with your passkeys; writes nothing.',
        security: SESSION_ONLY,
        response: { 200: Options },
      }),
    },
    async (request, reply) => {
      const { principal } = signedIn(request);
      const { options, token } = await secondFactors.assertionOptions(relyingParty(request), principal);
      reply.header('set-cookie', challengeCookie(request, WEBAUTHN_COOKIE, token, CHALLENGE_SECONDS));
      return { publicKey: options as unknown as Record<string, unknown> };
    },
  );

  app.post(
    '/api/auth/step-up/passkey/finish',
    {
      ...signedInOnly,
      schema: schema('Prove a second factor now with a passkey', {
        description: 'In the session that began it, once. Renews the session cookie with a second factor proved now.',
        security: SESSION_ONLY,
        body: AssertionBody,
        response: { 204: noContent('the auth_token cookie is renewed') },
      }),
    },
    async (request, reply) => {
      const { principal } = signedIn(request);
      const user = await secondFactors.verifyAssertion(
        readCookie(request.headers.cookie, WEBAUTHN_COOKIE),
        request.body as never,
        request.ip,
        principal,
      );
      return proved(request, reply, user, false, WEBAUTHN_COOKIE);
    },
  );
}
