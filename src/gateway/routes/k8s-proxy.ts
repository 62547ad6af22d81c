// The Kubernetes API of every registered cluster, as the caller: /k8s/clusters/<cluster>/<path>
// forwards any request of the Kubernetes API (discovery, /version, OpenAPI, every verb on every
// resource and subresource, lists, watches) and the HTTP/1.1 upgrades (exec, attach, port-forward
// over SPDY or WebSocket) to that cluster. Authentication is a kiteline API key in Authorization
// (never the session cookie: a browser must not be able to drive kubectl's API); authorization is
// kiteline's roles on the request info the API server itself will read (src/proxy). Bodies are
// never parsed (but for the name of a CRD or APIService created on kiteline's host cluster:
// proxy/created-name.ts): the request stream goes upstream as it arrives, the answer comes back as it
// arrives, and kiteline's own errors are Kubernetes Status objects. docs/proxy.md.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../../auth/principal.js';
import { BadGatewayError, ForbiddenError, TooManyRequestsError, UnauthorizedError } from '../../errors.js';
import { admitCreatedName, admitProxyRequest, type AdmittedRequest } from '../../proxy/admit.js';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../cluster-access/headers.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import { runUpgradeSession } from '../../proxy/session.js';
import { statusOf } from '../../proxy/status.js';
import { holdClusterSlot } from '../../resources/cluster-slot.js';
import { clientClosed } from '../../cluster-access/upstream.js';
import { isWriteMethod } from '../audit-table.js';
import { toHttpError } from '../plugins/errors.js';
import { endOnRevocation } from '../stream-revocation.js';

const WRITE_VERBS: ReadonlySet<string> = new Set(['create', 'update', 'patch', 'delete']);

/** The API key of a proxied request: Authorization only, a session cookie does not count. */
function caller(request: FastifyRequest): Principal {
  const header = request.headers.authorization;
  if (typeof header !== 'string' || header.trim() === '')
    throw new UnauthorizedError('send a kiteline API key as Authorization: Bearer <key>');
  // A token minted for another door (an MCP token): valid, but not here.
  if (request.tokenOutOfScope) throw new ForbiddenError(request.authFailure!);
  if (!request.principal) throw new UnauthorizedError(request.authFailure ?? 'invalid API key');
  return request.principal;
}

