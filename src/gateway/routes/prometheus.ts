// Kite's monitoring on the selected cluster's Prometheus (its spec.prometheusURL; docs/monitoring.md):
//   GET /api/v1/prometheus/resource-usage-history?duration=&instance=   a node's or the cluster's
//       usage: `get` on nodes with an instance, else `list` on nodes (the nodes pages' rights);
//   GET /api/v1/prometheus/pods/:namespace/:podName/metrics?duration=&container=&labelSelector=
//       a pod's (or a workload's pods') usage: `get` on pods in that namespace;
//   GET /api/v1/prometheus/query?query=&time= and /query_range?query=&start=&end=&step=
//       the caller's PromQL, answered with Prometheus' own JSON: admins as written, anyone else
//       needs `create` on `prometheus/query` and gets every selector limited to the namespaces
//       where a role grants that (monitoring/query.ts).
// Every value that goes into a query kiteline writes is checked against the Kubernetes name rules
// here (a 400 otherwise) and written as a PromQL string (monitoring/usage.ts).
import { Type } from 'typebox';
import { MAX_QUERY_LENGTH } from '../../monitoring/promql.js';
import { callerLabel, mayAccess, requireAccess } from '../../cluster-access/access.js';
import { ForbiddenError } from '../../errors.js';
import { clusterNamespaces, passthrough } from '../../monitoring/query.js';
import { DURATIONS, podMetrics, resourceUsageHistory } from '../../monitoring/usage.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../../workloads/access.js';
import { clusterSchemaOf, clusterQueryProperties, defaulted, streamed, stringEnum, type App } from '../schemas.js';
import { toolRequest, withClientSignal } from '../tool-request.js';
import { DNS_LABEL_PATTERN } from '../../cluster-access/segments.js';

/** The resource a role grants (verb `create`) for running one's own PromQL. */
export const QUERY_RESOURCE = 'prometheus/query';

const duration = defaulted(stringEnum(DURATIONS, { default: '1h', description: 'the time range' }));

const UsageQuery = Type.Object({
  duration,
  instance: Type.Optional(
    Type.String({
      maxLength: 253,
      pattern: '^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$',
      description: "a node's name; without it, the whole cluster",
    }),
  ),
  ...clusterQueryProperties,
});

const PodParams = Type.Object({
  namespace: Type.String({ maxLength: 63, pattern: DNS_LABEL_PATTERN }),
  podName: Type.String({
    maxLength: 253,
    pattern: '^[a-z0-9][-a-z0-9.]{0,252}$',
    description: "a pod's name, or a prefix of pod names (a Deployment's name, a generateName)",
  }),
});

const PodQuery = Type.Object({
  duration,
  container: Type.Optional(Type.String({ maxLength: 63, pattern: DNS_LABEL_PATTERN })),
  labelSelector: Type.Optional(
    Type.String({
      maxLength: 1024,
      pattern: '^[A-Za-z0-9_./=!(), -]*$',
      description: "accepted for Kite's UI and checked; the series are chosen by pod name (prefix) as Kite does",
    }),
  ),
  ...clusterQueryProperties,
});

const UNIX_TIME = '[0-9]{1,12}(\\.[0-9]{1,9})?';
const RFC3339 = '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})';
const TIME = `^(${UNIX_TIME}|${RFC3339})$`;
const timeParam = (description: string) => Type.String({ maxLength: 40, pattern: TIME, description });
const promql = Type.String({ minLength: 1, maxLength: MAX_QUERY_LENGTH, description: 'PromQL' });

const InstantQuery = Type.Object({
  query: promql,
  time: Type.Optional(timeParam('evaluation time, RFC 3339 or Unix seconds; default now')),
  ...clusterQueryProperties,
});

const RangeQuery = Type.Object({
  query: promql,
  start: timeParam('RFC 3339 or Unix seconds'),
  end: timeParam('RFC 3339 or Unix seconds'),
  step: Type.String({
    maxLength: 20,
    pattern: '^([0-9]{1,9}(\\.[0-9]{1,6})?|([0-9]{1,9}(ms|s|m|h|d|w|y))+)$',
    description: 'a duration (`15s`) or seconds',
  }),
  ...clusterQueryProperties,
});

const Point = Type.Object({ timestamp: Type.String({ format: 'date-time' }), value: Type.Number() });
const Series = Type.Array(Point);

const ResourceUsageHistory = Type.Object(
  {
    cpu: Series,
    memory: Series,
    networkIn: Series,
    networkOut: Series,
    diskRead: Type.Null(),
    diskWrite: Type.Null(),
  },
  { description: 'CPU and memory in percent of allocatable (or capacity), network in bytes per second' },
);

