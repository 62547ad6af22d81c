// Sessions (docs/auth.md): password, LDAP and OAuth (OpenID Connect) sign-in, logout, the
// current user, refresh, providers, and Kite's newest GET /api/v1/bootstrap (those at once). Every
// way of signing in ends in the same session: the HttpOnly auth_token cookie (SameSite=Lax, Secure
// behind https).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import { clearedSessionCookies, cookieAttributes, readCookie } from '../../auth/cookies.js';
import { LDAP_PROVIDER } from '../../auth/ldap.js';
import { FLOW_COOKIE, FLOW_SECONDS, SignInFailure } from '../../auth/oidc.js';
import { publicUrl } from '../base-path.js';
import { acceptEmptyJsonBody } from '../empty-json-body.js';
import { BadRequestError, ForbiddenError, UnauthorizedError } from '../../errors.js';
import { providerName } from '../../host/oauth-providers.js';
import type { UserResource } from '../../host/resources.js';
import type { Principal } from '../../auth/principal.js';
import { wantsSecureCookie } from '../plugins/authenticate.js';
import {
  noContent,
  objectOf,
  OPTIONALLY_SIGNED_IN,
  PUBLIC,
  ref,
  schemaOf,
  SESSION_ONLY,
  stringEnum,
  type App,
  type RequestWith,
  type SessionUserView,
} from '../schemas.js';
import { apiKeyCallerView, userView } from '../views/identity.js';
import { setupState } from './init.js';
import { finishPasswordSignIn, SecondStep } from './second-factors.js';
import { kubectlConsoleAvailable } from './terminal.js';

const schema = schemaOf('auth');

/** Other members are accepted and ignored, as they always have been. */
const LoginBody = Type.Object({
  username: Type.String({ maxLength: 256 }),
  password: Type.String({ maxLength: 1024 }),
  mfa_code: Type.Optional(
    Type.String({
      maxLength: 32,
      description: "Kite's second step: a TOTP (or recovery) code, sent again with the password after `mfa_required`",
    }),
  ),
});
const LoginQuery = Type.Object({
  provider: Type.String({ minLength: 1, maxLength: 256, description: "the OAuth provider's name" }),
});
/** The provider's answer (RFC 6749 4.1.2, RFC 9207 `iss`); anything else it adds is passed on too. */
const CallbackQuery = Type.Object({
  code: Type.Optional(Type.String({ maxLength: 4096 })),
  state: Type.Optional(Type.String({ maxLength: 1024 })),
  iss: Type.Optional(Type.String({ maxLength: 2048 })),
  error: Type.Optional(Type.String({ maxLength: 1024 })),
  error_description: Type.Optional(Type.String({ maxLength: 4096 })),
});
/** What the two password sign-ins (the user store's, the LDAP directory's) take and answer. */
const passwordLogin = {
  security: PUBLIC,
  body: LoginBody,
  response: {
    200: SecondStep,
    204: noContent('logged in: the auth_token cookie is set'),
  },
};
const LogoutQuery = Type.Object({
  all: Type.Optional(Type.Boolean({ description: "end every session of the caller's user (needs a session)" })),
});

