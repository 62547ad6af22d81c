// Kite's terminals: GET /api/v1/terminal/<ns>/<pod>/ws?container=&shell= (a shell in a pod's
// container), GET /api/v1/node-terminal/<node>/ws (a shell on a node, through a short-lived
// privileged pod: src/workloads/node-terminal.ts) and GET /api/v1/kubectl-terminal/ws (kubectl in a
// short-lived pod, acting as the user through /k8s/clusters: src/workloads/kubectl-console.ts), all
// WebSockets speaking Kite's JSON messages (src/workloads/terminal.ts) over one exec with a TTY on
// the cluster's exec WebSocket.
//
// A pod terminal is authorized as `create` on pods/exec in the namespace (a connect subresource:
// the built-in viewer may not), a node terminal needs the admin role and `create` on pods/exec and
// on pods in the terminal pods' namespace; kiteline's own namespace on the host cluster is refused.
// The kubectl console needs the console switched on and a signed-in user whose roles grant `create`
// on `kubectl-terminal` on the cluster, never kiteline's host cluster: its pod is kiteline's, its
// kubectl has the user's roles through a token bound to the cluster.
// Everything that can fail before the shell (parameters, roles, the pod or node, the exec's
// handshake, the session pod's creation) fails as plain HTTP, before the WebSocket handshake; a
// session pod that then does not start is an `error` message. One audit record per session (or
// refusal): who, cluster, pod, container (or node and its pod), start, end and the bytes each way.
// Each session is recorded (src/recording/, docs/sessions.md) unless recording is off; its audit
// record names the recording.
// docs/workloads.md, Terminals.
import { HeldCounts } from '../held-counts.js';
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type WebSocket from 'ws';
import { AuditSession } from '../../audit/session.js';
import type { SessionRecorder } from '../../recording/recorder.js';
import type { SessionKind } from '../../recording/store.js';
import type { Principal } from '../../auth/principal.js';
import type { ClusterConnection } from '../../clusters/types.js';
import { ignoreGone } from '../../host/kind-store.js';
import { resourceId, type APIKeyResource } from '../../host/resources.js';
import { RateLimiter } from '../../auth/rate-limiter.js';
import type { Config } from '../../config.js';
import { kubeconfigYaml } from '../../credentials/kubeconfig-document.js';
import {
  BadGatewayError,
  BadRequestError,
  ForbiddenError,
  HttpError,
  ServiceUnavailableError,
  TooManyRequestsError,
} from '../../errors.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import { impersonationHeaders, type UpstreamHeaders } from '../../cluster-access/impersonation.js';
import { DNS_LABEL_PATTERN, NAME_PATTERN } from '../../cluster-access/segments.js';
import { clientClosed } from '../../cluster-access/upstream.js';
import { mayAccess } from '../../cluster-access/access.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../../workloads/access.js';
import { openExec, type ExecChannel } from '../../workloads/exec-channel.js';
import { CONTAINER_PATTERN } from '../../workloads/logs.js';
import {
  CONSOLE_POD_PREFIX,
  createKubectlConsolePod,
  KUBECTL_CONSOLE_CONTAINER,
  KUBECTL_CONSOLE_NAMESPACE,
  writeConsoleKubeconfig,
} from '../../workloads/kubectl-console.js';
import {
  createNodeTerminalPod,
  DEFAULT_NODE_TERMINAL_SETTINGS,
  nodeShellCommand,
  NODE_TERMINAL_CONTAINER,
} from '../../workloads/node-terminal.js';
import { MAX_SESSION_SECONDS, SessionPods, waitForSessionPod } from '../../workloads/session-pods.js';
import {
  SHELL_NAME_PATTERN,
  terminalCommand,
  terminalContainer,
  TerminalSession,
  type TerminalOutcome,
} from '../../workloads/terminal.js';
import { acceptWebSocket, isWebSocketRequest } from '../plugins/upgrades.js';
import type { Services } from '../services.js';
import { clusterQueryProperties, clusterSchema, streamed, type App } from '../schemas.js';
import { callerCluster } from '../tool-request.js';

/** The upstream reads before the handshake (the pod, the node, the pod's creation) give up after this. */
const PREPARE_TIMEOUT_MS = 30_000;
/**
 * Whether the kubectl console can open for this caller: a signed-in user, the console switched on in the general
 * settings, an https external URL (each cluster also needs a role that grants it: see the route).
 */
