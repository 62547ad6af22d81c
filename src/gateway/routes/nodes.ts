// Kite's node actions: POST /api/v1/nodes/_all/<node>/{cordon,uncordon,taint,untaint,drain} with
// Kite's bodies (cordon and uncordon send none, with a JSON content type) and answers.
// Authorization: `patch` on nodes for all of them; a drain also needs `list` on pods across all
// namespaces (it reads every pod on the node and reports them) and `create` on pods/eviction in
// every namespace it evicts from, all checked before the node is cordoned. On kiteline's own host
// cluster a node that runs a pod of kiteline's install namespace is never drained nor given a NoExecute
// taint through kiteline (403): evicting kiteline from every node would leave nobody able to undo it
// through kiteline (src/cluster-access/kiteline-node.ts).
import { Type, type Static } from 'typebox';
import { NotFoundError } from '../../errors.js';
import { requireAccess } from '../../cluster-access/access.js';
import { refuseOnKitelineNode } from '../../cluster-access/kiteline-node.js';
import { NAME_PATTERN } from '../../cluster-access/segments.js';
import {
  DEFAULT_DRAIN_TIMEOUT_SECONDS,
  drainNode,
  MAX_DRAIN_TIMEOUT_SECONDS,
  planDrain,
  type DrainOptions,
  type DrainReport,
} from '../../tools/drain.js';
import {
  addTaint,
  checkTaint,
  removeTaint,
  setUnschedulable,
  TAINT_EFFECTS,
  type Taint,
} from '../../tools/node-actions.js';
import { HttpError } from '../../errors.js';
import { acceptEmptyJsonBody } from '../empty-json-body.js';
import {
  ClusterQuery,
  clusterSchema,
  objectOf,
  openObject,
  stringEnum,
  type App,
  type RequestWith,
} from '../schemas.js';
import { auditObject } from '../tool-audit.js';
import { toolRequest, withClientSignal } from '../tool-request.js';

const string = Type.String();
const boolean = Type.Boolean();
const NodeParams = Type.Object({ name: Type.String({ maxLength: 253, pattern: NAME_PATTERN }) });
const podRef = objectOf({ namespace: string, name: string });
const podNote = objectOf({ namespace: string, name: string, reason: string });

const CordonReply = objectOf({ message: string, node: string, unschedulable: boolean });

const TaintBody = Type.Object(
  {
    key: Type.String({ maxLength: 316 }),
    value: Type.Optional(Type.String({ maxLength: 63 })),
    effect: stringEnum(TAINT_EFFECTS),
  },
  { additionalProperties: false },
);
const TaintReply = objectOf({
  message: string,
  node: string,
  taint: objectOf({ key: string, value: string, effect: string, timeAdded: string }),
});

const UntaintBody = Type.Object(
  { key: Type.String({ maxLength: 316 }), effect: Type.Optional(stringEnum(TAINT_EFFECTS)) },
  { additionalProperties: false },
);
const UntaintReply = objectOf({ message: string, node: string, removedTaintKey: string });

const DrainBody = Type.Object(
  {
    force: Type.Optional(Type.Boolean({ description: 'also evict pods no controller manages' })),
    gracePeriod: Type.Optional(
      Type.Integer({
        minimum: -1,
        maximum: 86400,
        description: 'seconds each pod gets to stop; -1 (default): its own grace period',
      }),
    ),
    deleteLocalData: Type.Optional(Type.Boolean({ description: 'also evict pods with emptyDir volumes' })),
    ignoreDaemonsets: Type.Optional(
      Type.Boolean({ description: 'skip DaemonSet pods (default true); false refuses a node with DaemonSet pods' }),
    ),
    timeoutSeconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_DRAIN_TIMEOUT_SECONDS,
        description: `default ${DEFAULT_DRAIN_TIMEOUT_SECONDS}`,
      }),
    ),
    podSelector: Type.Optional(
      Type.String({
        maxLength: 1024,
        description: 'only pods matching this label selector (kubectl drain --pod-selector)',
      }),
    ),
  },
  { additionalProperties: false },
);
const DrainReply = objectOf({
  message: string,
  node: string,
  complete: boolean,
  evicted: Type.Array(podRef),
  terminating: Type.Array(podRef),
  blocked: Type.Array(podNote),
  failed: Type.Array(podNote),
  skipped: Type.Array(podNote),
  options: openObject(),
});

/** Every node action names the node (path) and may name the cluster (query). */
const nodeParts = { params: NodeParams, querystring: ClusterQuery };
const taintSchema = clusterSchema('Add a taint (replacing the one with the same key and effect)', {
  ...nodeParts,
  body: TaintBody,
  response: { 200: TaintReply },
});
const untaintSchema = clusterSchema('Remove the taints with a key (and effect, when given)', {
  ...nodeParts,
  body: UntaintBody,
  response: { 200: UntaintReply },
});
const drainSchema = clusterSchema(
  'Cordon the node and evict its pods through the Eviction API (PodDisruptionBudgets respected)',
  { ...nodeParts, body: DrainBody, response: { 200: DrainReply } },
);