/** A request body is forwarded when the client sent one (never for GET and HEAD). */
function hasBody(request: FastifyRequest): boolean {
  if (request.method === 'GET' || request.method === 'HEAD') return false;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Query parameters a cached read understands; any other one sends the read to the cluster. */
const CACHEABLE_PARAMETERS: ReadonlySet<string> = new Set([
  'labelSelector',
  'fieldSelector',
  'limit',
  'resourceVersion',
  'resourceVersionMatch',
  'timeout',
]);

/** A JSON answer is what the client takes: no Accept, JSON, or anything (never a Table or protobuf). */
function acceptsPlainJson(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept.split(',').every((type) => {
    // Parameters other than a weight (as=Table, as=PartialObjectMetadata) ask for another answer.
    return /^(application\/json|\*\/\*)(\s*;\s*q=[0-9.]+)?$/.test(type.trim().toLowerCase());
  });
}

export default async function k8sProxyRoutes(app: FastifyInstance) {
  const { services } = app;

  /** A GET of an object or a list, answered from the read cache when it can be (docs/read-cache.md). */
  async function cachedRead(admitted: AdmittedRequest, request: FastifyRequest, signal: AbortSignal) {
    const { conn, info, access } = admitted;
    if (!services.readCache.enabled || request.method !== 'GET' || !access || admitted.longRunning) return undefined;
    if ((info.verb !== 'get' && info.verb !== 'list') || info.subresource !== '') return undefined;
    if (!acceptsPlainJson(request.headers.accept)) return undefined;
    const search = new URLSearchParams(admitted.upstreamPath.split('?')[1] ?? '');
    for (const key of search.keys()) if (!CACHEABLE_PARAMETERS.has(key)) return undefined;
    const limit = search.get('limit');
    if (limit !== null && !/^[0-9]{1,9}$/.test(limit)) return undefined;
    const resolved = await conn
      .resolveResource(info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource)
      .catch(() => undefined);
    if (!resolved || resolved.group !== info.apiGroup || resolved.version !== info.apiVersion) return undefined;
    // A cluster-scoped kind under /namespaces/<ns>/ is the cluster's 404 (and the role was asked
    // about that namespace): never the cluster-wide answer. The Namespace object names itself.
    const namespaceObject = info.apiGroup === '' && info.resource === 'namespaces' && info.namespace === info.name;
    if (!resolved.namespaced && info.namespace !== '' && !namespaceObject) return undefined;
    return services.readCache.read({
      conn,
      impersonation: admitted.impersonation,
      resolved,
      namespace: resolved.namespaced && info.namespace !== '' ? info.namespace : undefined,
      name: info.verb === 'get' ? info.name : undefined,
      query: {
        labelSelector: search.get('labelSelector') ?? undefined,
        fieldSelector: search.get('fieldSelector') ?? undefined,
        limit: limit === null || limit === '0' ? undefined : Number(limit),
        resourceVersion: search.get('resourceVersion') ?? undefined,
        resourceVersionMatch: search.get('resourceVersionMatch') ?? undefined,
      },
      signal,
    });
  }

  // The body stays the raw request stream, whatever its type or size: it is piped upstream.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  app.setErrorHandler((err, request, reply) => {
    const known = toHttpError(err);
    if (!known) request.log.error({ err }, 'unhandled error');
    else if (known.status >= 500)
      request.log.warn({ status: known.status, reason: known.reason, msg: known.message }, 'upstream error');
    if (known instanceof TooManyRequestsError) reply.header('retry-after', String(known.retryAfterSeconds));
    return reply
      .code(known?.status ?? 500)
      .type('application/json')
      .send(statusOf(known, request.id));
  });

  async function forward(request: FastifyRequest, reply: FastifyReply) {
    const principal = caller(request);
    const controller = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    // A write is audited with what it names, refused or not.
    const admitted = await admitProxyRequest(
      services,
      principal,
      request.method,
      request.raw.url ?? request.url,
      request.headers,
      ({ conn, info, access, dryRun }) => {
        request.clusterName = conn.name;
        if (access && WRITE_VERBS.has(access.verb) && isWriteMethod(request.method)) {
          request.auditDetail = {
            verb: info.verb,
            cluster: conn.name,
            resource: access.resource,
            namespace: access.namespace,
            name: access.name,
            dryRun,
          };
        }
      },
    );
    const { conn } = admitted;
    // The one body read: a CRD or APIService created on the host is checked by its name.
    const body = admitted.checksCreatedName
      ? await admitCreatedName(services, admitted, request.raw, request.headers['content-type'])
      : hasBody(request)
        ? request.raw
        : undefined;
    holdClusterSlot(reply, conn, principal, admitted.longRunning);
    const cached = await cachedRead(admitted, request, controller.signal);
    if (cached) return reply.code(cached.statusCode).headers(clientResponseHeaders(cached.headers)).send(cached.body);
    if (admitted.longRunning) endOnRevocation(services, request, reply, { stillAllowed: admitted.stillAllowed });
    let res;
    try {
      res = await conn.request({
        method: request.method,
        path: admitted.upstreamPath,
        headers: { ...upstreamRequestHeaders(request.headers), ...admitted.impersonation },
        body,
        signal: controller.signal,
        // A watch by either spelling (?watch= or /watch/ paths), logs, proxies: the watch pool.
        longRunning: admitted.longRunning,
      });
    } catch (err) {
      if (controller.signal.aborted) throw clientClosed();
      throw err;
    }
    if (res.statusCode === 401) {
      res.destroy();
      throw new BadGatewayError(
        "the cluster rejected kiteline's credentials for it (401): check the registered kubeconfig",
      );
    }
    reply.code(res.statusCode).headers(clientResponseHeaders(res.headers));
    // An answer of unknown length (a watch, logs -f) sends its head at once; every chunk after it
    // goes out as it arrives.
    if (res.headers['content-length'] === undefined) reply.raw.once('pipe', () => reply.raw.flushHeaders());
    return reply.send(res);
  }

  app.all('/*', { schema: { hide: true } }, forward);

  // Upgrades never reach a route: plugins/upgrades.ts hands this prefix's to the session runner.
  app.claimUpgrades(PROXY_PREFIX, (req, socket, head) => runUpgradeSession(services, services.log, req, socket, head));
}
