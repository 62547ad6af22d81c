// The pod and service links of Kite's UI: ANY /api/v1/namespaces/<ns>/{pods|services}/<name>[:<port>]/proxy[/<path>]
// through the cluster's own proxy subresource (src/workloads/workload-proxy.ts). Authorized as
// `create` on pods/proxy or services/proxy (a connect subresource, whatever the method: the
// built-in viewer may not), kiteline's own namespace on the host cluster refused. Bodies are never
// parsed: the request streams up as it arrives, the answer streams back as it comes, under the
// proxy's header policy. A write through it (any method but GET, HEAD, OPTIONS) is audited.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { requireWorkloadAccess } from '../../workloads/access.js';
import {
  proxiedKind,
  proxyAnswerHeaders,
  proxyTarget,
  PROXY_TARGET_PATTERN,
  type ProxyKind,
} from '../../workloads/workload-proxy.js';
import { upstreamRequestHeaders } from '../../cluster-access/headers.js';
import { isWriteMethod } from '../audit-table.js';
import { clusterSchema, streamed, type App } from '../schemas.js';
import { toolRequest, withClientSignal } from '../tool-request.js';
import { DNS_LABEL_PATTERN } from '../../cluster-access/segments.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** A request body is forwarded when the client sent one (never for GET and HEAD). */
function hasBody(request: FastifyRequest): boolean {
  if (request.method === 'GET' || request.method === 'HEAD') return false;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

const answer = streamed({
  description: "the pod's or service's answer as it sent it (any status and type), under kiteline's header policy",
  type: 'string',
});

const targetProperties = {
  namespace: Type.String({ maxLength: 63, pattern: DNS_LABEL_PATTERN }),
  name: Type.String({
    maxLength: 300,
    pattern: PROXY_TARGET_PATTERN,
    description: '<name>, <name>:<port> or <scheme>:<name>:<port>',
  }),
};
const ProxyParams = Type.Object(targetProperties);
/** The rest of the path: find-my-way's wildcard. */
const ProxyPathParams = Type.Object({
  ...targetProperties,
  '*': Type.Optional(Type.String({ description: 'the path on the pod or service' })),
});

export default async function workloadProxyRoutes(app: App) {
  const { services } = app;

  // The body stays the raw request stream, whatever its type or size: it is piped upstream.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  function forward(kind: ProxyKind) {
    return withClientSignal(async (request: FastifyRequest, reply: FastifyReply, signal: AbortSignal) => {
      const target = proxyTarget(kind, request.raw.url ?? request.url);
      const ctx = await toolRequest(app, request, reply, signal, true);
      const { conn, principal } = ctx;
      if (isWriteMethod(request.method)) {
        request.auditDetail = {
          verb: 'create',
          cluster: conn.name,
          resource: target.resource,
          namespace: target.namespace,
          name: target.name,
        };
      }
      await requireWorkloadAccess(services, principal, conn, {
        kind: proxiedKind(kind),
        resource: target.resource,
        verb: 'create',
        namespace: target.namespace,
        name: target.name,
      });
      const res = await conn.request({
        method: request.method,
        path: target.upstreamPath,
        headers: { ...upstreamRequestHeaders(request.headers), ...ctx.headers },
        body: hasBody(request) ? request.raw : undefined,
        signal,
        longRunning: true,
      });
      reply.code(res.statusCode).headers(proxyAnswerHeaders(res.headers));
      // An answer of unknown length (a stream) sends its head at once; every chunk goes out as it arrives.
      if (res.headers['content-length'] === undefined) reply.raw.once('pipe', () => reply.raw.flushHeaders());
      return reply.send(res);
    });
  }

  for (const kind of ['pods', 'services'] as const) {
    const what = kind === 'pods' ? 'a pod' : 'a service';
    const summary = `Any request to ${what} through the cluster's proxy subresource (Kite's links)`;
    const base = `/api/v1/namespaces/:namespace/${kind}/:name/proxy`;
    const schema = clusterSchema(summary, { params: ProxyParams, response: { 200: answer } });
    app.route({ method: METHODS, url: base, schema, handler: forward(kind), onRequest: app.requireUser });
    // The rest of the path: find-my-way's wildcard, left out of the OpenAPI document like the kubectl proxy's.
    app.route({
      method: METHODS,
      url: `${base}/*`,
      schema: clusterSchema(summary, { params: ProxyPathParams, hide: true, response: { 200: answer } }),
      handler: forward(kind),
      onRequest: app.requireUser,
    });
  }
}