export function kubectlConsoleAvailable(
  services: Pick<Services, 'generalSettings' | 'config'>,
  principal: Pick<Principal, 'kind'>,
): boolean {
  return (
    principal.kind === 'user' &&
    services.generalSettings.settings().kubectlEnabled &&
    consoleServer(services.config) !== undefined
  );
}

/** The address the console's kubectl reaches kiteline at: the external URL, when it is https. */
function consoleServer(config: Pick<Config, 'externalUrl'>): string | undefined {
  return config.externalUrl?.startsWith('https://') ? config.externalUrl : undefined;
}

/** kubectl consoles one user may open per window (each starts a pod and mints a token). */
export const CONSOLE_OPENS_PER_USER = 30;
export const CONSOLE_OPEN_WINDOW_SECONDS = 600;
/** kubectl consoles one user may hold open at once (per replica). */
export const CONSOLES_PER_USER = 3;
/** The role resource that opens a kubectl console (the built-in admin role has it; a viewer has not). */
const CONSOLE_RESOURCE = 'kubectl-terminal';

/**
 * A terminal's audit session. The container is its `subject` (kept in the durable trail too); the
 * node terminal's pod and the exit code reach the audit log line.
 */
type TerminalAudit = AuditSession<{ pod: string; exitCode: number }>;

/** A session being opened: its audit, the cluster slot it holds once it has one, its recorder. */
interface Opening {
  audit: TerminalAudit;
  release?: () => void;
  recorder?: SessionRecorder;
}

/** What a recording says of the session besides who and which cluster. */
interface RecordedSession {
  kind: SessionKind;
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  node?: string;
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
  const sessionPods = new SessionPods((err, pod) =>
    app.log.error({ err, pod }, 'deleting a session pod (or revoking its token) failed'),
  );
  const consoleOpens = new RateLimiter(CONSOLE_OPENS_PER_USER, CONSOLE_OPEN_WINDOW_SECONDS);
  /** Open kubectl consoles per user on this replica. */
  const openConsoles = new HeldCounts();
  /** Counts one more open console of the user (429 at the cap); the returned release is idempotent. */
  function holdConsole(userKey: string): () => void {
    if (openConsoles.count(userKey) >= CONSOLES_PER_USER)
      throw new TooManyRequestsError(`at most ${CONSOLES_PER_USER} kubectl consoles may be open at once`, 10);
    return openConsoles.hold(userKey);
  }
  /** Each live session and the promise of its whole end (node pod deleted, audit record written). */
  const liveSessions = new Map<TerminalSession, Promise<void>>();
  // Shutting down ends every session before the server waits for its connections (the WebSockets
  // would hold it open), and deletes every node terminal pod (best effort, awaited).
  app.addHook('preClose', async () => {
    const ending = [...liveSessions].map(([session, ended]) =>
      session.shutdown('the gateway is shutting down').then(() => ended),
    );
    await Promise.all([...ending, sessionPods.deleteAll()]);
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
      // Refused before it ran: the recording has nothing to keep (and the audit record names none).
      if (opening.recorder) {
        void services.recordings.discard(opening.recorder);
        audit.name({ recording: undefined });
      }
      audit.refuse(err instanceof HttpError ? err.status : 500);
      throw err;
    }
  }

  /**
   * Starts the session's recording (when recording is on; in `required` mode a recording that
   * cannot start refuses the session, 503) and names it in the audit record.
   */
  async function record(opening: Opening, caller: TerminalCaller, session: RecordedSession): Promise<void> {
    opening.recorder = await services.recordings.open({
      user: caller.principal.name,
      userKind: caller.principal.kind,
      cluster: caller.conn.name,
      kind: session.kind,
      namespace: session.namespace,
      pod: session.pod,
      container: session.container,
      command: session.command.join(' '),
      ...(session.node ? { node: session.node } : {}),
      requestId: opening.audit.entry.requestId,
      clientAddress: opening.audit.entry.clientAddress ?? '',
      width: 0,
      height: 0,
    });
    if (opening.recorder) opening.audit.name({ recording: opening.recorder.name });
  }

  /** The terminal of a session, recorded when it is; in `required` mode a failed recording ends it. */
  function terminalOf(ws: WebSocket, opening: Opening): TerminalSession {
    const terminal = new TerminalSession(ws, opening.recorder);
    if (opening.recorder && services.recordings.required)
      opening.recorder.onFailure(
        () => void terminal.shutdown('the session recording failed, and recording is required'),
      );
    return terminal;
  }

