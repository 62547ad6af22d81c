// Kite's node actions: POST /api/v1/nodes/_all/<node>/{cordon,uncordon,taint,untaint,drain} with
// Kite's bodies (cordon and uncordon send none, with a JSON content type) and answers.
// Authorization: `patch` on nodes for all of them; a drain also needs `list` on pods across all
// namespaces (it reads every pod on the node and reports them) and `create` on pods/eviction in
// every namespace it evicts from, all checked before the node is cordoned. On kiteline's own host
// cluster a node that runs a pod of kiteline's install namespace is never drained through kiteline
// (403): evicting kiteline from every node would leave nobody able to uncordon them through it.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ForbiddenError, NotFoundError } from '../../errors.js';
import { requireAccess } from '../../resources/access.js';
import { NAME_PATTERN } from '../../resources/segments.js';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS, drainNode, MAX_DRAIN_TIMEOUT_SECONDS, planDrain, type DrainOptions, type DrainReport } from '../../tools/drain.js';
import { getJson, type KubeList } from '../../tools/kube.js';
import { addTaint, checkTaint, removeTaint, setUnschedulable, TAINT_EFFECTS, type Taint, type TaintEffect } from '../../tools/node-actions.js';
import { HttpError } from '../../errors.js';
import { clusterCookie, clusterHeader, objectOf, replies } from '../schemas.js';
import { auditObject } from '../tool-audit.js';
import { toolRequest, withClientSignal, type ToolRequest } from '../tool-request.js';

const string = { type: 'string' } as const;
const boolean = { type: 'boolean' } as const;
const params = { type: 'object', required: ['name'], properties: { name: { type: 'string', maxLength: 253, pattern: NAME_PATTERN } } } as const;
const clusterQuery = { type: 'object', properties: { 'x-cluster-name': string } } as const;
const podRef = objectOf({ namespace: string, name: string });
const podNote = objectOf({ namespace: string, name: string, reason: string });

interface DrainBody {
  force?: boolean;
  gracePeriod?: number;
  deleteLocalData?: boolean;
  ignoreDaemonsets?: boolean;
  timeoutSeconds?: number;
  podSelector?: string;
}

