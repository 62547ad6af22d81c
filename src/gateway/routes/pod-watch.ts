// Kite's live pod list: GET /api/v1/pods/<ns|_all>/watch?reduce=true&labelSelector=&fieldSelector=,
// server-sent events `added`, `modified`, `deleted`, `error`, `close` and a `: ping` comment every
// 15 seconds (src/workloads/pod-watch.ts). One upstream watch per client, closed when the client
// leaves. Authorized as `watch` on pods in the namespace (all namespaces for `_all`); on kiteline's
// own host cluster its install namespace is refused, and left out of `_all`. Metrics come along
// when the caller may also list pods.metrics.k8s.io there. docs/workloads.md.
import { Type } from 'typebox';
import { mayAccess } from '../../cluster-access/access.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../../workloads/access.js';
import { relayPodWatch } from '../../workloads/pod-watch.js';
import { EventStream } from '../../cluster-access/sse.js';
import { openWatch, podsPath } from '../../cluster-access/watch-events.js';
import { NAMESPACE_PATTERN } from '../../cluster-access/segments.js';
import { listSearch } from '../../cluster-access/read-query.js';
import { clusterSchema, LiveListQuery, liveListEvents, type App } from '../schemas.js';
import { endOnRevocation } from '../stream-revocation.js';
import { toolRequest, withClientSignal } from '../tool-request.js';

const PodWatchParams = Type.Object({ namespace: Type.String({ maxLength: 63, pattern: NAMESPACE_PATTERN }) });

export default async function podWatchRoutes(app: App) {
  const { services } = app;

  app.get(
    '/api/v1/pods/:namespace/watch',
    {
      onRequest: app.requireUser,
      schema: clusterSchema('The pods of a namespace (or `_all`) as server-sent events, live', {
        params: PodWatchParams,
        querystring: LiveListQuery,
        response: { 200: liveListEvents("a pod each, with Kite's `metrics` member") },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { params, query } = request;
      const namespace = params.namespace === '_all' ? undefined : params.namespace;
      const ctx = await toolRequest(app, request, reply, signal, true);
      const { conn, principal } = ctx;
      await requireWorkloadAccess(services, principal, conn, {
        kind: POD_RESOURCE,
        resource: 'pods',
        verb: 'watch',
        namespace,
        name: undefined,
      });
      const fieldSelector = await services.hostGuard.listFieldSelector(
        conn,
        POD_RESOURCE,
        namespace,
        query.fieldSelector,
      );
      const watchQuery = listSearch({ labelSelector: query.labelSelector, fieldSelector, watch: true });
      const metricsQuery = new URLSearchParams(query.labelSelector ? { labelSelector: query.labelSelector } : {});
      const metricsBase =
        namespace === undefined
          ? '/apis/metrics.k8s.io/v1beta1/pods'
          : `/apis/metrics.k8s.io/v1beta1/namespaces/${namespace}/pods`;
      const metricsPath = mayAccess(services.auth, principal, conn.name, 'pods.metrics.k8s.io', namespace, 'list')
        ? `${metricsBase}${metricsQuery.size > 0 ? `?${metricsQuery}` : ''}`
        : undefined;
      // Opened before the answer starts: a bad selector or a refusal is a plain HTTP error.
      const upstream = await openWatch(conn, ctx.headers, podsPath(namespace, watchQuery), signal);
      const events = new EventStream(reply, signal);
      endOnRevocation(services, request, reply, { end: (message) => events.endWithError(message) });
      void relayPodWatch(
        events,
        { conn, headers: ctx.headers, metricsPath, reduce: query.reduce === 'true', signal },
        upstream,
      );
      return reply;
    }),
  );
}