const PodMetrics = Type.Object(
  {
    cpu: Series,
    memory: Series,
    networkIn: Series,
    networkOut: Series,
    diskRead: Series,
    diskWrite: Series,
    fallback: Type.Boolean(),
  },
  { description: 'CPU in cores, memory in MiB, network and disk in bytes per second' },
);

const PrometheusAnswer = streamed({
  type: 'object',
  description: "Prometheus' own answer: {status: 'success', data: {resultType, result}, warnings?}",
  additionalProperties: true,
});

const schema = clusterSchemaOf('monitoring');

export default async function prometheusRoutes(app: App) {
  const { auth, hostGuard } = app.services;

  app.get(
    '/api/v1/prometheus/resource-usage-history',
    {
      onRequest: app.requireUser,
      schema: schema("A node's (instance) or the cluster's CPU, memory and network usage over time", {
        description: 'Needs `get` on nodes (with instance) or `list` on nodes (without).',
        querystring: UsageQuery,
        response: { 200: ResourceUsageHistory },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { duration: range, instance } = request.query;
      const ctx = await toolRequest(app, request, reply, signal);
      requireAccess(auth, ctx.principal, ctx.conn.name, 'nodes', undefined, instance === undefined ? 'list' : 'get');
      return resourceUsageHistory(ctx.conn, instance, range, signal);
    }),
  );

  app.get(
    '/api/v1/prometheus/pods/:namespace/:podName/metrics',
    {
      onRequest: app.requireUser,
      schema: schema("A pod's (or the pods with this name prefix) CPU, memory, network and disk usage over time", {
        description: 'Needs `get` on pods in the namespace.',
        params: PodParams,
        querystring: PodQuery,
        response: { 200: PodMetrics },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { namespace, podName } = request.params;
      const ctx = await toolRequest(app, request, reply, signal);
      await requireWorkloadAccess(app.services, ctx.principal, ctx.conn, {
        kind: POD_RESOURCE,
        resource: 'pods',
        verb: 'get',
        namespace,
        name: undefined,
      });
      const pod = { namespace, pod: podName, container: request.query.container };
      return podMetrics(ctx.conn, pod, request.query.duration, signal);
    }),
  );

  /** The namespaces a non-admin's query is limited to; 403 when there are none. */
  async function queryScope(ctx: Awaited<ReturnType<typeof toolRequest>>): Promise<string[] | undefined> {
    if (auth.isAdmin(ctx.principal)) return undefined;
    const hidden = (await hostGuard.reachesHost(ctx.conn)) ? hostGuard.installNamespace : undefined;
    const allowed = (await clusterNamespaces(ctx)).filter(
      (ns) => ns !== hidden && mayAccess(auth, ctx.principal, ctx.conn.name, QUERY_RESOURCE, ns, 'create'),
    );
    if (allowed.length === 0) {
      const who = callerLabel(ctx.principal);
      throw new ForbiddenError(`${who} may not create ${QUERY_RESOURCE} in any namespace of cluster ${ctx.conn.name}`);
    }
    return allowed;
  }

  const queryDescription =
    `Admins: the query as written. Others need \`create\` on \`${QUERY_RESOURCE}\`; every selector of their ` +
    'query is limited to the namespaces where a role grants it.';

  app.get(
    '/api/v1/prometheus/query',
    {
      onRequest: app.requireUser,
      schema: schema('Evaluates a PromQL query at one time', {
        description: queryDescription,
        querystring: InstantQuery,
        response: { 200: PrometheusAnswer },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { query, time } = request.query;
      const ctx = await toolRequest(app, request, reply, signal);
      const params: Record<string, string> = time === undefined ? {} : { time };
      const answer = await passthrough(ctx, 'query', query, params, await queryScope(ctx));
      return reply.type('application/json').send(answer);
    }),
  );

  app.get(
    '/api/v1/prometheus/query_range',
    {
      onRequest: app.requireUser,
      schema: schema('Evaluates a PromQL query over a time range', {
        description: queryDescription,
        querystring: RangeQuery,
        response: { 200: PrometheusAnswer },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { query, start, end, step } = request.query;
      const ctx = await toolRequest(app, request, reply, signal);
      const answer = await passthrough(ctx, 'query_range', query, { start, end, step }, await queryScope(ctx));
      return reply.type('application/json').send(answer);
    }),
  );
}
