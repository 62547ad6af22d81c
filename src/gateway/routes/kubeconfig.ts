// POST /api/v1/kubeconfig: a kubeconfig for kubectl, client libraries and GitOps tools, with one
// context per cluster the caller may use (named after the cluster, the default cluster current),
// each pointing at <external URL>/k8s/clusters/<cluster>, and a freshly minted token: an API key
// owned by the signed-in user, with the user's roles, expiring after the requested or default
// lifetime (at most the configured maximum). It stops working the moment its user is disabled or
// deleted or loses one of those roles (AuthService.authenticateApiKey), and it is accepted only on
// the Kubernetes API (plugins/authenticate.ts): it can mint nothing, not even a fresh kubeconfig.
// Minting is bounded: per user and per client address per window (in memory, per replica), and a
// user holds at most the configured number of live tokens (one more revokes the oldest).
// POST /api/v1/mcp/token mints the same kind of token for an AI agent (docs/mcp.md): owned, with the
// user's roles, short-lived, counted in the same mint limits, capped per user separately, listed
// with the kubeconfig tokens (`audience: mcp`), and accepted only on /mcp.
// Owners list and revoke their own tokens (Kite's /api/users/me/kubeconfig-tokens), admins every
// user's (/api/v1/admin/kubeconfig-tokens). The token's rules (its owner, roles, expiry, the cap)
// are the API key store's (APIKeyStore.createKubeconfigToken); these routes pick the clusters,
// write the YAML and shape the lists. docs/proxy.md.
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { RateLimiter } from '../../auth/rate-limiter.js';
import { BadRequestError, ForbiddenError, NotFoundError, TooManyRequestsError } from '../../errors.js';
import { kubeconfigYaml } from '../../credentials/kubeconfig-document.js';
import { isExpired, isKubeconfigToken } from '../../host/apikeys.js';
import { resourceId, type APIKeyResource, type UserResource } from '../../host/resources.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import { isLoopbackHost, type Config } from '../../config.js';
import { publicUrl } from '../base-path.js';
import type { HttpsEndpoint } from '../https.js';
import { MCP_PATH } from '../plugins/authenticate.js';
import { parseId } from '../input-rules.js';
import { defaulted, idParams, nullable, objectOf, ref, schemaOf, stringEnum, type App } from '../schemas.js';
import { kubeconfigTokenView } from '../views/identity.js';

/** Kubeconfigs one user may mint per window, and one client address (several users behind one NAT). */
export const MINTS_PER_USER = 20;
export const MINTS_PER_ADDRESS = 60;
export const MINT_WINDOW_SECONDS = 600;

const ME_PREFIX = '/api/users/me/kubeconfig-tokens';
const ADMIN_PREFIX = '/api/v1/admin/kubeconfig-tokens';
const schema = schemaOf('kubeconfig');

const TokenList = objectOf({ tokens: Type.Array(ref('KubeconfigToken')) });
const AdminTokenQuery = Type.Object({
  page: defaulted(Type.Integer({ minimum: 1, default: 1 })),
  size: defaulted(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  owner: Type.Optional(Type.String({ maxLength: 253, description: "part of the owner's username (any case)" })),
  status: Type.Optional(stringEnum(['active', 'expired'])),
});
const Deleted = objectOf({ success: Type.Boolean(), message: Type.String() });
const McpTokenAnswer = objectOf(
  {
    token: Type.String({ description: 'send as `Authorization: Bearer <token>` to /mcp; shown this once' }),
    expiresAt: Type.String({ format: 'date-time' }),
    url: Type.String({ description: "the MCP endpoint's address" }),
    mcpServers: Type.Record(Type.String(), Type.Unknown(), {
      description: "an agent's configuration (the `mcpServers` shape Claude Desktop, Cursor and others read)",
    }),
    warning: Type.Optional(
      Type.String({ description: 'set when `url` is plain http to a host that is not this machine (loopback)' }),
    ),
  },
  'An MCP token, owned by you, with your roles',
);

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
  config: Pick<Config, 'externalUrl' | 'basePath'>,
  https: HttpsEndpoint | undefined,
): string {
  if (!config.externalUrl && request.protocol === 'http' && https) {
    const host =
      request.hostname.includes(':') && !request.hostname.startsWith('[') ? `[${request.hostname}]` : request.hostname;
    return `https://${host}:${https.port}${config.basePath}`;
  }
  return publicUrl(request, config);
}

