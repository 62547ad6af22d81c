// The node terminal's pod (GET /api/v1/node-terminal/<node>/ws): a short-lived privileged pod
// pinned to the node, as Kite and `kubectl debug node/...` do it, into which the session execs a
// shell on the host. The pod shares the host's PID, network and IPC namespaces, mounts the host's
// `/` at /host, tolerates every taint, and only sleeps: the shell is an exec (terminal.ts), which
// enters the host's namespaces with nsenter when it can, else chroots into /host.
//
// Its start and clean-up are every session pod's (session-pods.ts).
import { BadGatewayError } from '../errors.js';
import { getJson, writeJson, type ToolContext } from '../cluster-access/calls.js';
import { BASH_OR_SH, checkedShell } from './terminal.js';
import type { PodObject } from '../cluster-access/watch-events.js';
import { MAX_SESSION_SECONDS, podPath } from './session-pods.js';

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
