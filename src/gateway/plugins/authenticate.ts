// Authentication for every request: resolves request.principal from `Authorization: <API key>`
// (or `Bearer <API key>`) or else the auth_token session cookie, using only the host caches, and
// sets request.actor for the request log. Route modules guard themselves with
// `{ onRequest: app.requireUser }` or `{ onRequest: app.requireAdmin }` (before any body is read or
// validated, so an anonymous caller gets 401, never a validation message).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal } from '../../auth/principal.js';
import { clearedSessionCookie, readCookie, SESSION_COOKIE } from '../../auth/cookies.js';
import { ForbiddenError, UnauthorizedError } from '../../errors.js';

export type AuthHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller, or undefined. */
    principal: Principal | undefined;
    /** Why credentials that were sent did not authenticate (for the 401 message). */
    authFailure: string | undefined;
    /** A session cookie was sent but is not valid (it gets cleared on 401). */
    staleSessionCookie: boolean;
  }
  interface FastifyInstance {
    /** Route hook (onRequest): 401 unless the request carries a valid session or API key. */
    requireUser: AuthHook;
    /** Route hook (onRequest): 401 without credentials, 403 "admin role required" without role admin. */
    requireAdmin: AuthHook;
  }
}

/** Secure cookies when configured or when the request came over https (x-forwarded-proto). */
export function wantsSecureCookie(app: FastifyInstance, request: FastifyRequest): boolean {
  return app.services.config.secureCookies || request.protocol === 'https';
}

export default fp(
  async function authenticate(app: FastifyInstance) {
    app.decorateRequest('principal', undefined);
    app.decorateRequest('authFailure', undefined);
    app.decorateRequest('staleSessionCookie', false);

    // Callback style (it runs for every request, and reads only the caches): no promise per request.
    app.addHook('onRequest', (request, _reply, done) => {
      authenticateRequest(request);
      done();
    });
    function authenticateRequest(request: FastifyRequest): void {
      const auth = app.services.auth;
      const header = request.headers.authorization;
      let result;
      if (typeof header === 'string' && header.trim() !== '') {
        result = auth.authenticateApiKey(header);
      } else {
        const token = readCookie(request.headers.cookie, SESSION_COOKIE);
        if (!token) return;
        result = auth.authenticateSession(token);
        if ('failure' in result) request.staleSessionCookie = true;
      }
      if ('principal' in result) {
        request.principal = result.principal;
        request.actor = result.principal.name;
      } else {
        request.authFailure = result.failure;
      }
    }

    const requireUser: AuthHook = async (request, reply) => {
      if (request.principal) return;
      if (request.staleSessionCookie) reply.header('set-cookie', clearedSessionCookie(wantsSecureCookie(app, request)));
      throw new UnauthorizedError(request.authFailure ?? 'authentication required');
    };
    const requireAdmin: AuthHook = async (request, reply) => {
      await requireUser(request, reply);
      if (!app.services.auth.isAdmin(request.principal!)) throw new ForbiddenError('admin role required');
    };
    app.decorate('requireUser', requireUser);
    app.decorate('requireAdmin', requireAdmin);
  },
  { name: 'kiteline-authenticate', dependencies: ['kiteline-request-log'] },
);
