// POST /api/v1/kubeconfig: a kubeconfig for kubectl, client libraries and GitOps tools, with one
// context per cluster the caller may use (named after the cluster, the default cluster current),
// each pointing at <external URL>/k8s/clusters/<cluster>, and a freshly minted token: an API key
// owned by the signed-in user, with the user's roles, expiring after the requested or default
// lifetime (at most the configured maximum). It is listed and revoked like any API key, and stops
// working the moment its user is disabled or deleted or loses one of those roles
// (AuthService.authenticateApiKey). A kubeconfig token may ask for a fresh one, never outliving
// itself. docs/proxy.md.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { stringify } from 'yaml';
import { BadRequestError, ForbiddenError, NotFoundError } from '../../errors.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import type { UserResource } from '../../host/resources.js';
import type { HttpsEndpoint } from '../https.js';
import { replies } from '../schemas.js';

interface Body {
  ttlSeconds?: number;
}

/** The kubeconfig's token: "kubeconfig-<username, cut>-<8 hex>", within the 63 characters of a key name. */
function tokenName(username: string): string {
  return `kubeconfig-${username.slice(0, 42)}-${randomBytes(4).toString('hex')}`;
}

/**
 * Where the kubeconfig's clusters point: the configured external URL; else, for a request that
 * came over plain http while an https listener runs, that listener on the host the caller used
 * (kubectl would not send its token over http); else the request's own scheme and host.
 */
function serverBase(request: FastifyRequest, externalUrl: string | undefined, https: HttpsEndpoint | undefined): string {
  if (externalUrl) return externalUrl;
  if (request.protocol === 'http' && https) {
    const host = request.hostname.includes(':') && !request.hostname.startsWith('[') ? `[${request.hostname}]` : request.hostname;
    return `https://${host}:${https.port}`;
  }
  return `${request.protocol}://${request.host}`;
}

export default async function kubeconfigRoutes(app: FastifyInstance) {
  const { auth, clusters, config } = app.services;

  /** The user the kubeconfig is for, and the latest expiry its token may have (a token's own). */
  function ownerOf(request: FastifyRequest): { user: UserResource; notAfter: number } {
    const principal = request.principal!;
    if (principal.kind === 'user') {
      const user = auth.users.byId(principal.id);
      if (!user) throw new NotFoundError('user not found');
      return { user, notAfter: Infinity };
    }
    const key = auth.apiKeys.byId(principal.id);
    const owner = key?.spec.owner;
    const user = owner ? auth.users.byUsername(owner.username) : undefined;
    if (!key || !user) throw new ForbiddenError('this API key belongs to no user: sign in, or use a kubeconfig token, to get a kubeconfig');
    return { user, notAfter: key.spec.expiresAt ? Date.parse(key.spec.expiresAt) : Infinity };
  }

  app.post<{ Body: Body | undefined }>(
    '/api/v1/kubeconfig',
    {
      onRequest: app.requireUser,
      schema: {
        tags: ['kubeconfig'],
        summary: 'A kubeconfig for every cluster you may use, with a new short-lived token (an API key owned by you)',
        body: {
          type: ['object', 'null'],
          additionalProperties: false,
          properties: { ttlSeconds: { type: 'integer', minimum: 60, description: 'token lifetime; default and maximum are configured (12 h and 30 days unless set)' } },
        },
        response: replies({ 200: { type: 'string', description: 'kubeconfig YAML' } }),
      },
    },
    async (request, reply) => {
      const ttlSeconds = request.body?.ttlSeconds ?? config.kubeconfigTokenTtlSeconds;
      if (ttlSeconds > config.kubeconfigTokenMaxTtlSeconds) throw new BadRequestError(`ttlSeconds may be at most ${config.kubeconfigTokenMaxTtlSeconds}`);
      const principal = request.principal!;
      const { user, notAfter } = ownerOf(request);
      const usable = clusters
        .list()
        .filter((conn) => conn.enabled && auth.canAccessCluster(principal, conn.name))
        .map((conn) => conn.name)
        .sort();
      if (usable.length === 0) throw new NotFoundError('there is no cluster you may use');
      const expires = new Date(Math.min(Date.now() + ttlSeconds * 1000, notAfter));
      const username = user.spec.username;
      const { key } = await auth.apiKeys.create({
        name: tokenName(username),
        roles: [...principal.roles],
        expiresAt: expires.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        createdBy: principal.name,
        owner: user,
      });
      const base = serverBase(request, config.externalUrl, app.services.https);
      const ca = config.kubeconfigCa ?? app.services.https?.trustPem;
      const current = clusters.defaultCluster()?.name;
      const userEntry = `kiteline-${username}`;
      const document = {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: usable.map((name) => ({
          name,
          cluster: {
            server: `${base}${PROXY_PREFIX}${encodeURIComponent(name)}`,
            ...(ca ? { 'certificate-authority-data': Buffer.from(ca).toString('base64') } : {}),
          },
        })),
        users: [{ name: userEntry, user: { token: key } }],
        contexts: usable.map((name) => ({ name, context: { cluster: name, user: userEntry } })),
        'current-context': current && usable.includes(current) ? current : usable[0],
        preferences: {},
      };
      reply.header('cache-control', 'no-store');
      return reply.type('application/yaml').send(stringify(document));
    },
  );
}
