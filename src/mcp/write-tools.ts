// The MCP tools that change a cluster (docs/mcp.md, "Writes"): apply YAML, patch, scale, rollout
// restart, delete, cordon and uncordon, and a one-shot exec. Each is authorized exactly as the REST
// routes authorize the same write (src/cluster-access/writes.ts, src/tools/apply.ts: kiteline's
// roles as what it is, the host guard, the caller's impersonation), then dry-run on the cluster,
// then shown to a human through MCP elicitation (cluster, kind, namespace, name and what the dry
// run says would change) and done only on an explicit yes. A role may waive the question for the
// writes it grants (mcp.confirmWrites: false), never on a production cluster; a client that cannot
// ask (no elicitation, or a stateless call) gets 428 for a write that needs a human.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createTwoFilesPatch } from 'diff';
import { stringify } from 'yaml';
import { z } from 'zod';
import type { AgentPolicy } from '../auth/auth-service.js';
import type { Verb } from '../auth/principal.js';
import type { KubeObject } from '../cluster-access/calls.js';
import type { CallerContext } from '../cluster-access/reads.js';
import { describeObject } from '../cluster-access/target.js';
import { reduceObject } from '../cluster-access/watch-events.js';
import {
  authorizeWrite,
  deleteObject,
  patchObject,
  type WriteSegments,
  type WriteTarget,
} from '../cluster-access/writes.js';
import { HttpError } from '../errors.js';
import { parseApplyDocuments, type ApplyDocument } from '../tools/apply-documents.js';
import { applyAuthorizer, applyDocuments, type ApplyOptions, type DocumentOutcome } from '../tools/apply.js';
import { requireWorkloadAccess, POD_RESOURCE } from '../workloads/access.js';
import { runCommand } from '../workloads/exec-channel.js';
import type { McpDeps } from './server.js';

/** How long a write waits for the human's answer. */
export const CONFIRM_TIMEOUT_MS = 10 * 60 * 1000;
/** A dry run's diff shown to the human is cut here (the question must stay readable). */
const MAX_PREVIEW = 16 * 1024;
/** What of each side a diff looks at, and the most edits it computes. */
const MAX_DIFF_INPUT = 256 * 1024;
const MAX_EDITS = 2000;
/** A one-shot exec keeps this much of its output, and runs at most this long. */
const MAX_EXEC_OUTPUT = 48 * 1024;
const EXEC_TIMEOUT_MS = 60_000;
const MAX_EXEC_ARGS = 64;
/** The annotation `kubectl rollout restart` sets on the pod template. */
const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';
const RESTARTABLE = ['deployments', 'statefulsets', 'daemonsets'];
const SCALABLE = ['deployments', 'statefulsets', 'replicasets', 'replicationcontrollers'];

/** What a tool call names, for its audit record; `arguments` as stored (no secret values). */
export interface CallTarget {
  cluster?: string;
  resource?: string;
  namespace?: string;
  name?: string;
  arguments?: Record<string, unknown>;
}

/** What the read tools' server hands the write tools. */
export interface WriteToolKit {
  server: McpServer;
  /** Registers a tool where the server can take it away again when a role denies it (mcp.denyTools). */
  register: McpServer['registerTool'];
  deps: McpDeps;
  policy: AgentPolicy;
  /** Runs one tool call: audit, metrics, limits, errors as tool errors (server.ts). */
  run: (
    tool: string,
    target: CallTarget,
    body: (on: (cluster: string) => Promise<CallerContext>) => Promise<string>,
    extra?: { signal: AbortSignal },
  ) => Promise<CallToolResult>;
  /** Refuses (403) a resource some role keeps from agents (mcp.denyResources). */
  allowResource: (resource: string) => void;
  /** The read tools' argument schemas. */
  fields: {
    cluster: z.ZodString;
    resource: z.ZodString;
    namespace: z.ZodString;
    name: z.ZodString;
    podNamespace: z.ZodString;
    container: z.ZodString;
  };
}

/** The request id and signal of the tools/call being answered (the SDK's `extra`). */
interface CallExtra {
  requestId: string | number;
  signal: AbortSignal;
}