  /** Ends a session's audit record and its recording. */
  function endAudit({ audit, recorder }: Opening, outcome: TerminalOutcome): void {
    if (recorder)
      void services.recordings.end(recorder, {
        result: outcome.error === undefined ? 'success' : 'failure',
        ...(outcome.exitCode !== undefined ? { exitCode: outcome.exitCode } : {}),
      });
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

  /**
   * The rest of a session in a pod it started (a node terminal's, a kubectl console's): the
   * handshake, then `info` while `start` waits for the pod and opens the shell's exec; `cleanUp`
   * (the pod's deletion, and what goes with it) runs when the session ends, or when it never opened.
   */
  async function sessionInPod(
    request: FastifyRequest,
    reply: FastifyReply,
    caller: TerminalCaller,
    opening: Opening,
    session: { pod: string; info: string; what: string; cleanUp: () => Promise<void>; recorded: RecordedSession },
    start: (signal: AbortSignal) => Promise<ExecChannel>,
  ): Promise<void> {
    opening.audit.name({ pod: session.pod });
    try {
      await record(opening, caller, session.recorded);
    } catch (err) {
      await session.cleanUp();
      throw err;
    }
    const ws = await handshake(request, reply, caller, () => void session.cleanUp());
    const terminal = terminalOf(ws, opening);
    follow(terminal, async (outcome) => {
      await session.cleanUp();
      caller.release();
      endAudit(opening, outcome);
    });
    try {
      terminal.info(session.info);
      terminal.attach(await start(terminal.clientSignal));
    } catch (err) {
      terminal.fail(`${session.what} could not start: ${(err as Error).message}`);
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
        const command = terminalCommand(query.shell);
        const caller = await terminalCaller(request, opening, namespace, [{ resource: 'pods/exec', name: pod }]);
        const ctx = { conn: caller.conn, headers: caller.headers, signal: AbortSignal.timeout(PREPARE_TIMEOUT_MS) };
        const container = await terminalContainer(ctx, namespace, pod, query.container);
        opening.audit.name({ subject: container });
        await record(opening, caller, { kind: 'pod-terminal', namespace, pod, container, command });
        const exec = await openExec(
          caller.conn,
          { namespace, pod, container, command, stdin: true, tty: true },
          caller.headers,
        );
        const ws = await handshake(request, reply, caller, () => exec.destroy());
        const session = terminalOf(ws, opening);
        session.attach(exec);
        follow(session, (outcome) => {
          caller.release();
          endAudit(opening, outcome);
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
        const command = nodeShellCommand(request.query.shell);
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
        const session = {
          pod: `${namespace}/${pod}`,
          info: `starting pod ${namespace}/${pod} on node ${node}...`,
          what: 'the node terminal',
          cleanUp: sessionPods.track(conn, namespace, pod),
          recorded: {
            kind: 'node-terminal',
            namespace,
            pod,
            container: NODE_TERMINAL_CONTAINER,
            command,
            node,
          } as const,
        };
        await sessionInPod(request, reply, caller, opening, session, async (signal) => {
          await waitForSessionPod(
            { conn, headers, signal },
            namespace,
            pod,
            NODE_TERMINAL_CONTAINER,
            'the node terminal pod',
          );
          const target = { namespace, pod, container: NODE_TERMINAL_CONTAINER, command, stdin: true, tty: true };
          return openExec(conn, target, headers);
        });
      });
    },
  );

  app.get(
    '/api/v1/kubectl-terminal/ws',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        "WebSocket: kubectl in a short-lived pod on the cluster, acting as you (Kite's kubectl console)",
        {
          description:
            'Needs `kubectlEnabled` in the general settings, KITELINE_EXTERNAL_URL (an https address the pod ' +
            'reaches) and a signed-in user whose roles grant create on `kubectl-terminal` on the cluster (not ' +
            "kiteline's host cluster); at most 3 open per user. The pod runs the settings' `kubectlImage` in " +
            `${KUBECTL_CONSOLE_NAMESPACE}; its kubeconfig holds a token minted for you and bound to this cluster, so ` +
            `kubectl does what you may do. Pod and token go when the session ends. ${protocol}`,
          querystring: NodeTerminalQuery,
          response: { 200: webSocketAnswer },
        },
      ),
    },
    async (request, reply) => {
      const namespace = KUBECTL_CONSOLE_NAMESPACE;
      await openSession(request, { resource: CONSOLE_RESOURCE, namespace: '', name: '' }, async (opening) => {
        const command = terminalCommand(request.query.shell);
        const settings = services.generalSettings.settings();
        if (!settings.kubectlEnabled)
          throw new ForbiddenError(
            'the kubectl console is off: an admin turns it on in Settings, General (kubectlEnabled)',
          );
        const owner = services.apiKeys.tokenOwner(request.principal!); // a signed-in user, not an API key
        const server = consoleServer(services.config);
        if (!server)
          throw new ServiceUnavailableError(
            'the kubectl console needs KITELINE_EXTERNAL_URL, ' +
              "an https address of kiteline that the cluster's pods reach",
          );
        const userKey = `user:${resourceId(owner)}`;
        const wait = consoleOpens.retryAfter([userKey]);
        if (wait)
          throw new TooManyRequestsError(`too many kubectl consoles opened; try again in ${wait} seconds`, wait);
        consoleOpens.record([userKey]);
        const releaseConsole = holdConsole(userKey);
        let caller: TerminalCaller;
        let token: { resource: APIKeyResource; key: string };
        try {
          caller = await terminalCaller(request, opening, namespace, []);
          const { conn, principal } = caller;
          if (!mayAccess(services.auth, principal, conn.name, CONSOLE_RESOURCE, undefined, 'create'))
            throw new ForbiddenError(
              `the kubectl console on cluster ${conn.name} needs a role that grants create on ${CONSOLE_RESOURCE}`,
            );
          services.auth.requireFreshFactor(principal, {
            cluster: conn.name,
            resource: CONSOLE_RESOURCE,
            verb: 'create',
          });
          // A shell on the pod network of kiteline's own host cluster reaches kiteline's pods directly.
          if (await services.hostGuard.reachesHost(conn))
            throw new ForbiddenError(`no kubectl console on cluster ${conn.name}: it is kiteline's own host cluster`);
          const allowed = caller.stillAllowed;
          caller.stillAllowed = (now) =>
            allowed(now) && mayAccess(services.auth, now, conn.name, CONSOLE_RESOURCE, undefined, 'create');
          const ttlSeconds = Math.min(MAX_SESSION_SECONDS, services.config.kubeconfigTokenMaxTtlSeconds);
          token = await services.apiKeys.createConsoleToken(principal, conn.name, ttlSeconds);
        } catch (err) {
          releaseConsole();
          throw err;
        }
        const { conn, principal } = caller;
        // The pod is kiteline's: created, exec'd into and deleted with kiteline's own credentials. Named here, so
        // that it is deleted even when its creation's answer is lost.
        const pod = `${CONSOLE_POD_PREFIX}${randomBytes(5).toString('hex')}`;
        const cleanUp = sessionPods.track(conn, namespace, pod, async () => {
          releaseConsole();
          await services.apiKeys.delete(token.resource).catch(ignoreGone);
        });
        try {
          const own = { conn, headers: {}, signal: AbortSignal.timeout(PREPARE_TIMEOUT_MS) };
          await createKubectlConsolePod(own, pod, settings.kubectlImage, principal.name);
        } catch (err) {
          await cleanUp();
          if (err instanceof HttpError && (err.status === 401 || err.status === 403))
            throw new BadGatewayError(`cluster ${conn.name} refused kiteline creating the console pod: ${err.message}`);
          throw err;
        }
        const session = {
          pod: `${namespace}/${pod}`,
          info: `starting kubectl in pod ${namespace}/${pod}...`,
          what: 'the kubectl console',
          cleanUp,
          recorded: { kind: 'kubectl-console', namespace, pod, container: KUBECTL_CONSOLE_CONTAINER, command } as const,
        };
        await sessionInPod(request, reply, caller, opening, session, async (signal) => {
          const ctx = { conn, headers: {}, signal };
          await waitForSessionPod(ctx, namespace, pod, KUBECTL_CONSOLE_CONTAINER, 'the kubectl console pod');
          const kubeconfig = kubeconfigYaml({
            clusters: [{ name: conn.name, server: `${server}${PROXY_PREFIX}${encodeURIComponent(conn.name)}` }],
            caPem: services.config.kubeconfigCa ?? services.https?.trustPem,
            userName: `kiteline-${principal.name}`,
            token: token.key,
            current: conn.name,
          });
          await writeConsoleKubeconfig(ctx, pod, kubeconfig);
          const target = { namespace, pod, container: KUBECTL_CONSOLE_CONTAINER, command, stdin: true, tty: true };
          return openExec(conn, target, {});
        });
      });
    },
  );
}
