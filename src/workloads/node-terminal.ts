// The node terminal's pod (GET /api/v1/node-terminal/<node>/ws): a short-lived privileged pod
// pinned to the node, as Kite and `kubectl debug node/...` do it, into which the session execs a
// shell on the host. The pod shares the host's PID, network and IPC namespaces, mounts the host's
// `/` at /host, tolerates every taint, and only sleeps: the shell is an exec (terminal.ts), which
// enters the host's namespaces with nsenter when it can, else chroots into /host.
//
// Clean-up: the pod is deleted (grace period 0, with kiteline's own credentials, so a caller whose
// cluster RBAC allows create but not delete still leaves nothing behind) when the session ends,
// whichever side ends it, when the client vanishes (its socket dies without a close frame: the
// WebSocket's close event, or its missed pings), and when the gateway shuts down (NodeTerminalPods,
// routes/terminal.ts's onClose hook). A gateway killed outright leaves the pod; its
// activeDeadlineSeconds stops it after MAX_SESSION_SECONDS at the latest, and its labels find it.
import type { ClusterConnection } from '../clusters/types.js';
import { BadGatewayError, GatewayTimeoutError } from '../errors.js';
import { getJson, writeJson, type ToolContext } from '../cluster-access/calls.js';
import { BASH_OR_SH, checkedShell } from './terminal.js';
import type { PodObject } from '../cluster-access/watch-events.js';

/** Where the pods run and what they run. */
export interface NodeTerminalSettings {
  namespace: string;
  image: string;
}

/**
 * The namespace Kite uses, and the busybox image of kiteline's own nodes (scripts/build-images.sh;
 * pulled when missing, so any registry's `busybox` works where that one is not present).
 */
export const DEFAULT_NODE_TERMINAL_SETTINGS: NodeTerminalSettings = {
  namespace: 'kube-system',
  image: 'kiteline.local/busybox:1',
};
/** The pod's container; the exec names it. */
export const NODE_TERMINAL_CONTAINER = 'shell';
/** Labels that find every node-terminal pod (e.g. ones a killed gateway left). */
export const NODE_TERMINAL_LABELS = { 'app.kubernetes.io/managed-by': 'kiteline', 'kiteline.io/node-terminal': 'true' };
/** The longest a node terminal lasts: the pod sleeps this long and its activeDeadlineSeconds stops it then. */
export const MAX_SESSION_SECONDS = 12 * 60 * 60;
/** How long a pod may take to run (an image pull included) before the session gives up. */
const START_TIMEOUT_MS = 120_000;
const POLL_INTERVAL_MS = 500;
/** Waiting reasons after which the container will not start by itself. */
const HOPELESS_REASONS = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);
/**
 * What the exec runs in the pod: the host's namespaces (nsenter into PID 1's), else a chroot into /host, else the
 * pod's own busybox. On the host: the shell asked for by name (checked: a plain command name), else bash, else sh.
 */
export function nodeShellCommand(shell: string | undefined): string[] {
  const start = shell === undefined || shell === '' ? BASH_OR_SH : `exec ${checkedShell(shell)}`;
  const script = [
    'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    'ENTER="nsenter -t 1 -m -u -i -n -p --"',
    `if $ENTER true 2>/dev/null; then exec $ENTER sh -c '${start}'; fi`,
    `if [ -x /host/bin/sh ]; then exec chroot /host /bin/sh -c '${start}'; fi`,
    'echo "kiteline: no shell on the host: this is the node terminal pod\'s busybox, the host\'s / is at /host"',
    'exec sh',
  ].join('\n');
  return ['sh', '-c', script];
}

function podPath(namespace: string, name?: string): string {
  const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

/** The pod's manifest (the docs show it: docs/workloads.md, Terminals). */
export function nodeTerminalPod(node: string, openedBy: string, settings: NodeTerminalSettings): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'kiteline-node-shell-',
      namespace: settings.namespace,
      labels: NODE_TERMINAL_LABELS,
      annotations: { 'kiteline.io/node': node, 'kiteline.io/opened-by': openedBy },
    },
    spec: {
      nodeName: node,
      hostPID: true,
      hostNetwork: true,
      hostIPC: true,
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      activeDeadlineSeconds: MAX_SESSION_SECONDS,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      tolerations: [{ operator: 'Exists' }],
      volumes: [{ name: 'host', hostPath: { path: '/' } }],
      containers: [
        {
          name: NODE_TERMINAL_CONTAINER,
          image: settings.image,
          imagePullPolicy: 'IfNotPresent',
          command: ['sleep', String(MAX_SESSION_SECONDS)],
          securityContext: { privileged: true },
          volumeMounts: [{ name: 'host', mountPath: '/host' }],
        },
      ],
    },
  };
}