export default async function kubeconfigRoutes(app: App) {
  const { auth, apiKeys, clusters, config } = app.services;
  const perUser = new RateLimiter(MINTS_PER_USER, MINT_WINDOW_SECONDS);
  const perAddress = new RateLimiter(MINTS_PER_ADDRESS, MINT_WINDOW_SECONDS);

  /** 429 once the caller or its address minted too many in the window; else counts this mint. */
  function countMint(userId: number, address: string): void {
    const [userKey, addressKey] = [`user:${userId}`, `addr:${address}`];
    const wait = Math.max(perUser.retryAfter([userKey]) ?? 0, perAddress.retryAfter([addressKey]) ?? 0);
    if (wait > 0) throw new TooManyRequestsError(`too many tokens minted; try again in ${wait} seconds`, wait);
    perUser.record([userKey]);
    perAddress.record([addressKey]);
  }

  /** Mints a token of the signed-in caller for one door, within the mint limits. */
  function mint(request: FastifyRequest, owner: UserResource, audience: 'kubernetes' | 'mcp', ttlSeconds: number) {
    countMint(resourceId(owner)!, request.ip);
    return apiKeys.createUserToken(request.principal!, audience, ttlSeconds, config.kubeconfigTokensPerUser);
  }

  /** The lifetime asked for, or the default; above the configured maximum: 400. */
  function checkedTtl(asked: number | undefined): number {
    const ttlSeconds = asked ?? config.kubeconfigTokenTtlSeconds;
    if (ttlSeconds > config.kubeconfigTokenMaxTtlSeconds)
      throw new BadRequestError(`ttlSeconds may be at most ${config.kubeconfigTokenMaxTtlSeconds}`);
    return ttlSeconds;
  }

  /** The token with this id when it is a kubeconfig token (and, for `ownerId`, that user's); else 404. */
  function tokenById(id: string, ownerId?: number): APIKeyResource {
    const key = apiKeys.byId(parseId(id));
    if (!key || !isKubeconfigToken(key) || (ownerId !== undefined && key.spec.owner?.id !== ownerId))
      throw new NotFoundError('kubeconfig token not found');
    return key;
  }

  /** The signed-in user's id: kubeconfig tokens belong to users, not to API keys. */
  function signedInUserId(principal: { kind: string; id: number }): number {
    if (principal.kind !== 'user') throw new ForbiddenError('kubeconfig tokens belong to signed-in users: sign in');
    return principal.id;
  }

  app.post(
    '/api/v1/kubeconfig',
    {
      onRequest: app.requireUser,
      schema: schema(
        'A kubeconfig for every cluster you may use, with a new short-lived token (an API key owned by you)',
        { body: KubeconfigBody, response: { 200: Type.String({ description: 'kubeconfig YAML' }) } },
      ),
    },
    async (request, reply) => {
      const ttlSeconds = checkedTtl(request.body?.ttlSeconds);
      const principal = request.principal!;
      const owner = apiKeys.tokenOwner(principal); // who the token would be for (403 or 404 before anything else)
      const usable = clusters
        .list()
        .filter((conn) => conn.enabled && auth.canAccessCluster(principal, conn.name))
        .map((conn) => conn.name)
        .sort();
      if (usable.length === 0) throw new NotFoundError('there is no cluster you may use');
      const { key, user } = await mint(request, owner, 'kubernetes', ttlSeconds);
      const username = user.spec.username;
      const base = serverBase(request, config, app.services.https);
      const current = clusters.defaultCluster()?.name;
      reply.header('cache-control', 'no-store').type('application/yaml');
      return kubeconfigYaml({
        clusters: usable.map((name) => ({ name, server: `${base}${PROXY_PREFIX}${encodeURIComponent(name)}` })),
        caPem: config.kubeconfigCa ?? app.services.https?.trustPem,
        userName: `kiteline-${username}`,
        token: key,
        current: current && usable.includes(current) ? current : usable[0],
      });
    },
  );

  app.post(
    '/api/v1/mcp/token',
    {
      onRequest: app.requireUser,
      schema: schema('A new short-lived token for an AI agent: accepted only on /mcp, acting as you', {
        body: KubeconfigBody,
        response: { 200: McpTokenAnswer },
      }),
    },
    async (request, reply) => {
      const ttlSeconds = checkedTtl(request.body?.ttlSeconds);
      const { key, resource } = await mint(request, apiKeys.tokenOwner(request.principal!), 'mcp', ttlSeconds);
      const url = `${serverBase(request, config, app.services.https)}${MCP_PATH}`;
      reply.header('cache-control', 'no-store');
      const plain = new URL(url);
      return {
        token: key,
        expiresAt: resource.spec.expiresAt!,
        url,
        mcpServers: { kiteline: { type: 'http' as const, url, headers: { Authorization: `Bearer ${key}` } } },
        ...(plain.protocol === 'http:' && !isLoopbackHost(plain.hostname)
          ? {
              warning:
                'this address is plain http: the agent would send the token unencrypted over the network; ' +
                'serve kiteline over https (KITELINE_EXTERNAL_URL, or --tls-port) before using it elsewhere',
            }
          : {}),
      };
    },
  );

  app.get(
    ME_PREFIX,
    {
      onRequest: app.requireUser,
      schema: schema('Your kubeconfig tokens (never a secret)', { response: { 200: TokenList } }),
    },
    async (request) => {
      const userId = signedInUserId(request.principal!);
      return { tokens: apiKeys.tokensOf(userId).map((key) => kubeconfigTokenView(key)) };
    },
  );

  app.delete(
    `${ME_PREFIX}/:id`,
    {
      onRequest: app.requireUser,
      schema: schema("Revoke one of your kubeconfig tokens (404 for anyone else's)", {
        params: idParams,
        response: { 200: Deleted },
      }),
    },
    async (request) => {
      await apiKeys.delete(tokenById(request.params.id, signedInUserId(request.principal!)));
      return { success: true, message: 'kubeconfig token revoked' };
    },
  );

  app.get(
    ADMIN_PREFIX,
    {
      schema: schema("Every user's kubeconfig tokens, newest first (role admin)", {
        querystring: AdminTokenQuery,
        response: {
          200: objectOf({
            tokens: Type.Array(ref('KubeconfigToken')),
            total: Type.Integer(),
            page: Type.Integer(),
            size: Type.Integer(),
          }),
        },
      }),
    },
    async (request) => {
      const { page, size, owner, status } = request.query;
      const now = Date.now();
      const matching = apiKeys
        .kubeconfigTokens()
        .filter((key) => !owner || key.spec.owner!.username.toLowerCase().includes(owner.toLowerCase()))
        .filter((key) => status === undefined || (status === 'expired') === isExpired(key, now))
        .sort((a, b) => resourceId(b)! - resourceId(a)!);
      const tokens = matching.slice((page - 1) * size, page * size).map((key) => kubeconfigTokenView(key, true));
      return { tokens, total: matching.length, page, size };
    },
  );

  app.delete(
    `${ADMIN_PREFIX}/:id`,
    { schema: schema('Revoke any kubeconfig token (role admin)', { params: idParams, response: { 200: Deleted } }) },
    async (request) => {
      await apiKeys.delete(tokenById(request.params.id));
      return { success: true, message: 'kubeconfig token revoked' };
    },
  );
}
