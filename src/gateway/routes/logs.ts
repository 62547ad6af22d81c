// Kite's log routes. GET /api/v1/logs/<ns>/<pod>: one container's log, `{logs: [...], container,
// pod, namespace}`, or with follow=true server-sent events (`connected`, `log`, `close`, `error`).
// GET /api/v1/logs/<ns>/<pod>/ws: the WebSocket Kite's Logs tab opens (src/workloads/log-fanout.ts),
// for one pod, or with pod `_all` and a labelSelector for every pod the selector matches.
// Authorized as `get` on pods/log in the namespace (a label-selector session also needs `list` and
// `watch` on pods there); kiteline's own namespace on the host cluster is refused. Everything that
// can fail before streaming (parameters, roles, the cluster's answer to the first request) fails
// as a plain HTTP answer, before any event or WebSocket handshake. docs/workloads.md.
import { Type } from 'typebox';
import type { Verb } from '../../auth/principal.js';
import { BadRequestError } from '../../errors.js';
import { impersonationHeaders } from '../../cluster-access/impersonation.js';
import { DNS_LABEL_PATTERN, NAME_PATTERN } from '../../cluster-access/segments.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../../workloads/access.js';
import { LogSession } from '../../workloads/log-fanout.js';
import { followLogAsEvents, LogQuery, logOptions, logQueryProperties, openLog, readLog } from '../../workloads/logs.js';
import { EventStream } from '../../cluster-access/sse.js';
import { listPods, podsPath } from '../../cluster-access/watch-events.js';
import { acceptWebSocket, isWebSocketRequest } from '../plugins/upgrades.js';
import { clusterSchema, objectOf, streamed, type App } from '../schemas.js';
import { endOnRevocation } from '../stream-revocation.js';
import { callerCluster, toolRequest, withClientSignal } from '../tool-request.js';

const string = Type.String();
/** A label selector is short; the cluster checks its syntax. */
const MAX_SELECTOR_LENGTH = 4096;

const podParams = (podPattern: string) =>
  Type.Object({
    namespace: Type.String({ maxLength: 63, pattern: DNS_LABEL_PATTERN }),
    pod: Type.String({ maxLength: 253, pattern: podPattern }),
  });
const PodParams = podParams(NAME_PATTERN);
/** A pod, or `_all` (with a labelSelector): every pod the selector matches. */
const PodOrAllParams = podParams(`^(_all|${NAME_PATTERN.slice(1, -1)})$`);

const LogSessionQuery = Type.Object({
  ...logQueryProperties,
  labelSelector: Type.Optional(
    Type.String({ maxLength: MAX_SELECTOR_LENGTH, description: 'with pod `_all`: the pods to follow' }),
  ),
});

const LogsAnswer = objectOf(
  { logs: Type.Array(string), container: string, pod: string, namespace: string },
  "The container's log lines (Kite's shape)",
);
// JSON (LogsAnswer), or server-sent events the handler writes itself.
const LogOrEvents = streamed({
  description: 'the log',
  content: {
    'application/json': { schema: LogsAnswer },
    'text/event-stream': {
      schema: {
        type: 'string',
        description:
          'server-sent events: `connected`, then one `log` per line, `close` at the end, ' +
          '`error` ({error}) if it breaks',
      },
    },
  },
});
const webSocketAnswer = streamed({
  description:
    'the answer is a WebSocket (101 Switching Protocols); each message a JSON {type, data[, pod, container]}',
  type: 'object',
  additionalProperties: true,
});

export default async function logRoutes(app: App) {
  const { services } = app;

  app.get(
    '/api/v1/logs/:namespace/:pod',
    {
      onRequest: app.requireUser,
      schema: clusterSchema("A container's log: JSON, or server-sent events with follow=true", {
        params: PodParams,
        querystring: LogQuery,
        response: { 200: LogOrEvents },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { namespace, pod } = request.params;
      const options = logOptions(request.query);
      const ctx = await toolRequest(app, request, reply, signal, options.follow);
      await requireWorkloadAccess(services, ctx.principal, ctx.conn, {
        kind: POD_RESOURCE,
        resource: 'pods/log',
        verb: 'get',
        namespace,
        name: pod,
      });
      if (!options.follow) return readLog(ctx.conn, ctx.headers, namespace, pod, options, signal);
      const log = await openLog(ctx.conn, ctx.headers, namespace, pod, options, signal);
      const events = new EventStream(reply, signal);
      endOnRevocation(services, request, reply, { end: (message) => events.endWithError(message) });
      void followLogAsEvents(events, log);
      return reply;
    }),
  );

  app.get(
    '/api/v1/logs/:namespace/:pod/ws',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        "WebSocket: a pod's log, or (pod `_all` and labelSelector) the logs of every pod a selector matches",
        {
          description:
            'Messages are JSON {type, data}: the server sends `log` (with `pod` and `container`), ' +
            '`info`, `error`, `close` and `pong`; the client may send `{"type":"ping"}`.',
          params: PodOrAllParams,
          querystring: LogSessionQuery,
          response: { 200: webSocketAnswer },
        },
      ),
    },
    async (request, reply) => {
      if (!isWebSocketRequest(request))
        throw new BadRequestError('this route speaks WebSocket: send an Upgrade: websocket request');
      const { namespace, pod } = request.params;
      const { query } = request;
      const options = logOptions(query, true);
      const fanOut = pod === '_all';
      const labelSelector = query.labelSelector ?? '';
      if (fanOut && labelSelector.trim() === '')
        throw new BadRequestError('pod _all needs a labelSelector: the pods whose logs to follow');
      const { principal, conn } = await callerCluster(app, request);
      // One pod's log; with a selector, also finding and following the pods it matches.
      const accesses: { resource: string; verb: Verb }[] = [{ resource: 'pods/log', verb: 'get' }];
      if (fanOut) accesses.push({ resource: 'pods', verb: 'list' }, { resource: 'pods', verb: 'watch' });
      for (const { resource, verb } of accesses) {
        await requireWorkloadAccess(services, principal, conn, {
          kind: POD_RESOURCE,
          resource,
          verb,
          namespace,
          name: fanOut ? undefined : pod,
        });
      }
      const headers = impersonationHeaders(conn, principal);
      const caller = `${principal.kind}:${principal.id}`;
      // The session's own slot (its one stream, or its pod watch): a refusal is a plain 429.
      const release = conn.admit(caller, true);
      const controller = new AbortController();
      const ctx = { conn, headers, caller, namespace, options, log: request.log, controller };
      try {
        // The first upstream request before the handshake: a missing pod, a bad selector or a
        // refusal of the cluster is a plain HTTP error.
        const first = fanOut
          ? {
              list: await listPods(
                conn,
                headers,
                podsPath(namespace, new URLSearchParams({ labelSelector })),
                controller.signal,
              ),
            }
          : { log: await openLog(conn, headers, namespace, pod, options, controller.signal) };
        const ws = await acceptWebSocket(request, reply);
        const session = new LogSession(ws, ctx, release);
        if (first.list) void session.followSelector(labelSelector, first.list);
        else void session.followPod(pod, first.log);
      } catch (err) {
        controller.abort();
        release();
        throw err;
      }
    },
  );
}
