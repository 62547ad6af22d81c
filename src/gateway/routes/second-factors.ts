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
import { ConflictError, ForbiddenError, NotFoundError, SecondFactorRequiredError } from '../../errors.js';
import { parseId } from '../input-rules.js';
import type { PasskeyResource, UserResource } from '../../host/resources.js';
import { isPasswordUser } from '../../host/users.js';
import { publicUrl } from '../base-path.js';
import { wantsSecureCookie } from '../plugins/authenticate.js';
import {
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
/** A PublicKeyCredential's JSON (its toJSON()), as the browser made it; checked by @simplewebauthn/server. */
const Credential = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 1400 }),
    rawId: Type.String({ maxLength: 1400 }),
    type: Type.Literal('public-key'),
    response: Type.Record(Type.String(), Type.Unknown()),
    clientExtensionResults: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    authenticatorAttachment: Type.Optional(Type.Union([Type.String({ maxLength: 32 }), Type.Null()])),
  },
  { description: "the credential's toJSON() (PublicKeyCredential)" },
);
const PasskeyName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });
const RegisterBody = Type.Object(
  { name: Type.Optional(PasskeyName), credential: Credential },
  { additionalProperties: false },
);
const AssertionBody = Type.Object({ credential: Credential }, { additionalProperties: false });
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
  otpauthUrl: Type.String({ description: 'otpauth://totp/... (what the QR code holds)' }),
  qrCode: Type.String({ description: 'the URL as a QR code: a data:image/png;base64 URL' }),
});
const RecoveryCodes = objectOf({
  recoveryCodes: Type.Array(Type.String(), { description: 'shown this once; each signs in once instead of a code' }),
});
const PasskeyView = objectOf({
  id: Type.String(),
  name: Type.String(),
  createdAt: Type.String(),
  lastUsedAt: Type.Union([Type.String(), Type.Null()]),
  backedUp: Type.Boolean({ description: 'synced by its provider (a multi-device passkey)' }),
});
const Options = objectOf({
  options: Type.Record(Type.String(), Type.Unknown(), {
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
    lastUsedAt: passkey.status?.lastUsedAt ?? null,
    backedUp: passkey.spec.backedUp === true,
  };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** What a password sign-in answers when it needs a second step. */
export const SecondStep = objectOf({
  mfaRequired: Type.Optional(
    Type.Boolean({
      description: `true: send a TOTP or recovery code to POST /api/auth/login/mfa (cookie ${MFA_COOKIE})`,
    }),
  ),
  mfaSetupRequired: Type.Optional(
    Type.Boolean({
      description: 'true: the admins require a second factor and you have none: this session may only enrol one',
    }),
  ),
  methods: Type.Optional(Methods),
});

/**
 * Ends a password sign-in (password or LDAP form) whose password was right: a user with TOTP gets the
 * pending sign-in's cookie and `mfaRequired` (no session yet); a password user without any factor
 * while the admins require one gets an enrolment-only session and `mfaSetupRequired`; anyone else a
 * session (204).
 */
export async function finishPasswordSignIn(
  app: App,
  request: FastifyRequest,
  reply: FastifyReply,
  user: UserResource,
): Promise<FastifyReply> {
  const { auth, secondFactors, generalSettings, config } = app.services;
  const secure = wantsSecureCookie(app, request);
  if (secondFactors.totpEnabled(user)) {
    const pending = secondFactors.pendingSignIn(user);
    reply.header(
      'set-cookie',
      `${MFA_COOKIE}=${pending}; ${cookieAttributes(`${config.basePath}/api`, CHALLENGE_SECONDS, secure)}`,
    );
    return reply.code(200).send({ mfaRequired: true, methods: ['totp'] });
  }
  const enrol = generalSettings.requireMFA() && isPasswordUser(user) && secondFactors.methods(user).length === 0;
  reply.header('set-cookie', auth.sessionSetCookie(user, secure, undefined, enrol ? { enrolmentOnly: true } : {}));
  return enrol ? reply.code(200).send({ mfaSetupRequired: true }) : reply.code(204).send();
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
    const url = new URL(publicUrl(request, config));
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
  ): FastifyReply {
    if (signIn) request.actor = user.spec.username;
    const cleared = cookie ? [challengeCookie(request, cookie, '', 0)] : [];
    setSession(request, reply, user, { fresh: signIn, proved: true }, cleared);
    return reply.code(204).send();
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
          'TOTP on already: 409. With a passkey registered, a factor proved in the last 10 minutes is needed (401 ' +
          'SecondFactorRequired).',
        security: SESSION_ONLY,
        response: { 200: Setup },
      }),
    },
    async (request) => {
      const { principal, user } = signedIn(request);
      requireRecentProof(principal, user);
      return secondFactors.setupTotp(user);
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
      request.auditDetail = { name: user.spec.username };
      return secondFactors.reset(user);
    },
  );

  app.post(
    '/api/auth/login/mfa',
    {
      schema: schema("Finish a password sign-in with the second factor's code", {
        description:
          `After a password sign-in answered \`mfaRequired\` (and set the ${MFA_COOKIE} cookie, valid ` +
          `${CHALLENGE_SECONDS} s): a current TOTP code, or a recovery code (used up). Sets the session cookie. ` +
          'A wrong or already used code: 401 (the sign-in stays pending); failures count with the password ' +
          'logins (429).',
        security: PUBLIC,
        body: CodeBody,
        response: { 204: noContent('signed in: the auth_token cookie is set') },
      }),
    },
    async (request, reply) => {
      const user = await secondFactors.finishSignIn(
        readCookie(request.headers.cookie, MFA_COOKIE),
        request.body.code,
        request.ip,
      );
      return proved(request, reply, user, true, MFA_COOKIE);
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
    '/api/users/me/passkeys/register/begin',
    {
      ...signedInOnly,
      schema: schema('Start registering a passkey', {
        description:
          'Options for navigator.credentials.create() (a discoverable credential, user verification required). ' +
          'A user with a factor already needs one proved in the last 10 minutes (401 SecondFactorRequired).',
        security: SESSION_ONLY,
        response: { 200: Options },
      }),
    },
    async (request, reply) => {
      const { principal, user } = signedIn(request);
      requireRecentProof(principal, user);
      const { options, token } = await secondFactors.registrationOptions(user, principal, relyingParty(request));
      reply.header('set-cookie', challengeCookie(request, WEBAUTHN_COOKIE, token, CHALLENGE_SECONDS));
      return { options: options as unknown as Record<string, unknown> };
    },
  );

  app.post(
    '/api/users/me/passkeys/register/finish',
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
        request.body.credential as never,
        request.body.name ?? 'Passkey',
      );
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
        response: { 200: Message },
      }),
    },
    async (request) => {
      const { principal, user } = signedIn(request);
      requireRecentProof(principal, user);
      const removed = await secondFactors.remove(user, request.params.id);
      return { message: `passkey ${removed.spec.name} deleted` };
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
      return { options: options as unknown as Record<string, unknown> };
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
        request.body.credential as never,
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
      return { options: options as unknown as Record<string, unknown> };
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
        request.body.credential as never,
        request.ip,
        principal,
      );
      return proved(request, reply, user, false, WEBAUTHN_COOKIE);
    },
  );
}
