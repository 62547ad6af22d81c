// Authentication for every request: resolves request.principal from `Authorization: <API key>`
// (or `Bearer <API key>`) or else the auth_token session cookie, using only the host caches, and
// sets request.actor for the request log. A token minted for a user opens one door: a kubeconfig
// token the Kubernetes API (/k8s/clusters/*), an MCP token /mcp. On any other route (matched by the
// router, so no spelling of a path gets around it) it authenticates nobody, and routes that
// require a user answer 403.
// Guards run onRequest, before any body is read or validated, so an anonymous caller gets 401,
// never a validation message. Every route under /api/v1/admin/ is for admins: this plugin guards
// the whole scope (the routes declare nothing), except the first-run routes whose schema says they
// are public (create_super_user, import), and routes whose config says `guard: 'user'` (recorded
// sessions, which a role may open to non-admins), which decide themselves. Other routes guard themselves
// with `{ onRequest: app.requireUser }` (or requireAdmin, e.g. the node terminal).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal, TokenDoor } from '../../auth/principal.js';
import { clearedSessionCookies, readCookie, SESSION_COOKIE } from '../../auth/cookies.js';
import { ForbiddenError, UnauthorizedError } from '../../errors.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import { PUBLIC } from '../schemas.js';

export type AuthHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller, or undefined. */
    principal: Principal | undefined;
    /** Why credentials that were sent did not authenticate (for the 401 message). */
    authFailure: string | undefined;
    /** A session cookie was sent but is not valid (it gets cleared on 401). */
    staleSessionCookie: boolean;
    /** A kubeconfig token was sent to a route outside the Kubernetes API (403 where a user is required). */
    tokenOutOfScope: boolean;
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

/** The admin scope: every route under it requires role admin (the onRoute hook below). */
export const ADMIN_PREFIX = '/api/v1/admin/';

/** The MCP endpoint (routes/mcp.ts). */
export const MCP_PATH = '/mcp';

/**
 * What an enrolment-only session (the admins require a second factor; the user has none yet) may
 * reach: who it is, signing out, and enrolling TOTP or a passkey. Anywhere else it authenticates
 * nobody (403 where a user is required).
 */
const ENROLMENT_ROUTES: ReadonlySet<string> = new Set([
  '/api/auth/user',
  '/api/v1/bootstrap',
  '/api/auth/logout',
  '/api/auth/refresh',
  '/api/users/me/mfa',
  '/api/users/me/mfa/setup',
  '/api/users/me/mfa/enable',
  '/api/users/me/passkeys',
  '/api/users/me/passkeys/begin',
  '/api/users/me/passkeys/finish',
]);

/** The door a routed request came in by (auth/principal.ts tokenRefusal): the route it matched decides. */
function doorOf(routeUrl: string | undefined): TokenDoor {
  // The Kubernetes API proxy (routes/k8s-proxy.ts, registered under PROXY_PREFIX); the MCP endpoint.
  if (routeUrl?.startsWith(PROXY_PREFIX)) return 'kubernetes';
  return routeUrl === MCP_PATH ? 'mcp' : 'kiteline';
}

export default fp(
  async function authenticate(app: FastifyInstance) {
    app.decorateRequest('principal', undefined);
    app.decorateRequest('authFailure', undefined);
    app.decorateRequest('staleSessionCookie', false);
    app.decorateRequest('tokenOutOfScope', false);

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
        result = auth.authenticateApiKey(header, doorOf(request.routeOptions.url));
      } else {
        const token = readCookie(request.headers.cookie, SESSION_COOKIE);
        if (!token) return;
        result = auth.authenticateSession(token);
        if ('failure' in result) request.staleSessionCookie = true;
      }
      if (
        'principal' in result &&
        result.principal.enrolmentOnly &&
        !ENROLMENT_ROUTES.has(request.routeOptions.url ?? '')
      ) {
        request.authFailure =
          'the admins require a second factor: enrol one first (POST /api/users/me/mfa/setup or a passkey)';
        request.tokenOutOfScope = true;
        request.actor = result.principal.name;
        return;
      }
      if ('principal' in result) {
        request.principal = result.principal;
        request.actor = result.principal.name;
      } else {
        request.authFailure = result.failure;
        // A token of another door: refused (403) as its holder, who the audit and the log name.
        if (result.refused) {
          request.tokenOutOfScope = true;
          request.actor = result.refused.name;
        }
      }
    }

    const requireUser: AuthHook = async (request, reply) => {
      if (request.principal) return;
      if (request.tokenOutOfScope) throw new ForbiddenError(request.authFailure!);
      if (request.staleSessionCookie)
        reply.header(
          'set-cookie',
          clearedSessionCookies(wantsSecureCookie(app, request), app.services.config.basePath),
        );
      throw new UnauthorizedError(request.authFailure ?? 'authentication required');
    };
    const requireAdmin: AuthHook = async (request, reply) => {
      await requireUser(request, reply);
      if (!app.services.auth.isAdmin(request.principal!)) throw new ForbiddenError('admin role required');
    };
    app.decorate('requireUser', requireUser);
    app.decorate('requireAdmin', requireAdmin);

    app.addHook('onRoute', (route) => {
      const security = (route.schema as { security?: unknown } | undefined)?.security;
      const isPublic = Array.isArray(security) && security.length === PUBLIC.length; // PUBLIC: no requirement
      if (!route.url.startsWith(ADMIN_PREFIX) || isPublic) return;
      const own =
        route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
      const guard = (route.config as { guard?: string } | undefined)?.guard === 'user' ? requireUser : requireAdmin;
      route.onRequest = [guard, ...own.filter((hook) => hook !== requireAdmin)];
    });
  },
  { name: 'kiteline-authenticate', dependencies: ['kiteline-request-log'] },
);
