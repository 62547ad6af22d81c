// Sessions (CONTRACT section 6): password login, logout, the current user, refresh, providers.
// The session is the HttpOnly auth_token cookie (SameSite=Lax, Secure behind https).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clearedSessionCookie, sessionCookie } from '../../auth/cookies.js';
import { userView } from '../../auth/views.js';
import { BadRequestError, UnauthorizedError } from '../../errors.js';
import { creationTime } from '../../host/cache-index.js';
import { resourceId, type UserResource } from '../../host/resources.js';
import { wantsSecureCookie } from '../plugins/authenticate.js';

export default async function authRoutes(app: FastifyInstance) {
  const { auth } = app.services;

  function setSession(request: FastifyRequest, reply: FastifyReply, user: UserResource): void {
    const token = auth.issueSession(user);
    reply.header('set-cookie', sessionCookie(token, auth.sessionTtlSeconds, wantsSecureCookie(app, request)));
  }

  app.post<{ Body: { username: string; password: string } }>(
    '/api/auth/login/password',
    {
      schema: {
        body: {
          type: 'object',
          required: ['username', 'password'],
          properties: { username: { type: 'string', maxLength: 256 }, password: { type: 'string', maxLength: 1024 } },
        },
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

  app.post('/api/auth/logout', { schema: { querystring: { type: 'object', properties: { all: { type: 'boolean' } } } } }, async (request, reply) => {
    const { all } = request.query as { all?: boolean };
    if (all) {
      // "Log out everywhere": bumps the session epoch, ending every session of this user.
      await app.requireUser(request, reply);
      const principal = request.principal!;
      if (principal.kind !== 'user') throw new BadRequestError('logout of all sessions needs a session, not an API key');
      const user = auth.users.byId(principal.id);
      if (user) await auth.users.endSessions(user);
    }
    reply.header('set-cookie', clearedSessionCookie(wantsSecureCookie(app, request)));
    return { message: 'logged out' };
  });

  app.get('/api/auth/user', { preHandler: app.requireUser }, async (request) => {
    const principal = request.principal!;
    if (principal.kind === 'user') {
      const user = auth.users.byId(principal.id);
      if (!user) throw new UnauthorizedError('user not found');
      return { user: userView(user, (name) => auth.roles.byName(name)) };
    }
    // An API key: shown as a user-like record with provider "api_key" (as Kite does).
    const key = auth.apiKeys.byId(principal.id)!;
    return {
      user: {
        id: principal.id,
        username: principal.name,
        name: principal.name,
        avatar_url: '',
        provider: 'api_key',
        enabled: true,
        createdAt: key ? creationTime(key) : null,
        lastLoginAt: key?.status?.lastUsedAt ?? null,
        roles: principal.roles
          .map((name) => ({ name, role: auth.roles.byName(name) }))
          .filter((r) => r.role)
          .map((r) => ({ id: resourceId(r.role!)!, name: r.name })),
      },
    };
  });

  app.post('/api/auth/refresh', async (request, reply) => {
    const principal = request.principal;
    if (!principal || principal.kind !== 'user' || request.headers.authorization) {
      if (request.staleSessionCookie) reply.header('set-cookie', clearedSessionCookie(wantsSecureCookie(app, request)));
      throw new UnauthorizedError(request.authFailure ?? 'no valid session to refresh');
    }
    const user = auth.users.byId(principal.id);
    if (!user) throw new UnauthorizedError('user not found');
    setSession(request, reply, user);
    return reply.code(204).send();
  });

  app.get('/api/auth/providers', async () => ({ providers: ['password'] }));
}