export default async function nodeRoutes(app: App) {
  // Kite's UI posts cordon and uncordon with Content-Type application/json and no body.
  acceptEmptyJsonBody(app);

  const { auth, hostGuard } = app.services;

  /** The cluster, the `patch nodes` check, and the audit detail of a node action. */
  async function prepare(
    request: RequestWith<{ params: Static<typeof NodeParams> }>,
    reply: Parameters<typeof toolRequest>[2],
    signal: AbortSignal,
    verb: string,
    longRunning = false,
  ) {
    const { name } = request.params;
    const ctx = await toolRequest(app, request, reply, signal, longRunning);
    request.auditDetail = { verb, cluster: ctx.conn.name, resource: 'nodes', name };
    requireAccess(auth, ctx.principal, ctx.conn.name, 'nodes', undefined, 'patch');
    const nodes = await ctx.conn.resolveResource('nodes');
    if (!nodes) throw new NotFoundError(`cluster ${ctx.conn.name} serves no nodes`);
    await hostGuard.check(ctx.conn, { resolved: nodes, namespace: undefined, name, verb: 'patch' });
    return { ctx, node: name };
  }

  const onRequest = app.requireUser;

  for (const [action, unschedulable] of [
    ['cordon', true],
    ['uncordon', false],
  ] as const) {
    const summary = `${action === 'cordon' ? 'Mark' : 'Unmark'} the node unschedulable (spec.unschedulable)`;
    app.post(
      `/api/v1/nodes/_all/:name/${action}`,
      { onRequest, schema: clusterSchema(summary, { ...nodeParts, response: { 200: CordonReply } }) },
      withClientSignal(async (request, reply, signal) => {
        const { ctx, node } = await prepare(request, reply, signal, action);
        return setUnschedulable(ctx, node, unschedulable);
      }),
    );
  }

  app.post(
    '/api/v1/nodes/_all/:name/taint',
    { onRequest, schema: taintSchema },
    withClientSignal(async (request, reply, signal) => {
      const { body } = request;
      const taint = checkTaint(body.key, body.value, body.effect, true) as Taint;
      const { ctx, node } = await prepare(request, reply, signal, 'taint');
      // A NoExecute taint evicts like a drain: never kiteline from its own node.
      if (taint.effect === 'NoExecute') await refuseOnKitelineNode(hostGuard, ctx.conn, node, 'taint', signal);
      return addTaint(ctx, node, taint);
    }),
  );

  app.post(
    '/api/v1/nodes/_all/:name/untaint',
    { onRequest, schema: untaintSchema },
    withClientSignal(async (request, reply, signal) => {
      const { body } = request;
      checkTaint(body.key, undefined, body.effect, false);
      const { ctx, node } = await prepare(request, reply, signal, 'untaint');
      return removeTaint(ctx, node, body.key, body.effect);
    }),
  );

  app.post(
    '/api/v1/nodes/_all/:name/drain',
    { onRequest, schema: drainSchema },
    withClientSignal(async (request, reply, signal) => {
      // No body at all: the defaults.
      const body = request.body ?? {};
      const options: DrainOptions = {
        force: body.force === true,
        gracePeriod: body.gracePeriod ?? -1,
        deleteLocalData: body.deleteLocalData === true,
        ignoreDaemonsets: body.ignoreDaemonsets !== false,
        timeoutSeconds: body.timeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS,
        ...(body.podSelector ? { podSelector: body.podSelector } : {}),
      };
      const { ctx, node } = await prepare(request, reply, signal, 'drain', true);
      requireAccess(auth, ctx.principal, ctx.conn.name, 'pods', undefined, 'list');
      const pods = await ctx.conn.resolveResource('pods');
      if (!pods) throw new NotFoundError(`cluster ${ctx.conn.name} serves no pods`);
      await refuseOnKitelineNode(hostGuard, ctx.conn, node, 'drain', signal);
      const guardSelector = await hostGuard.listFieldSelector(ctx.conn, pods, undefined, undefined);
      const plan = await planDrain(ctx, node, options, guardSelector);
      for (const pod of plan.evict) {
        const namespace = pod.metadata?.namespace;
        requireAccess(auth, ctx.principal, ctx.conn.name, 'pods/eviction', namespace, 'create');
        await hostGuard.check(ctx.conn, { resolved: pods, namespace, name: pod.metadata?.name, verb: 'create' });
      }
      // One record per eviction: accepted (201), refused by a disruption budget (429), failed (409).
      const audit = (report: DrainReport) => {
        const outcomes = [
          [report.evicted, 201],
          [report.blocked, 429],
          [report.failed, 409],
        ] as const;
        for (const [pods, status] of outcomes)
          for (const { namespace, name } of pods)
            auditObject(request, {
              cluster: ctx.conn.name,
              verb: 'evict',
              resource: 'pods/eviction',
              namespace,
              name,
              status,
            });
      };
      try {
        const report = await drainNode(ctx, node, plan, options);
        audit(report);
        return report;
      } catch (err) {
        if (err instanceof HttpError && Array.isArray((err.details as DrainReport | undefined)?.evicted))
          audit(err.details as DrainReport);
        throw err;
      }
    }),
  );
}