export default async function nodeRoutes(app: FastifyInstance) {
  // Kite's UI posts cordon and uncordon with Content-Type application/json and no body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    return parseJson(request, body as string, done);
  });

  const { auth, hostGuard } = app.services;

  /** The cluster, the `patch nodes` check, and the audit detail of a node action. */
  async function prepare(request: FastifyRequest, reply: Parameters<typeof toolRequest>[2], signal: AbortSignal, verb: string, longRunning = false) {
    const { name } = request.params as { name: string };
    const ctx = await toolRequest(app, request, reply, signal, longRunning);
    request.auditDetail = { verb, cluster: ctx.conn.name, resource: 'nodes', name };
    requireAccess(auth, ctx.principal, ctx.conn.name, 'nodes', undefined, 'patch');
    const nodes = await ctx.conn.resolveResource('nodes');
    if (!nodes) throw new NotFoundError(`cluster ${ctx.conn.name} serves no nodes`);
    await hostGuard.check(ctx.conn, { resolved: nodes, namespace: undefined, name, verb: 'patch' });
    return { ctx, node: name };
  }

  const schema = (summary: string, body: object | undefined, answer: object) => ({
    tags: ['resources'],
    summary,
    headers: clusterHeader,
    cookies: clusterCookie,
    params,
    querystring: clusterQuery,
    ...(body ? { body } : {}),
    response: replies({ 200: answer }),
  });
  const cordonAnswer = objectOf({ message: string, node: string, unschedulable: boolean });

  for (const [action, unschedulable] of [['cordon', true], ['uncordon', false]] as const) {
    app.post(
      `/api/v1/nodes/_all/:name/${action}`,
      { onRequest: app.requireUser, schema: schema(`${action === 'cordon' ? 'Mark' : 'Unmark'} the node unschedulable (spec.unschedulable)`, undefined, cordonAnswer) },
      withClientSignal(async (request, reply, signal) => {
        const { ctx, node } = await prepare(request, reply, signal, action);
        return setUnschedulable(ctx, node, unschedulable);
      }),
    );
  }

  app.post(
    '/api/v1/nodes/_all/:name/taint',
    {
      onRequest: app.requireUser,
      schema: schema(
        'Add a taint (replacing the one with the same key and effect)',
        {
          type: 'object',
          required: ['key', 'effect'],
          additionalProperties: false,
          properties: { key: { type: 'string', maxLength: 316 }, value: { type: 'string', maxLength: 63 }, effect: { type: 'string', enum: [...TAINT_EFFECTS] } },
        },
        objectOf({ message: string, node: string, taint: objectOf({ key: string, value: string, effect: string, timeAdded: string }) }),
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const body = request.body as { key: string; value?: string; effect: string };
      const taint = checkTaint(body.key, body.value, body.effect, true) as Taint;
      const { ctx, node } = await prepare(request, reply, signal, 'taint');
      return addTaint(ctx, node, taint);
    }),
  );

  app.post(
    '/api/v1/nodes/_all/:name/untaint',
    {
      onRequest: app.requireUser,
      schema: schema(
        'Remove the taints with a key (and effect, when given)',
        {
          type: 'object',
          required: ['key'],
          additionalProperties: false,
          properties: { key: { type: 'string', maxLength: 316 }, effect: { type: 'string', enum: [...TAINT_EFFECTS] } },
        },
        objectOf({ message: string, node: string, removedTaintKey: string }),
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const body = request.body as { key: string; effect?: TaintEffect };
      checkTaint(body.key, undefined, body.effect, false);
      const { ctx, node } = await prepare(request, reply, signal, 'untaint');
      return removeTaint(ctx, node, body.key, body.effect);
    }),
  );

  /** 403 when the node runs a pod of kiteline's install namespace on kiteline's host cluster. */
  async function refuseKitelineNode(ctx: ToolRequest, node: string): Promise<void> {
    if (!(await hostGuard.reachesHost(ctx.conn))) return;
    const search = new URLSearchParams({ fieldSelector: `spec.nodeName=${node}`, limit: '1' });
    // kiteline's own credentials: whether kiteline runs there, and nothing else, is what counts.
    const own = await getJson<KubeList>(ctx, `/api/v1/namespaces/${encodeURIComponent(hostGuard.installNamespace)}/pods?${search}`, {});
    if ((own.items ?? []).length > 0) {
      throw new ForbiddenError(`node ${node} runs kiteline itself (cluster ${ctx.conn.name} is kiteline's host): drain it with kubectl, not through kiteline`);
    }
  }

  app.post(
    '/api/v1/nodes/_all/:name/drain',
    {
      onRequest: app.requireUser,
      schema: schema(
        'Cordon the node and evict its pods through the Eviction API (PodDisruptionBudgets respected)',
        {
          type: 'object',
          additionalProperties: false,
          properties: {
            force: { ...boolean, description: 'also evict pods no controller manages' },
            gracePeriod: { type: 'integer', minimum: -1, maximum: 86400, description: 'seconds each pod gets to stop; -1 (default): its own grace period' },
            deleteLocalData: { ...boolean, description: 'also evict pods with emptyDir volumes' },
            ignoreDaemonsets: { ...boolean, description: 'skip DaemonSet pods (default true); false refuses a node with DaemonSet pods' },
            timeoutSeconds: { type: 'integer', minimum: 1, maximum: MAX_DRAIN_TIMEOUT_SECONDS, description: `default ${DEFAULT_DRAIN_TIMEOUT_SECONDS}` },
            podSelector: { type: 'string', maxLength: 1024, description: 'only pods matching this label selector (kubectl drain --pod-selector)' },
          },
        },
        objectOf({
          message: string,
          node: string,
          complete: boolean,
          evicted: { type: 'array', items: podRef },
          terminating: { type: 'array', items: podRef },
          blocked: { type: 'array', items: podNote },
          failed: { type: 'array', items: podNote },
          skipped: { type: 'array', items: podNote },
          options: { type: 'object', additionalProperties: true },
        }),
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const body = (request.body ?? {}) as DrainBody;
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
      await refuseKitelineNode(ctx, node);
      const guardSelector = await hostGuard.listFieldSelector(ctx.conn, pods, undefined);
      const plan = await planDrain(ctx, node, options, guardSelector);
      for (const pod of plan.evict) {
        const namespace = pod.metadata?.namespace;
        requireAccess(auth, ctx.principal, ctx.conn.name, 'pods/eviction', namespace, 'create');
        await hostGuard.check(ctx.conn, { resolved: pods, namespace, name: pod.metadata?.name, verb: 'create' });
      }
      const audit = (report: DrainReport) => {
        for (const p of report.evicted) auditObject(request, { cluster: ctx.conn.name, verb: 'evict', resource: 'pods/eviction', ...p, status: 201 });
        for (const p of report.blocked) auditObject(request, { cluster: ctx.conn.name, verb: 'evict', resource: 'pods/eviction', namespace: p.namespace, name: p.name, status: 429 });
        for (const p of report.failed) auditObject(request, { cluster: ctx.conn.name, verb: 'evict', resource: 'pods/eviction', namespace: p.namespace, name: p.name, status: 409 });
      };
      try {
        const report = await drainNode(ctx, node, plan, options);
        audit(report);
        return report;
      } catch (err) {
        if (err instanceof HttpError && Array.isArray((err.details as DrainReport | undefined)?.evicted)) audit(err.details as DrainReport);
        throw err;
      }
    }),
  );
}