const WRITE = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
const DESTRUCTIVE = { ...WRITE, destructiveHint: true };

/** An object without what only makes a diff noisy (managedFields, resourceVersion, status). */
function diffable(object: KubeObject | undefined): string {
  if (!object) return '';
  const reduced = reduceObject(object) as KubeObject;
  const metadata = { ...reduced.metadata };
  for (const key of ['resourceVersion', 'generation', 'managedFields', 'uid', 'creationTimestamp'])
    delete metadata[key];
  const { status: _status, ...rest } = reduced;
  return stringify({ ...rest, metadata });
}

/**
 * A unified diff of the object now and as the dry run says it would be, bounded: the objects are
 * cut to MAX_DIFF_INPUT and the diff gives up beyond MAX_EDITS (a cluster's objects may be large, and
 * the diff runs on the gateway's one thread).
 */
export function objectDiff(before: KubeObject | undefined, after: KubeObject | undefined): string {
  const [a, b] = [diffable(before), diffable(after)].map((text) => text.slice(0, MAX_DIFF_INPUT));
  const patch = createTwoFilesPatch('now', 'after', a, b, '', '', { context: 3, maxEditLength: MAX_EDITS });
  if (patch === undefined) return '(the change is too large to show as a diff)';
  const diff = patch
    .split('\n')
    .slice(3) // the "===" line and the two file names say nothing here
    .join('\n')
    .trim();
  const shown = diff.includes('@@') ? diff : '(no change)';
  return shown.length > MAX_PREVIEW ? `${shown.slice(0, MAX_PREVIEW)}\n… [diff truncated]` : shown;
}

/** A Secret's values never go into the audit trail: the arguments of a write to one say only that. */
function auditedPatch(resource: string, patch: unknown): unknown {
  return resource.split('/')[0] === 'secrets' ? '(a patch of a Secret: not stored)' : patch;
}

/** The documents of an apply as the audit record keeps them: what, never the values. */
function auditedDocuments(docs: ApplyDocument[]) {
  return docs.map((d) => ({ kind: d.kind, ...(d.namespace ? { namespace: d.namespace } : {}), name: d.name }));
}

function outcomesText(documents: DocumentOutcome[]): string {
  return stringify({
    documents: documents.map((d) => ({
      kind: d.kind,
      ...(d.namespace ? { namespace: d.namespace } : {}),
      name: d.name,
      result: d.result,
      ...(d.error ? { error: d.error } : {}),
    })),
  });
}

