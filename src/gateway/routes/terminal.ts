// Kite's terminals: GET /api/v1/terminal/<ns>/<pod>/ws?container=&shell= (a shell in a pod's
// container) and GET /api/v1/node-terminal/<node>/ws (a shell on a node, through a short-lived
// privileged pod: src/workloads/node-terminal.ts), both WebSockets speaking Kite's JSON messages
// (src/workloads/terminal.ts) over one exec with a TTY on the cluster's exec WebSocket.
//
// A pod terminal is authorized as `create` on pods/exec in the namespace (a connect subresource:
// the built-in viewer may not), a node terminal needs the admin role and `create` on pods/exec and
// on pods in the terminal pods' namespace; kiteline's own namespace on the host cluster is refused.
// Everything that can fail before the shell (parameters, roles, the pod or node, the exec's
// handshake, the node pod's creation) fails as plain HTTP, before the WebSocket handshake; a node
// pod that then does not start is an `error` message. One audit record per session (or refusal):
// who, cluster, pod, container (or node and its pod), start, end and the bytes each way.
// docs/workloads.md, Terminals.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type WebSocket from 'ws';
import { AuditSession } from '../../audit/session.js';
import type { Principal } from '../../auth/principal.js';
import type { ClusterConnection } from '../../clusters/types.js';
import { BadRequestError, ForbiddenError, HttpError } from '../../errors.js';
import { impersonationHeaders, type UpstreamHeaders } from '../../cluster-access/impersonation.js';
import { DNS_LABEL_PATTERN, NAME_PATTERN } from '../../cluster-access/segments.js';
import { clientClosed } from '../../cluster-access/upstream.js';
import { mayAccess } from '../../cluster-access/access.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../../workloads/access.js';
import { openExec } from '../../workloads/exec-channel.js';
import { CONTAINER_PATTERN } from '../../workloads/logs.js';
import {
  createNodeTerminalPod,
  DEFAULT_NODE_TERMINAL_SETTINGS,
  nodeShellCommand,
  NODE_TERMINAL_CONTAINER,
  NodeTerminalPods,
  waitForNodeTerminalPod,
} from '../../workloads/node-terminal.js';
import {
  SHELL_NAME_PATTERN,
  terminalCommand,
  terminalContainer,
  TerminalSession,
  type TerminalOutcome,
} from '../../workloads/terminal.js';
import { acceptWebSocket, isWebSocketRequest } from '../plugins/upgrades.js';
import { clusterQueryProperties, clusterSchema, streamed, type App } from '../schemas.js';
import { callerCluster } from '../tool-request.js';

/** The upstream reads before the handshake (the pod, the node, the pod's creation) give up after this. */
const PREPARE_TIMEOUT_MS = 30_000;

/**
 * A terminal's audit session. The container is its `subject` (kept in the durable trail too); the
 * node terminal's pod and the exit code reach the audit log line.
 */
type TerminalAudit = AuditSession<{ pod: string; exitCode: number }>;

/** A session being opened: its audit, and the cluster slot it holds once it has one. */
interface Opening {
  audit: TerminalAudit;
  release?: () => void;
}

/** The caller, the cluster it asked for, its upstream headers: what both routes check first. */
interface TerminalCaller {
  principal: Principal;
  conn: ClusterConnection;
  headers: UpstreamHeaders;
  /** Gives back the session's long-running slot on the cluster. */
  release: () => void;
  /** Whether the caller's roles, as they are later, still allow the session (else it is closed). */
  stillAllowed: (now: Principal) => boolean;
}

const webSocketAnswer = streamed({
  description: 'the answer is a WebSocket (101 Switching Protocols); each message a JSON {type, data}',
  type: 'object',
  additionalProperties: true,
});

const PodTerminalParams = Type.Object({
  namespace: Type.String({ maxLength: 63, pattern: DNS_LABEL_PATTERN }),
  pod: Type.String({ maxLength: 253, pattern: NAME_PATTERN }),
});
const shellQuery = Type.Optional(
  Type.String({
    pattern: SHELL_NAME_PATTERN,
    description: 'a shell to run by name (bash, sh, zsh, ash, ...); default: bash, else sh',
  }),
);
const PodTerminalQuery = Type.Object({
  container: Type.Optional(
    Type.String({
      pattern: CONTAINER_PATTERN,
      description: "the container (default: the pod's default container, as kubectl picks it)",
    }),
  ),
  shell: shellQuery,
  ...clusterQueryProperties,
});
/** Kite's node terminal takes no parameters; `shell` picks one on the host as the pod terminal does. */
const NodeTerminalQuery = Type.Object({ shell: shellQuery, ...clusterQueryProperties });
const NodeTerminalParams = Type.Object({ node: Type.String({ maxLength: 253, pattern: NAME_PATTERN }) });
const protocol =
  'Messages are JSON. The client sends {"type":"stdin","data"}, {"type":"resize","cols","rows"} and {"type":"ping"}; ' +
  'the server sends `connected`, `stdout`, `info`, `error`, `close` (with `exitCode`, then the WebSocket closes) ' +
  'and `pong`.';

