// GET /api/v1/<resource>/<ns>/<name>/history?page=&pageSize= (Kite's history tab: {data,
// pagination}) from the cluster's own revisions, and POST …/rollback {revision} doing what
// `kubectl rollout undo --to-revision` does (src/tools/history.ts). Kite's UI rolls back by
// sending a history entry's YAML to POST /resources/apply instead; both work.
// History: `get` on the workload and `list` on its revision records (replicasets or
// controllerrevisions) in its namespace. Rollback: `patch` on the workload, plus the same reads.
import type { FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import type { Verb } from '../../auth/principal.js';
import { NotFoundError } from '../../errors.js';
import { requireAccess } from '../../cluster-access/access.js';
import { checkSegments, NAME_PATTERN, NAMESPACE_PATTERN, RESOURCE_PATTERN } from '../../cluster-access/segments.js';
import { planTarget } from '../../cluster-access/target.js';
import {
  DEFAULT_HISTORY_PAGE_SIZE,
  hasRevisions,
  MAX_HISTORY_PAGE_SIZE,
  rollbackWorkload,
  workloadHistory,
  type WorkloadRef,
} from '../../tools/history.js';
import {
  ClusterQuery,
  clusterQueryProperties,
  clusterSchema,
  defaulted,
  objectOf,
  resourceHistoryProperties,
  type App,
  type RequestWith,
} from '../schemas.js';
import { toolRequest, withClientSignal, type ToolRequest } from '../tool-request.js';

const string = Type.String();
const integer = Type.Integer();
const boolean = Type.Boolean();

const WorkloadParams = Type.Object({
  resource: Type.String({ maxLength: 253, pattern: RESOURCE_PATTERN }),
  namespace: Type.String({ maxLength: 63, pattern: NAMESPACE_PATTERN }),
  name: Type.String({ maxLength: 253, pattern: NAME_PATTERN }),
});

const HistoryQuery = Type.Object({
  page: defaulted(Type.Integer({ minimum: 1, maximum: 100000, default: 1 })),
  pageSize: defaulted(Type.Integer({ minimum: 1, maximum: MAX_HISTORY_PAGE_SIZE, default: DEFAULT_HISTORY_PAGE_SIZE })),
  ...clusterQueryProperties,
});

const HistoryEntry = objectOf({
  ...resourceHistoryProperties({
    resourceYaml: 'an apply document restoring this revision’s pod template',
    previousYaml: 'the same for the revision before it ("" for the first)',
  }),
  revision: integer,
  current: boolean,
  operator: objectOf({ username: string, provider: string }),
  changeCause: string,
});

const HistoryReply = objectOf({
  data: Type.Array(HistoryEntry),
  pagination: objectOf({
    page: integer,
    pageSize: integer,
    total: integer,
    totalPages: integer,
    hasNextPage: boolean,
    hasPrevPage: boolean,
  }),
});

const RollbackBody = Type.Object(
  {
    revision: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 2147483647,
        description: '0 (default): the revision before the current one',
      }),
    ),
  },
  { additionalProperties: false },
);

export default async function historyRoutes(app: App) {
  const { auth, hostGuard } = app.services;

  /** The workload, authorized for `verb`, plus `list` on its revision records. */
  async function workload(
    request: RequestWith<{ params: Static<typeof WorkloadParams> }>,
    reply: FastifyReply,
    signal: AbortSignal,
    verb: Verb,
  ): Promise<{ ctx: ToolRequest; ref: WorkloadRef }> {
    const p = request.params;
    const segments = checkSegments({ resource: p.resource, namespace: p.namespace, name: p.name });
    const ctx = await toolRequest(app, request, reply, signal);
    const resolved = await ctx.conn.resolveResource(segments.resource);
    if (!resolved) throw new NotFoundError(`resource not found on cluster ${ctx.conn.name}: ${segments.resource}`);
    const target = planTarget(resolved, segments);
    if (verb !== 'get')
      request.auditDetail = {
        verb: 'rollback',
        cluster: ctx.conn.name,
        resource: target.resource,
        namespace: target.namespace,
        name: target.name,
      };
    requireAccess(auth, ctx.principal, ctx.conn.name, target.resource, target.namespace, verb);
    if (verb !== 'get') requireAccess(auth, ctx.principal, ctx.conn.name, target.resource, target.namespace, 'get');
    await hostGuard.check(ctx.conn, { resolved, namespace: target.namespace, name: target.name, verb });
    if (hasRevisions(resolved)) {
      requireAccess(
        auth,
        ctx.principal,
        ctx.conn.name,
        resolved.resource === 'deployments' ? 'replicasets' : 'controllerrevisions',
        target.namespace,
        'list',
      );
    }
    return { ctx, ref: { resolved, resource: target.resource, namespace: target.namespace ?? '', name: target.name! } };
  }

  app.get(
    '/api/v1/:resource/:namespace/:name/history',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        "A workload's revisions, newest first " +
          '(Deployments: ReplicaSets; StatefulSets, DaemonSets: ControllerRevisions; others: empty)',
        { params: WorkloadParams, querystring: HistoryQuery, response: { 200: HistoryReply } },
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const { page, pageSize } = request.query;
      const { ctx, ref } = await workload(request, reply, signal, 'get');
      return workloadHistory(ctx, ref, page, pageSize);
    }),
  );

  app.post(
    '/api/v1/:resource/:namespace/:name/rollback',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        'Roll a Deployment, StatefulSet or DaemonSet back to a revision, as kubectl rollout undo --to-revision',
        {
          params: WorkloadParams,
          querystring: ClusterQuery,
          body: RollbackBody,
          response: { 200: objectOf({ message: string, revision: integer }) },
        },
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      // No body at all is a rollback to the previous revision.
      const body = request.body ?? {};
      const { ctx, ref } = await workload(request, reply, signal, 'patch');
      return rollbackWorkload(ctx, ref, body.revision ?? 0);
    }),
  );
}
