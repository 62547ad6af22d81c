// POST /api/v1/kubeconfig: a kubeconfig for kubectl, client libraries and GitOps tools, with one
// context per cluster the caller may use (named after the cluster, the default cluster current),
// each pointing at <external URL>/k8s/clusters/<cluster>, and a freshly minted token: an API key
// owned by the signed-in user, with the user's roles, expiring after the requested or default
// lifetime (at most the configured maximum). It is listed and revoked like any API key, and stops
// working the moment its user is disabled or deleted or loses one of those roles
// (AuthService.authenticateApiKey). A kubeconfig token may ask for a fresh one, never outliving
// itself. The token's rules (its owner, roles, expiry) are the API key store's
// (APIKeyStore.createKubeconfigToken); this route picks the clusters and writes the YAML.
// docs/proxy.md.
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { stringify } from 'yaml';
import { BadRequestError, NotFoundError } from '../../errors.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import type { HttpsEndpoint } from '../https.js';
import { nullable, replies, type App } from '../schemas.js';

/** The body is optional (none, null or an object). */
const KubeconfigBody = nullable(
  Type.Object(
    {
      ttlSeconds: Type.Optional(
        Type.Integer({
          minimum: 60,
          description: 'token lifetime; default and maximum are configured (12 h and 30 days unless set)',
        }),
      ),
    },
    { additionalProperties: false },
  ),
);

/**
 * Where the kubeconfig's clusters point: the configured external URL; else, for a request that
 * came over plain http while an https listener runs, that listener on the host the caller used
 * (kubectl would not send its token over http); else the request's own scheme and host.
 */
function serverBase(
  request: FastifyRequest,
  externalUrl: string | undefined,
  https: HttpsEndpoint | undefined,
): string {
  if (externalUrl) return externalUrl;
  if (request.protocol === 'http' && https) {
    const host =
      request.hostname.includes(':') && !request.hostname.startsWith('[') ? `[${request.hostname}]` : request.hostname;
    return `https://${host}:${https.port}`;
  }
  return `${request.protocol}://${request.host}`;
}

export default async function kubeconfigRoutes(app: App) {
  const { auth, apiKeys, clusters, config } = app.services;

  app.post(
    '/api/v1/kubeconfig',
    {
      onRequest: app.requireUser,
      schema: {
        tags: ['kubeconfig'],
        summary: 'A kubeconfig for every cluster you may use, with a new short-lived token (an API key owned by you)',
        body: KubeconfigBody,
        response: replies({ 200: Type.String({ description: 'kubeconfig YAML' }) }),
      },
    },
    async (request, reply) => {
      const ttlSeconds = request.body?.ttlSeconds ?? config.kubeconfigTokenTtlSeconds;
      if (ttlSeconds > config.kubeconfigTokenMaxTtlSeconds)
        throw new BadRequestError(`ttlSeconds may be at most ${config.kubeconfigTokenMaxTtlSeconds}`);
      const principal = request.principal!;
      apiKeys.tokenOwner(principal); // who the token would be for (404 or 403 before anything else)
      const usable = clusters
        .list()
        .filter((conn) => conn.enabled && auth.canAccessCluster(principal, conn.name))
        .map((conn) => conn.name)
        .sort();
      if (usable.length === 0) throw new NotFoundError('there is no cluster you may use');
      const { key, user } = await apiKeys.createKubeconfigToken(principal, ttlSeconds);
      const username = user.spec.username;
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
      reply.header('cache-control', 'no-store').type('application/yaml');
      return stringify(document);
    },
  );
}
