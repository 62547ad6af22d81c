// A request signed in by the session cookie that can change something (any method but GET, HEAD and
// OPTIONS) or opens a WebSocket must come from kiteline's own origin. A page elsewhere can make the
// browser send both with the user's cookie: a form posts text/plain or urlencoded bodies with no
// preflight (cordon, uncordon and logout of all sessions have no body to reject), and a WebSocket
// is not bound by the same-origin policy at all. SameSite=Lax stops other sites, but not a sibling
// subdomain (same site, another origin). So, as Go's net/http CrossOriginProtection does:
// Sec-Fetch-Site, when the browser sends it, must be same-origin or none (typed by the user), and
// Origin, when sent, must name the host the request was sent to or the configured external URL.
// Clients that are not browsers send neither. API keys (Authorization, which no other site can make
// a browser send) are not checked. It runs on every request right after authentication, so the
// refusal comes before any route does anything (an exec opened, a node terminal pod created).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ForbiddenError } from '../../errors.js';

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Sec-Fetch-Site of a request one of kiteline's own pages made, or the user typed. */
const OWN_FETCH_SITES: ReadonlySet<string> = new Set(['same-origin', 'none']);

/** Whether the request was authenticated by the session cookie (no API key in Authorization). */
function signedInByCookie(request: FastifyRequest): boolean {
  const header = request.headers.authorization;
  return request.principal !== undefined && !(typeof header === 'string' && header.trim() !== '');
}

/** Throws 403 unless the request comes from kiteline's own origin (or from no browser page at all). */
export function requireOwnOrigin(request: FastifyRequest): void {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string' && !OWN_FETCH_SITES.has(site.toLowerCase())) {
    throw new ForbiddenError(
      `a request signed in by cookie must come from kiteline's own pages (Sec-Fetch-Site is ${site.slice(0, 32)})`,
    );
  }
  const origin = request.headers.origin;
  if (origin === undefined) return;
  const allowed = new Set([`http://${request.host}`, `https://${request.host}`]);
  const external = request.server.services.config.externalUrl;
  if (external) allowed.add(new URL(external).origin);
  if (!allowed.has(origin)) {
    throw new ForbiddenError(
      `a request signed in by cookie must come from kiteline's own origin, not ${origin.slice(0, 256)}`,
    );
  }
}

export default fp(
  async function sameOrigin(app: FastifyInstance) {
    app.addHook('onRequest', (request, _reply, done) => {
      const sideEffects = !SAFE_METHODS.has(request.method) || request.headers.upgrade !== undefined;
      if (!sideEffects || !signedInByCookie(request)) return done();
      try {
        requireOwnOrigin(request);
        done();
      } catch (err) {
        done(err as Error);
      }
    });
  },
  { name: 'kiteline-same-origin', dependencies: ['kiteline-authenticate'] },
);
