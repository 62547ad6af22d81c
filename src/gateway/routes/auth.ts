// Sessions (CONTRACT section 6): password login, logout, the current user, refresh, providers.
// The session is the HttpOnly auth_token cookie (SameSite=Lax, Secure behind https).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { clearedSessionCookie } from '../../auth/cookies.js';
import { BadRequestError, UnauthorizedError } from '../../errors.js';
import type { UserResource } from '../../host/resources.js';
import { wantsSecureCookie } from '../plugins/authenticate.js';
import {
  noContent,
  objectOf,
  openObject,
  OPTIONALLY_SIGNED_IN,
  PUBLIC,
  ref,
  replies,
  SESSION_ONLY,
  type App,
} from '../schemas.js';
import { apiKeyCallerView, userView } from '../views/identity.js';

const tags = ['auth'];

/** Other members are accepted and ignored, as they always have been. */
const LoginBody = Type.Object({
  username: Type.String({ maxLength: 256 }),
  password: Type.String({ maxLength: 1024 }),
});
const LogoutQuery = Type.Object({
  all: Type.Optional(Type.Boolean({ description: "end every session of the caller's user (needs a session)" })),
});

export default async function authRoutes(app: App) {
  const { auth, users, roles, apiKeys } = app.services;

  /** Sets the session cookie: a new session, or the refreshed one that started at `startedAt`. */
  function setSession(request: FastifyRequest, reply: FastifyReply, user: UserResource, startedAt?: number): void {
    reply.header('set-cookie', auth.sessionSetCookie(user, wantsSecureCookie(app, request), startedAt));
  }

  app.post(
    '/api/auth/login/password',
    {
      schema: {
        tags,
        summary: 'Log in with a password',
        description:
          'Sets the HttpOnly `auth_token` session cookie. Unknown user, wrong password and a disabled user ' +
          'give the same 401; repeated failures (per username and per client address) 429.',
        security: PUBLIC,
        body: LoginBody,
        response: replies({ 204: noContent('logged in: the auth_token cookie is set') }),
      },
    },
    async (request, reply) => {
      const { username, password } = request.body;
      if (username === '' || password === '') throw new BadRequestError('username and password are required');
      const user = await auth.login(username, password, request.ip);
      request.actor = user.spec.username;
      setSession(request, reply, user);
      return reply.code(204).send();
    },
  );

  const logoutSchema = {
    tags,
    summary: 'Log out (clears the session cookie)',
    security: OPTIONALLY_SIGNED_IN,
    querystring: LogoutQuery,
    response: replies({ 200: ref('Message') }),
  };
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
    reply.header('set-cookie', clearedSessionCookie(wantsSecureCookie(app, request)));
    return { message: 'logged out' };
  });

  const userSchema = {
    tags,
    summary: 'The caller',
    response: replies({ 200: objectOf({ user: ref('SessionUser') }) }),
  };
  app.get('/api/auth/user', { onRequest: app.requireUser, schema: userSchema }, async (request) => {
    const principal = request.principal!;
    if (principal.kind === 'user') {
      const user = users.byId(principal.id);
      if (!user) throw new UnauthorizedError('user not found');
      return { user: userView(user, (name) => roles.byName(name)) };
    }
    // An API key: shown as a user-like record with provider "api_key" (as Kite does).
    return { user: apiKeyCallerView(principal, apiKeys.byId(principal.id), (name) => roles.byName(name)) };
  });

  const refreshSchema = {
    tags,
    summary: 'Renew the session cookie while the session is valid',
    description:
      'Never past the absolute session lifetime (KITELINE_SESSION_MAX_LIFETIME) counted from the login: ' +
      'then 401, log in again.',
    security: SESSION_ONLY,
    response: replies({ 204: noContent('the auth_token cookie is renewed') }),
  };
  app.post('/api/auth/refresh', { schema: refreshSchema }, async (request, reply) => {
    const principal = request.principal;
    if (!principal || principal.kind !== 'user' || request.headers.authorization) {
      if (request.staleSessionCookie) reply.header('set-cookie', clearedSessionCookie(wantsSecureCookie(app, request)));
      throw new UnauthorizedError(request.authFailure ?? 'no valid session to refresh');
    }
    const user = users.byId(principal.id);
    if (!user) throw new UnauthorizedError('user not found');
    setSession(request, reply, user, principal.sessionStartedAt);
    return reply.code(204).send();
  });

  const providersSchema = {
    tags,
    summary: 'The login providers',
    security: PUBLIC,
    response: replies({ 200: objectOf({ providers: Type.Array(Type.String()) }) }),
  };
  app.get('/api/auth/providers', { schema: providersSchema }, async () => ({ providers: ['password'] }));

  // Kite's Settings → OAuth tab and its set-up hint read the configured OAuth providers. kiteline
  // signs in with passwords and API keys only (OIDC and LDAP are not built yet): none is configured.
  app.get(
    '/api/v1/admin/oauth-providers/',
    {
      onRequest: app.requireAdmin,
      schema: {
        tags,
        summary: "The configured OAuth providers (Kite's shape): none, kiteline has no OAuth sign-in yet",
        response: replies({ 200: objectOf({ providers: Type.Array(openObject()) }) }),
      },
    },
    async () => ({ providers: [] }),
  );
}