export default async function authRoutes(app: App) {
  const { auth, users, roles, apiKeys, oauthProviders, generalSettings, oidc, config, secondFactors } = app.services;
  // Kite's UI posts refresh and logout with a JSON content type and no body.
  acceptEmptyJsonBody(app);

  /**
   * A sign-in with a username and a password, checked by `login` (the user store, or the LDAP
   * directory): a new session.
   */
  async function signIn(
    request: RequestWith<{ body: Static<typeof LoginBody> }>,
    reply: FastifyReply,
    login: (username: string, password: string, ip: string) => Promise<UserResource>,
  ) {
    const { username, password } = request.body;
    if (username === '' || password === '') throw new BadRequestError('username and password are required');
    const user = await login(username, password, request.ip);
    request.actor = user.spec.username;
    return finishPasswordSignIn(app, request, reply, user, request.body.mfa_code);
  }

  const loginSchema = schema('Log in with a password', {
    description:
      'Sets the HttpOnly `auth_token` session cookie. Unknown user, wrong password and a disabled user ' +
      'give the same 401; repeated failures (per username and per client address) 429. With an LDAP ' +
      'directory configured, a username that is no password user is checked against the directory ' +
      '(as `POST /api/auth/login/ldap`).',
    ...passwordLogin,
  });
  app.post('/api/auth/login/password', { schema: loginSchema }, async (request, reply) =>
    signIn(request, reply, (username, password, ip) => auth.login(username, password, ip)),
  );

  const logoutSchema = schema('Log out (clears the session cookie)', {
    security: OPTIONALLY_SIGNED_IN,
    querystring: LogoutQuery,
    response: { 200: ref('Message') },
  });
  app.post('/api/auth/logout', { schema: logoutSchema }, async (request, reply) => {
    const { all } = request.query;
    if (all) {
      // "Log out everywhere": bumps the session epoch, ending every session of this user.
      await app.requireUser(request, reply);
      const principal = request.principal!;
      if (principal.kind !== 'user')
        throw new BadRequestError('logout of all sessions needs a session, not an API key');
      await users.endSessions(principal.id);
    }
    reply.header('set-cookie', clearedSessionCookies(wantsSecureCookie(app, request), app.services.config.basePath));
    return { message: 'logged out' };
  });

  const CallerAnswer = objectOf({
    user: ref('SessionUser'),
    hasGlobalSidebarPreference: Type.Boolean(),
    globalSidebarPreference: Type.String({ description: 'the global sidebar layout (JSON text), "" when none' }),
  });
  /** The caller as GET /api/auth/user (and the bootstrap answer) shows it. */
  function callerAnswer(principal: Principal): Static<typeof CallerAnswer> {
    let user: SessionUserView;
    if (principal.kind === 'user') {
      const found = users.byId(principal.id);
      if (!found) throw new UnauthorizedError('user not found');
      user = {
        ...userView(found, (name) => roles.byName(name), auth.effectiveRoles(found)),
        mfa_enabled: secondFactors.totpEnabled(found),
      };
    } else {
      // An API key: shown as a user-like record with provider "api_key" (as Kite does).
      user = apiKeyCallerView(principal, apiKeys.byId(principal.id), (name) => roles.byName(name));
    }
    const global = generalSettings.globalSidebarPreference();
    if (global !== '' && (!auth.isAdmin(principal) || user.sidebar_preference.trim() === ''))
      user = { ...user, sidebar_preference: global };
    return { user, hasGlobalSidebarPreference: global !== '', globalSidebarPreference: global };
  }
  const userSchema = schema('The caller', {
    description:
      "With a global sidebar set (Kite's, by an admin), `user.sidebar_preference` is that layout for everyone " +
      'but an admin who has one of their own.',
    response: { 200: CallerAnswer },
  });
  app.get('/api/auth/user', { onRequest: app.requireUser, schema: userSchema }, async (request) =>
    callerAnswer(request.principal!),
  );

  const refreshSchema = schema('Renew the session cookie while the session is valid', {
    description:
      'Never past the absolute session lifetime (KITELINE_SESSION_MAX_LIFETIME) counted from the login: ' +
      'then 401, log in again.',
    security: SESSION_ONLY,
    response: { 204: noContent('the auth_token cookie is renewed') },
  });
  app.post('/api/auth/refresh', { schema: refreshSchema }, async (request, reply) => {
    const principal = request.principal;
    if (!principal || principal.kind !== 'user' || request.headers.authorization) {
      if (request.staleSessionCookie)
        reply.header(
          'set-cookie',
          clearedSessionCookies(wantsSecureCookie(app, request), app.services.config.basePath),
        );
      throw new UnauthorizedError(request.authFailure ?? 'no valid session to refresh');
    }
    const user = users.byId(principal.id);
    if (!user) throw new UnauthorizedError('user not found');
    reply.header(
      'set-cookie',
      auth.sessionSetCookie(user, wantsSecureCookie(app, request), principal.sessionStartedAt, {
        ...(principal.secondFactorAt !== undefined ? { secondFactorAt: principal.secondFactorAt } : {}),
        ...(principal.enrolmentOnly ? { enrolmentOnly: true } : {}),
      }),
    );
    return reply.code(204).send();
  });

  const ldapSchema = schema('Log in with the LDAP directory', {
    description:
      'Bind-search-bind against the configured directory; sets the same `auth_token` session cookie as a ' +
      'password login. Unknown user, wrong password and a disabled user give the same 401; failures count ' +
      'with password logins (429); a user holding no role, directly or by group: 403; LDAP not configured: 404.',
    ...passwordLogin,
  });
  app.post('/api/auth/login/ldap', { schema: ldapSchema }, async (request, reply) => {
    return signIn(request, reply, (username, password, ip) => auth.loginLdap(username, password, ip));
  });

  const Providers = objectOf({
    providers: Type.Array(Type.String()),
    credentialProviders: Type.Array(stringEnum(['password', 'ldap'])),
    oauthProviders: Type.Array(Type.String()),
  });
  // `providers` never holds "ldap": Kite's login page of before shows every other entry as an OAuth
  // button. Its password form signs directory users in (the password login falls back to the
  // directory), also while password login is disabled. The newer page reads the other two lists.
  function providersAnswer(): Static<typeof Providers> {
    const oauth = oauthProviders.enabled().map(providerName);
    const passwordLogin = !generalSettings.passwordLoginDisabled();
    const directory = auth.ldap.configured;
    return {
      providers: [...oauth, ...(passwordLogin || directory ? ['password'] : [])],
      credentialProviders: [
        ...(passwordLogin ? (['password'] as const) : []),
        ...(directory ? (['ldap'] as const) : []),
      ],
      oauthProviders: oauth,
    };
  }
  const providersSchema = schema('The login providers', {
    description:
      'The enabled OAuth providers by name (each signs in with `GET /api/auth/login?provider=`), then `password` ' +
      "while the password form signs anyone in (with an LDAP directory, it signs the directory's users in too). " +
      "`credentialProviders` and `oauthProviders` (Kite's newer login page): the forms, `password` (unless " +
      'password login is disabled) and `ldap` (POST /api/auth/login/<name>), and the OAuth providers.',
    security: PUBLIC,
    response: { 200: Providers },
  });
  app.get('/api/auth/providers', { schema: providersSchema }, async () => providersAnswer());

  const bootstrapSchema = schemaOf('setup')("What Kite's newest UI needs before its first page", {
    description:
      'One answer instead of `init_check`, `auth/providers` and `auth/user`: the set-up state, the login ' +
      'providers, and for a signed-in caller that caller (as `GET /api/auth/user`) and what this kiteline ' +
      'offers them. Anyone may ask; an anonymous caller (or a stale cookie) gets `user` and `capabilities` null.',
    security: OPTIONALLY_SIGNED_IN,
    response: {
      200: objectOf({
        initialized: Type.Boolean({ description: 'as init_check' }),
        step: Type.Integer({ description: 'as init_check: 0 no user yet, 1 a user and no cluster, 2 both' }),
        providers: Providers,
        auth: objectOf(
          {
            ...Providers.properties,
            loginPrompt: Type.String(),
            mfaEnabled: Type.Boolean({ description: 'users may enrol TOTP (always, here)' }),
            passkeyLoginEnabled: Type.Boolean({ description: 'the login page offers passkeys (always, here)' }),
          },
          "Kite's newest login page reads its providers and second factors here",
        ),
        user: Type.Union([CallerAnswer, Type.Null()]),
        capabilities: Type.Union([
          objectOf({
            ai: Type.Boolean({ description: 'an AI provider is configured (GET /api/v1/ai/status)' }),
            kubeconfigTokens: Type.Boolean({ description: 'POST /api/v1/kubeconfig mints kubectl tokens' }),
            kubectlConsole: Type.Boolean({
              description: 'the kubectl console is on (kubectlEnabled, and an https KITELINE_EXTERNAL_URL)',
            }),
          }),
          Type.Null(),
        ]),
      }),
    },
  });
  app.get('/api/v1/bootstrap', { schema: bootstrapSchema }, async (request) => {
    const principal = request.principal;
    return {
      ...setupState(app.services),
      providers: providersAnswer(),
      auth: { ...providersAnswer(), loginPrompt: '', mfaEnabled: true, passkeyLoginEnabled: true },
      user: principal ? callerAnswer(principal) : null,
      capabilities: principal
        ? {
            ai: generalSettings.aiStatus().enabled,
            kubeconfigTokens: true,
            kubectlConsole: kubectlConsoleAvailable(app.services, principal),
          }
        : null,
    };
  });

  /** Where the provider sends the browser back: kiteline's public URL (KITELINE_EXTERNAL_URL, else this request's). */
  function callbackUrl(request: FastifyRequest): string {
    return `${publicUrl(request, config)}/api/auth/callback`;
  }

  function flowCookie(value: string, maxAge: number, secure: boolean): string {
    return `${FLOW_COOKIE}=${value}; ${cookieAttributes(`${config.basePath}/api/auth/callback`, maxAge, secure)}`;
  }

  app.get(
    '/api/auth/login',
    {
      schema: schema('Start a sign-in with an OAuth (OpenID Connect) provider', {
        description:
          "Answers the provider's authorization URL (code flow with PKCE, state and nonce) and sets a short-lived " +
          'HttpOnly cookie holding the flow, encrypted; the browser goes to `auth_url`. Unknown or disabled ' +
          'provider: 400.',
        security: PUBLIC,
        querystring: LoginQuery,
        response: { 200: objectOf({ auth_url: Type.String(), provider: Type.String() }) },
      }),
    },
    async (request, reply) => {
      const name = request.query.provider;
      if (name === LDAP_PROVIDER || name === 'password')
        throw new BadRequestError(`${name} signs in with POST /api/auth/login/${name}`);
      const started = await oidc.start(name, callbackUrl(request));
      if (!started) throw new BadRequestError(`unknown provider: ${name.slice(0, 63)}`);
      reply.header('set-cookie', flowCookie(started.flow, FLOW_SECONDS, wantsSecureCookie(app, request)));
      return { auth_url: started.authUrl, provider: name };
    },
  );

  app.get(
    '/api/auth/callback',
    {
      schema: schema('Where the OAuth provider sends the browser back', {
        description:
          'Redeems the code, validates the ID token, creates or updates the user (`provider` = the provider), ' +
          'sets the `auth_token` session cookie and redirects to `/` (under the base path, if any). Any failure ' +
          "redirects to `/login?error=<code>` (Kite's login page codes: callback_failed, token_exchange_failed, " +
          'user_info_failed, user_disabled, callback_error, insufficient_permissions).',
        security: PUBLIC,
        querystring: CallbackQuery,
        response: { 302: noContent('to / (signed in) or /login?error=<code>') },
      }),
    },
    async (request, reply) => {
      const secure = wantsSecureCookie(app, request);
      const cleared = flowCookie('', 0, secure);
      const query: Record<string, string | undefined> = {};
      for (const [name, value] of Object.entries(request.query as Record<string, unknown>))
        if (typeof value === 'string') query[name] = value;
      let user: UserResource;
      try {
        const identity = await oidc.finish(query, readCookie(request.headers.cookie, FLOW_COOKIE));
        try {
          user = await auth.signInExternal(identity);
        } catch (err) {
          if (err instanceof ForbiddenError)
            throw new SignInFailure('insufficient_permissions', err.message, identity.provider, identity.username);
          if (err instanceof UnauthorizedError)
            throw new SignInFailure(
              err.message === 'user is disabled' ? 'user_disabled' : 'callback_error',
              err.message,
              identity.provider,
              identity.username,
            );
          throw err;
        }
      } catch (err) {
        if (!(err instanceof SignInFailure)) throw err;
        request.log.info({ provider: err.provider, code: err.code, reason: err.message }, 'OAuth sign-in failed');
        const target = new URLSearchParams({ error: err.code, reason: err.reason ?? err.message });
        if (err.provider) target.set('provider', err.provider);
        if (err.user) target.set('user', err.user);
        reply.header('set-cookie', cleared);
        return reply.redirect(`${config.basePath}/login?${target.toString()}`, 302);
      }
      request.actor = user.spec.username;
      reply.header('set-cookie', [cleared, auth.sessionSetCookie(user, secure)]);
      return reply.redirect(`${config.basePath}/`, 302);
    },
  );
}