/** Checks the node exists (the cluster's 404 otherwise) and creates the pod with the caller's headers; its name. */
export async function createNodeTerminalPod(
  ctx: ToolContext,
  node: string,
  openedBy: string,
  settings: NodeTerminalSettings,
): Promise<string> {
  await getJson(ctx, `/api/v1/nodes/${encodeURIComponent(node)}`);
  const created = await writeJson<PodObject>(
    ctx,
    'POST',
    podPath(settings.namespace),
    'application/json',
    nodeTerminalPod(node, openedBy, settings),
  );
  const name = created.metadata?.name;
  if (typeof name !== 'string') throw new BadGatewayError('the cluster created the node terminal pod without a name');
  return name;
}

/** Polls the pod until its container runs; throws when it cannot (its reason), or after START_TIMEOUT_MS. */
export async function waitForNodeTerminalPod(ctx: ToolContext, namespace: string, name: string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let last = 'not scheduled yet';
  while (Date.now() < deadline) {
    ctx.signal.throwIfAborted();
    const pod = await getJson<PodObject>(ctx, podPath(namespace, name));
    const status = pod.status as
      { phase?: string; reason?: string; message?: string; containerStatuses?: ContainerStatus[] } | undefined;
    const container = status?.containerStatuses?.find((c) => c.name === NODE_TERMINAL_CONTAINER);
    if (status?.phase === 'Running' && container?.state?.running) return;
    if (status?.phase === 'Failed' || status?.phase === 'Succeeded')
      throw new BadGatewayError(
        (
          `the node terminal pod ${namespace}/${name} ended: ` +
          `${status.reason ?? status.phase} ${status.message ?? ''}`
        ).trim(),
      );
    const waiting = container?.state?.waiting;
    if (waiting?.reason && HOPELESS_REASONS.has(waiting.reason))
      throw new BadGatewayError(
        `the node terminal pod ${namespace}/${name} cannot start: ${waiting.reason}: ${waiting.message ?? ''}`.trim(),
      );
    last = waiting?.reason ?? status?.phase ?? last;
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
  throw new GatewayTimeoutError(
    `the node terminal pod ${namespace}/${name} did not start within ${START_TIMEOUT_MS / 1000} s (${last})`,
  );
}

interface ContainerStatus {
  name: string;
  state?: { running?: unknown; waiting?: { reason?: string; message?: string } };
}

/**
 * Deletes the pod at once with kiteline's own credentials; a pod already gone is fine. Retries a failed attempt
 * twice.
 */
export async function deleteNodeTerminalPod(conn: ClusterConnection, namespace: string, name: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await conn.request({
        method: 'DELETE',
        path: `${podPath(namespace, name)}?gracePeriodSeconds=0`,
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(15_000),
      });
      res.resume();
      if (res.statusCode < 300 || res.statusCode === 404) return;
      throw new BadGatewayError(`deleting the node terminal pod ${namespace}/${name}: status ${res.statusCode}`);
    } catch (err) {
      if (attempt >= 3) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000 * attempt));
    }
  }
}

/**
 * The node-terminal pods of this gateway's live sessions, so that shutting down deletes them too.
 * track() returns the session's own clean-up: idempotent, and awaited by deleteAll() if running.
 */
export class NodeTerminalPods {
  private readonly live = new Map<string, () => Promise<void>>();

  constructor(private readonly onError: (err: unknown, pod: string) => void) {}

  track(conn: ClusterConnection, namespace: string, name: string): () => Promise<void> {
    const key = `${conn.name}/${namespace}/${name}`;
    let deletion: Promise<void> | undefined;
    const cleanUp = () => {
      deletion ??= deleteNodeTerminalPod(conn, namespace, name)
        .catch((err) => this.onError(err, key))
        .finally(() => this.live.delete(key));
      return deletion;
    };
    this.live.set(key, cleanUp);
    return cleanUp;
  }

  /** Deletes every tracked pod (best effort: each failure is reported, none stops the others). */
  async deleteAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((cleanUp) => cleanUp()));
  }
}