export function registerWriteTools(kit: WriteToolKit): void {
  const { server, register, deps, policy, run, allowResource, fields } = kit;
  const { cluster, resource, namespace, name, podNamespace, container } = fields;
  const oneObject = { cluster, resource, namespace: namespace.optional(), name };

  // A write tool is listed only when some role grants its verb (the server takes away denied ones).
  /**
   * Asks the human, unless a role granting the write waives it (`waived`; never on a production
   * cluster): resolves when the answer is yes, throws 428 otherwise.
   */
  async function confirm(ctx: CallerContext, waived: boolean, question: string, extra: CallExtra) {
    if (waived && !ctx.conn.production) return;
    const capabilities = server.server.getClientCapabilities();
    const production = ctx.conn.production ? ` (cluster ${ctx.conn.name} is production)` : '';
    if (!capabilities?.elicitation?.form) {
      throw new HttpError(
        428,
        'PreconditionRequired',
        `not done: this write needs a human's confirmation${production}, and this client cannot ask one ` +
          '(MCP elicitation, in a session). Nothing was changed.',
      );
    }
    const asked = server.server.elicitInput(
      {
        message: question,
        requestedSchema: {
          type: 'object',
          properties: {
            confirm: { type: 'boolean', title: 'Do it', description: 'yes: make this change now' },
          },
          required: ['confirm'],
        },
      },
      { relatedRequestId: extra.requestId, timeout: CONFIRM_TIMEOUT_MS, signal: extra.signal },
    );
    // No answer in time, the call cancelled, the session ended: nothing is done either.
    const answer = await asked.catch((err: Error) => {
      throw new HttpError(
        428,
        'PreconditionRequired',
        `not done: no answer from the user (${err.message}). Nothing was changed.`,
      );
    });
    if (answer.action !== 'accept' || answer.content?.confirm !== true) {
      const said = answer.action === 'accept' ? 'answered no' : answer.action === 'decline' ? 'declined' : 'cancelled';
      throw new HttpError(428, 'PreconditionRequired', `not done: the user ${said}. Nothing was changed.`);
    }
  }

  /** The question a write asks: where, what, and what the dry run says. */
  function question(
    action: string,
    ctx: CallerContext,
    target: Pick<WriteTarget, 'resource' | 'namespace' | 'name'>,
    preview: string,
  ) {
    const where = describeObject(target.resource, target.namespace, target.name);
    const production = ctx.conn.production ? ' (PRODUCTION)' : '';
    return `An AI agent asks to ${action} ${where} on cluster ${ctx.conn.name}${production}.\n\n${preview}`;
  }

  /** A role granting this write waives the human's confirmation (mcp.confirmWrites: false). */
  const waived = (ctx: CallerContext, target: Pick<WriteTarget, 'resource' | 'namespace'>, verb: Verb) =>
    policy.writeUnconfirmed({
      cluster: ctx.conn.name,
      namespace: target.namespace ?? '_all',
      resource: target.resource,
      verb,
    });

  /** Authorizes, dry-runs, confirms and makes a patch; the answer names what changed. */
  async function confirmedPatch(
    on: (cluster: string) => Promise<CallerContext>,
    extra: CallExtra,
    segments: WriteSegments & { cluster: string },
    type: 'strategic' | 'merge' | 'json',
    patch: unknown,
    action: string,
  ): Promise<string> {
    const ctx = await on(segments.cluster);
    const target = await authorizeWrite(deps, ctx, segments, 'patch');
    allowResource(target.resource);
    const before = await patchObject(deps, ctx, target, 'json', [], true);
    const after = await patchObject(deps, ctx, target, type, patch, true);
    await confirm(ctx, waived(ctx, target, 'patch'), question(action, ctx, target, objectDiff(before, after)), extra);
    const done = await patchObject(deps, ctx, target, type, patch, false);
    const object = describeObject(target.resource, target.namespace, target.name);
    return `done: ${action} ${object} (resourceVersion ${done.metadata?.resourceVersion ?? '?'})`;
  }

  if (policy.grantsVerb('patch'))
    register(
      'patch_resource',
      {
        title: 'Patch a resource',
        description:
          'Changes one object with a patch (strategic merge by default; merge; or json: an array of RFC 6902 ' +
          'operations). It is dry-run first and a human confirms the diff before it is applied.',
        inputSchema: {
          ...oneObject,
          patch: z.union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))]),
          patchType: z.enum(['strategic', 'merge', 'json']).optional(),
        },
        annotations: WRITE,
      },
      (args, extra) =>
        run(
          'patch_resource',
          {
            ...args,
            arguments: { patchType: args.patchType ?? 'strategic', patch: auditedPatch(args.resource, args.patch) },
          },
          (on) =>
            confirmedPatch(
              on,
              extra,
              { ...args, namespace: args.namespace ?? '_all' },
              args.patchType ?? 'strategic',
              args.patch,
              'patch',
            ),
          extra,
        ),
    );

  if (policy.grantsVerb('patch'))
    register(
      'scale',
      {
        title: 'Scale a workload',
        description: `Sets the replicas of a ${SCALABLE.join(', ')} (its scale subresource), after a human confirms.`,
        inputSchema: {
          cluster,
          resource: z.enum(SCALABLE as [string, ...string[]]),
          namespace: namespace,
          name,
          replicas: z.number().int().min(0).max(10_000),
        },
        annotations: WRITE,
      },
      (args, extra) =>
        run(
          'scale',
          { ...args, resource: `${args.resource}/scale`, arguments: { replicas: args.replicas } },
          (on) =>
            confirmedPatch(
              on,
              extra,
              { ...args, subresource: 'scale' },
              'merge',
              { spec: { replicas: args.replicas } },
              `scale to ${args.replicas} replicas`,
            ),
          extra,
        ),
    );

  if (policy.grantsVerb('patch'))
    register(
      'rollout_restart',
      {
        title: 'Restart a workload',
        description:
          `Restarts the pods of a ${RESTARTABLE.join(', ')} as \`kubectl rollout restart\` does (an annotation on ` +
          'its pod template), after a human confirms.',
        inputSchema: { cluster, resource: z.enum(RESTARTABLE as [string, ...string[]]), namespace, name },
        annotations: WRITE,
      },
      (args, extra) =>
        run(
          'rollout_restart',
          args,
          (on) =>
            confirmedPatch(
              on,
              extra,
              args,
              'strategic',
              { spec: { template: { metadata: { annotations: { [RESTARTED_AT]: new Date().toISOString() } } } } },
              'restart',
            ),
          extra,
        ),
    );

  for (const [tool, unschedulable] of [
    ['cordon_node', true],
    ['uncordon_node', false],
  ] as const) {
    if (!policy.grantsVerb('patch')) continue;
    register(
      tool,
      {
        title: unschedulable ? 'Cordon a node' : 'Uncordon a node',
        description:
          `${unschedulable ? 'Marks' : 'Unmarks'} a node unschedulable (spec.unschedulable), ` +
          'after a human confirms.',
        inputSchema: { cluster, node: name.describe("the node's name") },
        annotations: WRITE,
      },
      (args, extra) =>
        run(
          tool,
          { cluster: args.cluster, resource: 'nodes', name: args.node },
          (on) =>
            confirmedPatch(
              on,
              extra,
              { cluster: args.cluster, resource: 'nodes', namespace: '_all', name: args.node },
              'strategic',
              { spec: { unschedulable } },
              unschedulable ? 'cordon' : 'uncordon',
            ),
          extra,
        ),
    );
  }

  if (policy.grantsVerb('delete'))
    register(
      'delete_resource',
      {
        title: 'Delete a resource',
        description: 'Deletes one object (its dependents follow in the background), after a human confirms.',
        inputSchema: oneObject,
        annotations: DESTRUCTIVE,
      },
      (args, extra) =>
        run(
          'delete_resource',
          args,
          async (on) => {
            const ctx = await on(args.cluster);
            const target = await authorizeWrite(deps, ctx, { ...args, namespace: args.namespace ?? '_all' }, 'delete');
            allowResource(target.resource);
            const dry = await deleteObject(deps, ctx, target, true);
            const preview = `The object as it is now:\n${diffable(dry)}`.slice(0, MAX_PREVIEW);
            await confirm(ctx, waived(ctx, target, 'delete'), question('DELETE', ctx, target, preview), extra);
            await deleteObject(deps, ctx, target, false);
            return `done: deleted ${describeObject(target.resource, target.namespace, target.name)}`;
          },
          extra,
        ),
    );

  if (policy.grantsVerb('patch') && policy.grantsVerb('create'))
    register(
      'apply_yaml',
      {
        title: 'Apply YAML',
        description:
          'Applies one or more YAML documents with server-side apply (field manager kiteline), as ' +
          '`kubectl apply --server-side` does: every document is dry-run first and a human confirms the list.',
        inputSchema: {
          cluster,
          yaml: z
            .string()
            .min(1)
            .max(512 * 1024),
          namespace: namespace.optional().describe('the namespace of namespaced documents that name none'),
          force: z.boolean().optional().describe("take fields other managers own (server-side apply's force)"),
        },
        annotations: WRITE,
      },
      (args, extra) => {
        // Parsed once, here, so the audit record can name the documents; a parse error is the
        // call's answer, reported (and audited) by run() below.
        let docs: ApplyDocument[] = [];
        let unparsable: Error | undefined;
        try {
          docs = parseApplyDocuments(args.yaml);
        } catch (err) {
          unparsable = err as Error;
        }
        return run(
          'apply_yaml',
          {
            cluster: args.cluster,
            resource: 'documents',
            namespace: args.namespace,
            arguments: { documents: auditedDocuments(docs), force: args.force === true },
          },
          async (on) => {
            if (unparsable !== undefined) throw unparsable;
            const ctx = await on(args.cluster);
            const authorize = applyAuthorizer(deps, ctx);
            const options = {
              force: args.force === true,
              defaultNamespace: args.namespace ?? 'default',
              authorize: async (...doc: Parameters<ApplyOptions['authorize']>) => {
                allowResource(doc[1]);
                await authorize(...doc);
              },
            };
            const plan = await applyDocuments(ctx, docs, { ...options, dryRun: true });
            const target = { resource: `${plan.documents.length} document(s)`, namespace: args.namespace, name: '' };
            // Waived only when, for every document, roles granting its create and its patch say so.
            const allWaived = plan.documents.every((d) =>
              (['create', 'patch'] as const).every((verb) =>
                waived(ctx, { resource: d.resource ?? d.kind, namespace: d.namespace }, verb),
              ),
            );
            await confirm(
              ctx,
              allWaived,
              question(
                'apply',
                ctx,
                target,
                `${args.force ? 'force: true (fields other managers own are taken over)\n' : ''}` +
                  `The dry run says:\n${outcomesText(plan.documents)}`,
              ),
              extra,
            );
            const done = await applyDocuments(ctx, docs, { ...options, dryRun: false });
            return `done:\n${outcomesText(done.documents)}`;
          },
          extra,
        );
      },
    );

  if (policy.grantsVerb('create'))
    register(
      'exec',
      {
        title: 'Run a command in a container',
        description:
          `Runs one command in a container (no TTY, no stdin) and answers its exit code and output (at most ` +
          `${MAX_EXEC_OUTPUT / 1024} KiB, ${EXEC_TIMEOUT_MS / 1000} s), after a human confirms. The command is ` +
          'an argv array, not a shell line: ["sh", "-c", "..."] for a shell.',
        inputSchema: {
          cluster,
          namespace: podNamespace,
          pod: name.describe("the pod's name"),
          container: container.optional(),
          command: z.array(z.string().max(4096)).min(1).max(MAX_EXEC_ARGS),
        },
        annotations: DESTRUCTIVE,
      },
      (args, extra) =>
        run(
          'exec',
          {
            cluster: args.cluster,
            resource: 'pods/exec',
            namespace: args.namespace,
            name: args.pod,
            arguments: { container: args.container ?? '', command: args.command },
          },
          async (on) => {
            const ctx = await on(args.cluster);
            allowResource('pods/exec');
            await requireWorkloadAccess(deps, ctx.principal, ctx.conn, {
              kind: POD_RESOURCE,
              resource: 'pods/exec',
              verb: 'create',
              namespace: args.namespace,
              name: args.pod,
            });
            const target = { resource: 'pods', namespace: args.namespace, name: args.pod };
            const where = args.container ? ` (container ${args.container})` : '';
            await confirm(
              ctx,
              waived(ctx, { resource: 'pods/exec', namespace: args.namespace }, 'create'),
              question('run a command in', ctx, target, `Command${where}: ${JSON.stringify(args.command)}`),
              extra,
            );
            const ran = await runCommand(
              ctx.conn,
              { namespace: args.namespace, pod: args.pod, container: args.container, command: args.command },
              ctx.headers,
              { maxBytes: MAX_EXEC_OUTPUT, timeoutMs: EXEC_TIMEOUT_MS, signal: ctx.signal },
            );
            const notes = [
              ...(ran.cut
                ? [`output truncated: the first ${MAX_EXEC_OUTPUT} bytes are shown, the command was stopped`]
                : []),
              ...(ran.timedOut ? [`stopped after ${EXEC_TIMEOUT_MS / 1000} s`] : []),
            ];
            return stringify({
              exitCode: ran.result.exitCode ?? null,
              ...(ran.result.error ? { error: ran.result.error } : {}),
              stdout: ran.stdout.toString('utf8'),
              ...(ran.stderr ? { stderr: ran.stderr } : {}),
              ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
            });
          },
          extra,
        ),
    );
}
