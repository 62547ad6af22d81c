// kiteline as a Model Context Protocol server (docs/mcp.md): an AI agent calls tools as the user
// whose key it holds, on every cluster that user may use. MCP is another door, not another brain:
// each tool reads through cluster-access/reads.ts (kiteline's roles, the host guard, the caller's
// impersonation), describes with src/describe/, and adds only what is MCP's own: a bounded text
// answer an agent can read, and one audit record per call (tool, cluster, kind, namespace, name,
// result, the agent's client) in the durable trail, counted in /metrics.
//
// A server per HTTP request (stateless Streamable HTTP), or per session for a client that can
// answer a confirmation (routes/mcp.ts); either way a caller's roles are read again on every call.
// The tools that change a cluster, and the human's confirmation they ask for, are in write-tools.ts.
import { McpServer, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { z } from 'zod';
import type { AuditEntry } from '../audit/record.js';
import type { AgentPolicy } from '../auth/auth-service.js';
import type { Principal } from '../auth/principal.js';
import { selectCluster } from '../cluster-access/cluster-select.js';
import { impersonationHeaders } from '../cluster-access/impersonation.js';
import { listObjects, readObject, type CallerContext, type ReadKit } from '../cluster-access/reads.js';
import { reduceObject } from '../cluster-access/watch-events.js';
import { NAME_PATTERN, NAMESPACE_PATTERN, RESOURCE_PATTERN } from '../cluster-access/segments.js';
import type { ClusterDirectory } from '../clusters/types.js';
import { describe } from '../describe/describe.js';
import type { Json } from '../describe/format.js';
import { callerAccess, RelatedReader } from '../describe/related.js';
import { ForbiddenError, HttpError } from '../errors.js';
import { readObjectEvents, type CoreEvent } from '../tools/events.js';
import { MAX_QUERY_LENGTH, MAX_SEARCH_LIMIT, searchAsCaller } from '../tools/search.js';
import type { SearchIndexes } from '../tools/search-index.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../workloads/access.js';
import { CONTAINER_PATTERN, readLogTail, type LogTail } from '../workloads/logs.js';
import { registerWriteTools, type CallTarget } from './write-tools.js';

/** A tool's text answer above this is cut, with a note saying so (agents pay for every token). */
export const MAX_TOOL_TEXT = 64 * 1024;
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 500;
const DEFAULT_LOG_LINES = 100;
const MAX_LOG_LINES = 2000;
const DEFAULT_SEARCH_RESULTS = 20;

/** What the tools need from the gateway. */
export interface McpDeps extends ReadKit {
  clusters: ClusterDirectory;
  auth: ReadKit['auth'] & {
    canAccessCluster(principal: Principal, cluster: string): boolean;
    agentPolicy(principal: Principal): AgentPolicy;
  };
  /** Each cluster's search index (the search route's). */
  searchIndexes: SearchIndexes;
  /** Records one tool call (the audit service, with the request's origin filled in). */
  audit(entry: Omit<AuditEntry, 'who' | 'whoKind' | 'whoId' | 'requestId'>): void;
  /** Seconds to wait when the caller made too many tool calls lately; else undefined, and this call counts. */
  overLimit(): number | undefined;
  /** Counts one tool call in /metrics. */
  counted(tool: string, result: 'success' | 'failure'): void;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** The agent's client, as its User-Agent names it (for the audit record). */
  client: string;
}

/** A call's arguments in its audit record are cut here. */
const MAX_AUDITED_ARGUMENTS = 2048;

const cluster = z.string().min(1).max(253).describe('the cluster, as list_clusters names it');
const resource = z
  .string()
  .max(253)
  .regex(new RegExp(RESOURCE_PATTERN))
  .describe('a plural resource name (pods, deployments, configmaps) or <plural>.<group>');
const namespace = z
  .string()
  .max(63)
  .regex(new RegExp(NAMESPACE_PATTERN))
  .describe('the namespace; omit (or _all) for all namespaces and for cluster-scoped kinds');
const name = z.string().max(253).regex(new RegExp(NAME_PATTERN)).describe("the object's name");
const podNamespace = z.string().max(63).regex(new RegExp(CONTAINER_PATTERN)).describe("the pod's namespace (not _all)");
const container = z.string().max(63).regex(new RegExp(CONTAINER_PATTERN)).describe("the container's name");
const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

/** A text answer, cut at MAX_TOOL_TEXT with a note. */
function text(body: string, isError = false): CallToolResult {
  const size = Buffer.byteLength(body);
  const shown =
    size > MAX_TOOL_TEXT
      ? `${Buffer.from(body).subarray(0, MAX_TOOL_TEXT).toString('utf8')}\n… [truncated: the answer was ${size} ` +
        `bytes, at most ${MAX_TOOL_TEXT} are shown; narrow the request (a namespace, a labelSelector, a limit)]`
      : body;
  return { content: [{ type: 'text', text: shown }], ...(isError ? { isError: true } : {}) };
}

/** A log's end as an agent reads it, saying what was left out. */
function logText(tail: LogTail): string {
  const notes = [
    ...(tail.dropped > 0
      ? [`the ${tail.dropped} older lines read are left out (64 KiB at most); ask for fewer lines`]
      : []),
    ...(tail.cut
      ? ['the read stopped at 8 MiB of log: newer lines may be missing; use sinceSeconds or fewer lines']
      : []),
  ];
  const body = tail.lines.length === 0 ? '(the log is empty)' : tail.lines.join('\n');
  return notes.length === 0 ? body : `… [truncated: ${notes.join('; ')}]\n${body}`;
}

/** Events as an agent reads them: the columns `kubectl describe` shows, newest first. */
function eventsText(items: CoreEvent[]): string {
  if (items.length === 0) return 'no events (events are kept for an hour by default)';
  return stringify({
    events: items.map((e) => ({
      type: e.type,
      reason: e.reason,
      last: e.lastTimestamp || e.eventTime || e.firstTimestamp || e.metadata?.creationTimestamp,
      count: e.count ?? 1,
      from: (e.source as { component?: string } | undefined)?.component || e.reportingComponent || undefined,
      message: e.message,
    })),
  });
}

/** An object as an agent reads it: YAML without managedFields and the last-applied copy (noise, and large). */
/** The REST routes' path segments of the one object a tool names (a cluster-scoped one: `_all`). */
function objectSegments(args: { resource: string; namespace?: string; name: string }) {
  return { resource: args.resource, namespace: args.namespace ?? '_all', name: args.name };
}

function objectText(object: Json): string {
  return stringify(reduceObject(object));
}

/** The MCP server for one request of one caller. */
export function createMcpServer(principal: Principal, deps: McpDeps): McpServer {
  const server = new McpServer(
    { name: 'kiteline', version: '1' },
    {
      instructions:
        'kiteline: Kubernetes clusters as the signed-in user. Start with list_clusters; every other tool ' +
        'takes a cluster. Answers above 64 KiB are truncated: narrow by namespace, labelSelector or limit.',
    },
  );

  const policy = deps.auth.agentPolicy(principal);
  // Every tool, kept to take away those a role denies agents (mcp.denyTools) once all are made.
  const tools = new Map<string, RegisteredTool>();
  const register: McpServer['registerTool'] = (toolName, config, callback) => {
    const handle = server.registerTool(toolName, config, callback);
    tools.set(toolName, handle);
    return handle;
  };

  /**
   * Refuses a resource some role keeps from agents (mcp.denyResources): a subresource by its
   * resource too, and a resource named with its group (`deployments.apps`) by its plural alone
   * too, so no spelling gets around a deny (a kind of another group with the same plural is kept
   * out with it: the safe side).
   */
  function resourceDenied(resource: string): boolean {
    const base = resource.split('/')[0];
    return [resource, base, base.split('.')[0]].some((name) => policy.resourceDenied(name));
  }
  function allowResource(resource: string): void {
    if (resourceDenied(resource))
      throw new ForbiddenError(`a role of yours keeps ${resource.split('/')[0]} from AI agents (mcp.denyResources)`);
  }

  /**
   * The cluster of a call among those the caller may use, with the caller's upstream headers; the
   * call takes one of the caller's slots there (429 beyond the per-caller limits, as any request),
   * given back through `held` when the call ends.
   */
  async function clusterOf(clusterName: string, held: Array<() => void>, signal: AbortSignal): Promise<CallerContext> {
    const conn = await selectCluster(deps.clusters, { headers: { 'x-cluster-name': clusterName }, query: {} }, (c) =>
      deps.auth.canAccessCluster(principal, c),
    );
    held.push(conn.admit(`${principal.kind}:${principal.id}`, false));
    return { conn, principal, headers: impersonationHeaders(conn, principal), signal };
  }

  /**
   * Runs a tool: its answer, or its refusal as a tool error; one audit record and count either way
   * (a call over the caller's limit is only counted).
   * `body` gets `on(cluster)`, the call's way to its cluster. The record keeps the arguments other
   * than the four it names (or `target.arguments`, what a write tool chose to keep of them).
   * `extra` (the SDK's, for a call that may wait on a human) ends the call's requests when the
   * client cancels it.
   */
  async function run(
    tool: string,
    target: CallTarget,
    body: (on: (cluster: string) => Promise<CallerContext>) => Promise<string>,
    extra?: { signal: AbortSignal },
  ): Promise<CallToolResult> {
    const { cluster: _c, resource: _r, namespace: _n, name: _m, arguments: chosen, ...others } = target;
    const kept = chosen ?? others;
    const args = Object.keys(kept).length > 0 ? JSON.stringify(kept).slice(0, MAX_AUDITED_ARGUMENTS) : undefined;
    const signal = extra ? AbortSignal.any([deps.signal, extra.signal]) : deps.signal;
    let status = 200;
    const held: Array<() => void> = [];
    const wait = deps.overLimit();
    if (wait !== undefined) {
      // Over the caller's limit: counted, not audited one by one (a looping agent would flood the trail).
      deps.counted(tool, 'failure');
      return text(`429 too many tool calls; try again in ${wait} seconds`, true);
    }
    try {
      // A tool a role came to deny after the session listed it (mcp.denyTools) is refused all the same.
      if (policy.toolDenied(tool)) throw new ForbiddenError(`a role of yours keeps the tool ${tool} from AI agents`);
      return text(await body((cluster) => clusterOf(cluster, held, signal)));
    } catch (err) {
      status = err instanceof HttpError ? err.status : 500;
      if (!(err instanceof HttpError)) throw err;
      return text(`${err.status} ${err.message}`, true);
    } finally {
      for (const release of held) release();
      const result = status < 400 ? 'success' : 'failure';
      deps.counted(tool, result);
      deps.audit({
        when: new Date().toISOString(),
        verb: `mcp:${tool}`,
        cluster: target.cluster ?? '',
        resource: target.resource ?? '',
        namespace: target.namespace ?? '',
        name: target.name ?? '',
        subject: deps.client,
        ...(args ? { arguments: args } : {}),
        result,
        status,
      });
    }
  }

  register(
    'list_clusters',
    {
      title: 'List clusters',
      description: 'The clusters you may use: name, whether it is ready, its Kubernetes version.',
      annotations: READ_ONLY,
    },
    () =>
      run('list_clusters', {}, async () => {
        const usable = deps.clusters
          .list()
          .filter((c) => c.enabled && deps.auth.canAccessCluster(principal, c.name))
          .map((c) => ({ name: c.name, ready: c.ready, version: c.version }));
        return stringify({ clusters: usable });
      }),
  );

  register(
    'list_resources',
    {
      title: 'List resources',
      description:
        'The objects of a resource in a namespace (or all namespaces): namespace, name, age and status phase ' +
        'when there is one. Use get_resource or describe_resource for one object.',
      inputSchema: {
        cluster,
        resource,
        namespace: namespace.optional(),
        labelSelector: z.string().max(4096).optional(),
        fieldSelector: z.string().max(4096).optional(),
        limit: z
          .number()
          .int()
          .min(1)
          .max(MAX_LIST_LIMIT)
          .optional()
          .describe(`at most (default ${DEFAULT_LIST_LIMIT})`),
      },
      annotations: READ_ONLY,
    },
    (args) =>
      run('list_resources', args, async (on) => {
        allowResource(args.resource);
        const ctx = await on(args.cluster);
        const { list, resolved } = await listObjects(
          deps,
          ctx,
          { resource: args.resource, namespace: args.namespace, name: undefined },
          {
            labelSelector: args.labelSelector,
            fieldSelector: args.fieldSelector,
            limit: args.limit ?? DEFAULT_LIST_LIMIT,
          },
        );
        const items = (list.items ?? []).map((item) => ({
          ...(item.metadata?.namespace ? { namespace: item.metadata.namespace } : {}),
          name: item.metadata?.name,
          created: item.metadata?.creationTimestamp,
          ...((item.status as { phase?: string } | undefined)?.phase
            ? { phase: (item.status as { phase: string }).phase }
            : {}),
        }));
        const more = list.metadata?.continue ? { more: 'there are more: narrow the request or raise limit' } : {};
        return stringify({ kind: resolved.kind, count: items.length, items, ...more });
      }),
  );

  const oneObject = {
    cluster,
    resource,
    namespace: namespace.optional(),
    name,
  };

  register(
    'get_resource',
    {
      title: 'Get a resource',
      description: "One object as YAML, without managedFields and kubectl's last-applied annotation.",
      inputSchema: oneObject,
      annotations: READ_ONLY,
    },
    (args) =>
      run('get_resource', args, async (on) => {
        allowResource(args.resource);
        const ctx = await on(args.cluster);
        const { object } = await readObject(deps, ctx, objectSegments(args));
        return objectText(object);
      }),
  );

  register(
    'describe_resource',
    {
      title: 'Describe a resource',
      description: 'The text `kubectl describe` prints for one object, with its events and related objects.',
      inputSchema: oneObject,
      annotations: READ_ONLY,
    },
    (args) =>
      run('describe_resource', args, async (on) => {
        allowResource(args.resource);
        const ctx = await on(args.cluster);
        const { resolved, object } = await readObject(deps, ctx, objectSegments(args));
        const related = new RelatedReader(callerAccess(deps.auth, deps.hostGuard, ctx.conn, principal, deps.signal));
        return describe(resolved.group, object, related);
      }),
  );

  register(
    'resource_events',
    {
      title: 'Events of a resource',
      description: 'The events of one object (what `kubectl describe` lists under Events), newest first.',
      inputSchema: oneObject,
      annotations: READ_ONLY,
    },
    (args) =>
      run('resource_events', args, async (on) => {
        allowResource(args.resource);
        const ctx = await on(args.cluster);
        const answer = await readObjectEvents(deps, ctx, objectSegments(args));
        return eventsText(answer.items);
      }),
  );

  register(
    'pod_logs',
    {
      title: "A pod's logs",
      description:
        "The last lines of a container's log (the pod's only container unless one is named). " +
        'previous: the log of the container before its last restart.',
      inputSchema: {
        cluster,
        namespace: podNamespace,
        pod: name.describe("the pod's name"),
        container: container.optional(),
        tailLines: z
          .number()
          .int()
          .min(1)
          .max(MAX_LOG_LINES)
          .optional()
          .describe(`the last N lines (default ${DEFAULT_LOG_LINES})`),
        sinceSeconds: z.number().int().min(1).max(31_536_000).optional().describe('only lines of the last N seconds'),
        previous: z.boolean().optional(),
      },
      annotations: READ_ONLY,
    },
    (args) =>
      run(
        'pod_logs',
        { cluster: args.cluster, resource: 'pods/log', namespace: args.namespace, name: args.pod },
        async (on) => {
          allowResource('pods/log');
          const ctx = await on(args.cluster);
          await requireWorkloadAccess(deps, principal, ctx.conn, {
            kind: POD_RESOURCE,
            resource: 'pods/log',
            verb: 'get',
            namespace: args.namespace,
            name: args.pod,
          });
          const tail = await readLogTail(
            ctx.conn,
            ctx.headers,
            args.namespace,
            args.pod,
            {
              container: args.container,
              tailLines: args.tailLines ?? DEFAULT_LOG_LINES,
              timestamps: false,
              previous: args.previous === true,
              sinceSeconds: args.sinceSeconds,
              follow: false,
            },
            deps.signal,
            MAX_TOOL_TEXT - 512,
          );
          return logText(tail);
        },
      ),
  );

  register(
    'search',
    {
      title: 'Search a cluster',
      description:
        'Objects of the common kinds (workloads, pods, services, config maps, secrets, nodes, ...) whose name ' +
        'contains the query or whose label matches it (`key=value`); a first word may name a kind ("pod web").',
      inputSchema: {
        cluster,
        query: z.string().min(1).max(MAX_QUERY_LENGTH),
        namespace: namespace.optional(),
        limit: z
          .number()
          .int()
          .min(1)
          .max(MAX_SEARCH_LIMIT)
          .optional()
          .describe(`at most (default ${DEFAULT_SEARCH_RESULTS})`),
      },
      annotations: READ_ONLY,
    },
    (args) =>
      run('search', { cluster: args.cluster, namespace: args.namespace }, async (on) => {
        const found = await searchAsCaller(deps.searchIndexes, deps.auth, await on(args.cluster), {
          text: args.query,
          limit: args.limit ?? DEFAULT_SEARCH_RESULTS,
          namespace: args.namespace,
        });
        return stringify({
          total: found.total,
          ...(found.partial
            ? { partial: 'the index is still loading or incomplete: some objects may be missing' }
            : {}),
          results: found.results
            .filter((r) => !resourceDenied(r.resourceType))
            .map((r) => ({
              resource: r.resourceType,
              ...(r.namespace ? { namespace: r.namespace } : {}),
              name: r.name,
              created: r.createdAt,
            })),
        });
      }),
  );

  registerWriteTools({
    server,
    register,
    deps,
    policy,
    run,
    allowResource,
    fields: { cluster, resource, namespace, name, podNamespace, container },
  });
  for (const [toolName, handle] of tools) if (policy.toolDenied(toolName)) handle.remove();
  return server;
}