export default async function terminalRoutes(app: App) {
  const { services } = app;
  const settings = DEFAULT_NODE_TERMINAL_SETTINGS;
  const nodePods = new NodeTerminalPods((err, pod) =>
    app.log.error({ err, pod }, 'deleting a node terminal pod failed'),
  );
  /** Each live session and the promise of its whole end (node pod deleted, audit record written). */
  const liveSessions = new Map<TerminalSession, Promise<void>>();
  // Shutting down ends every session before the server waits for its connections (the WebSockets
  // would hold it open), and deletes every node terminal pod (best effort, awaited).
  app.addHook('preClose', async () => {
    const ending = [...liveSessions].map(([session, ended]) =>
      session.shutdown('the gateway is shutting down').then(() => ended),
    );
    await Promise.all([...ending, nodePods.deleteAll()]);
  });

  /** Keeps the session among the live ones until `finish` (run once it is done) has run. */
  function follow(session: TerminalSession, finish: (outcome: TerminalOutcome) => Promise<void> | void): void {
    const ended = session.done.then(finish).finally(() => liveSessions.delete(session));
    liveSessions.set(session, ended);
  }

  /**
   * Opens a session with `open` (everything up to the running shell), audited as `create` on
   * `resource`; when that fails, the slot it took is given back and the refusal audited.
   */
  async function openSession(
    request: FastifyRequest,
    target: { resource: string; namespace: string; name: string },
    open: (opening: Opening) => Promise<void>,
  ): Promise<void> {
    const audit: TerminalAudit = new AuditSession(services.audit, request.log, request.principal, request, {
      verb: 'create',
      ...target,
    });
    const opening: Opening = { audit };
    try {
      await open(opening);
    } catch (err) {
      opening.release?.();
      audit.refuse(err instanceof HttpError ? err.status : 500);
      throw err;
    }
  }

  function endAudit(audit: TerminalAudit, outcome: TerminalOutcome): void {
    audit.end({
      status: 101,
      result: outcome.error === undefined ? 'success' : 'failure',
      bytesIn: outcome.bytesIn,
      bytesOut: outcome.bytesOut,
      ...(outcome.exitCode !== undefined ? { exitCode: outcome.exitCode } : {}),
    });
  }

  /** Picks the cluster, checks every access, takes a long-running slot (the opening's to give back). */
  async function terminalCaller(
    request: FastifyRequest,
    opening: Opening,
    namespace: string,
    accesses: Array<{ resource: string; name: string | undefined }>,
    adminOnly = false,
  ): Promise<TerminalCaller> {
    if (!isWebSocketRequest(request))
      throw new BadRequestError('this route speaks WebSocket: send an Upgrade: websocket request');
    const { principal, conn } = await callerCluster(app, request);
    opening.audit.name({ cluster: conn.name });
    for (const { resource, name } of accesses) {
      await requireWorkloadAccess(services, principal, conn, {
        kind: POD_RESOURCE,
        resource,
        verb: 'create',
        namespace,
        name,
      });
    }
    const release = conn.admit(`${principal.kind}:${principal.id}`, true);
    opening.release = release;
    const stillAllowed = (now: Principal) =>
      (!adminOnly || services.auth.isAdmin(now)) &&
      services.auth.canAccessCluster(now, conn.name) &&
      accesses.every(({ resource }) => mayAccess(services.auth, now, conn.name, resource, namespace, 'create'));
    return { principal, conn, headers: impersonationHeaders(conn, principal), release, stillAllowed };
  }

  /**
   * Completes the handshake; `undo` drops what was prepared for the session (the exec, the node
   * pod) when that fails, or when the client left while it was prepared (`ws` would never answer).
   */
  async function handshake(
    request: FastifyRequest,
    reply: FastifyReply,
    caller: TerminalCaller,
    undo: () => void,
  ): Promise<WebSocket> {
    const socket = request.raw.socket;
    let onClose: () => void = () => undefined;
    const clientGone = new Promise<never>((_, reject) => {
      onClose = () => reject(clientClosed());
      socket.once('close', onClose);
    });
    clientGone.catch(() => undefined);
    try {
      if (socket.destroyed) throw clientClosed();
      return await Promise.race([acceptWebSocket(request, reply, { stillAllowed: caller.stillAllowed }), clientGone]);
    } catch (err) {
      undo();
      throw err;
    } finally {
      socket.removeListener('close', onClose);
    }
  }

  app.get(
    '/api/v1/terminal/:namespace/:pod/ws',
    {
      onRequest: app.requireUser,
      schema: clusterSchema("WebSocket: a shell in a pod's container (Kite's terminal)", {
        description:
          'Authorized as create on pods/exec in the namespace. ' +
          `Without \`shell\`: bash when the container has it, else sh. ${protocol}`,
        params: PodTerminalParams,
        querystring: PodTerminalQuery,
        response: { 200: webSocketAnswer },
      }),
    },
    async (request, reply) => {
      const { params, query } = request;
      const { namespace, pod } = params;
      await openSession(request, { resource: 'pods/exec', namespace, name: pod }, async (opening) => {
        const { audit } = opening;
        const command = terminalCommand(query.shell);
        const caller = await terminalCaller(request, opening, namespace, [{ resource: 'pods/exec', name: pod }]);
        const ctx = { conn: caller.conn, headers: caller.headers, signal: AbortSignal.timeout(PREPARE_TIMEOUT_MS) };
        const container = await terminalContainer(ctx, namespace, pod, query.container);
        audit.name({ subject: container });
        const exec = await openExec(
          caller.conn,
          { namespace, pod, container, command, stdin: true, tty: true },
          caller.headers,
        );
        const ws = await handshake(request, reply, caller, () => exec.destroy());
        const session = new TerminalSession(ws);
        session.attach(exec);
        follow(session, (outcome) => {
          caller.release();
          endAudit(audit, outcome);
        });
      });
    },
  );

  app.get(
    '/api/v1/node-terminal/:node/ws',
    {
      onRequest: app.requireAdmin,
      schema: clusterSchema('WebSocket: a shell on a node, through a short-lived privileged pod on it (admins only)', {
        description:
          `Needs the admin role, and create on pods/exec and on pods in ${settings.namespace}. ` +
          `The pod is deleted when the session ends. ${protocol}`,
        params: NodeTerminalParams,
        querystring: NodeTerminalQuery,
        response: { 200: webSocketAnswer },
      }),
    },
    async (request, reply) => {
      const { node } = request.params;
      const namespace = settings.namespace;
      await openSession(request, { resource: 'nodes/terminal', namespace: '', name: node }, async (opening) => {
        const { audit } = opening;
        const caller = await terminalCaller(
          request,
          opening,
          namespace,
          [
            { resource: 'pods/exec', name: undefined },
            { resource: 'pods', name: undefined },
          ],
          true,
        );
        const { conn, headers } = caller;
        // Root on a node of kiteline's own host cluster reads every Secret mounted there (kiteline's
        // session key and stored kubeconfigs, wherever its pods run or will): never through kiteline.
        if (await services.hostGuard.reachesHost(conn)) {
          throw new ForbiddenError(
            `node terminals are not opened on cluster ${conn.name}: ` +
              `it is kiteline's own host cluster (use kubectl debug node/${node} there)`,
          );
        }
        const pod = await createNodeTerminalPod(
          { conn, headers, signal: AbortSignal.timeout(PREPARE_TIMEOUT_MS) },
          node,
          caller.principal.name,
          settings,
        );
        audit.name({ pod: `${namespace}/${pod}` });
        const deletePod = nodePods.track(conn, namespace, pod);
        const ws = await handshake(request, reply, caller, () => void deletePod());
        const session = new TerminalSession(ws);
        follow(session, async (outcome) => {
          await deletePod();
          caller.release();
          endAudit(audit, outcome);
        });
        try {
          session.info(`starting pod ${namespace}/${pod} on node ${node}...`);
          await waitForNodeTerminalPod({ conn, headers, signal: session.clientSignal }, namespace, pod);
          session.attach(
            await openExec(
              conn,
              {
                namespace,
                pod,
                container: NODE_TERMINAL_CONTAINER,
                command: nodeShellCommand(request.query.shell),
                stdin: true,
                tty: true,
              },
              headers,
            ),
          );
        } catch (err) {
          session.fail(`the node terminal could not start: ${(err as Error).message}`);
        }
      });
    },
  );
}
