// The kubectl console's pod (GET /api/v1/kubectl-terminal/ws, Kite's kubectl console): a short-lived,
// unprivileged pod on the chosen cluster running the general settings' kubectl image, into which
// the session writes a kubeconfig and execs a shell. Unlike Kite's console (a shared cluster-admin
// ServiceAccount for every console), the kubeconfig points at kiteline's Kubernetes API for that
// cluster (`<external URL>/k8s/clusters/<cluster>`) with a token minted for the signed-in user and
// bound to that one cluster: kubectl in the console can do exactly what the user can, through the
// same roles, impersonation, host guard and audit as the user's own kubectl. The token is revoked
// and the pod deleted when the session ends (session-pods.ts).
//
// The pod is kiteline's machinery: created, exec'd into and deleted with kiteline's own credentials
// in the console namespace, so users need no rights there. It has no ServiceAccount token, runs as
// nobody with a read-only root, no capabilities and the runtime's seccomp profile, and writes only
// to a small in-memory volume (/kube: the kubeconfig and $HOME). The kubeconfig never passes through
// a Secret or the pod spec: it is written into that volume over an exec's stdin, so only whoever may
// exec into the console namespace could read it (and then only for that cluster, while it runs).
import type { ToolContext } from '../cluster-access/calls.js';
import { writeJson } from '../cluster-access/calls.js';
import type { PodObject } from '../cluster-access/watch-events.js';
import { uploadFile } from './pod-files.js';
import { MAX_SESSION_SECONDS, podPath } from './session-pods.js';

/** The pods' namespace: Kite's, on every cluster. */
export const KUBECTL_CONSOLE_NAMESPACE = 'kube-system';
/** The pod's container; the execs name it. */
export const KUBECTL_CONSOLE_CONTAINER = 'kubectl';
/** Labels that find every console pod (e.g. ones a killed gateway left). */
export const KUBECTL_CONSOLE_LABELS = {
  'app.kubernetes.io/managed-by': 'kiteline',
  'kiteline.io/kubectl-console': 'true',
};
/** The pods' names: this and 10 hex digits (the route names each pod before creating it). */
export const CONSOLE_POD_PREFIX = 'kiteline-kubectl-';
/** The in-memory volume: $HOME, and the kubeconfig in it. */
const HOME = '/kube';
const KUBECONFIG_NAME = 'config';

/** The pod's manifest (docs/workloads.md, The kubectl console, shows it). */
export function kubectlConsolePod(name: string, image: string, openedBy: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: KUBECTL_CONSOLE_NAMESPACE,
      labels: KUBECTL_CONSOLE_LABELS,
      annotations: { 'kiteline.io/opened-by': openedBy },
    },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      activeDeadlineSeconds: MAX_SESSION_SECONDS,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65534,
        runAsGroup: 65534,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      volumes: [{ name: 'home', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } }],
      containers: [
        {
          name: KUBECTL_CONSOLE_CONTAINER,
          image,
          imagePullPolicy: 'IfNotPresent',
          command: ['sleep', String(MAX_SESSION_SECONDS)],
          workingDir: HOME,
          env: [
            { name: 'HOME', value: HOME },
            { name: 'KUBECONFIG', value: `${HOME}/${KUBECONFIG_NAME}` },
          ],
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
          resources: {
            requests: { cpu: '10m', memory: '32Mi' },
            limits: { cpu: '1', memory: '256Mi' },
          },
          volumeMounts: [{ name: 'home', mountPath: HOME }],
        },
      ],
    },
  };
}

/** Creates the pod `name` (ctx: kiteline's own credentials). */
export async function createKubectlConsolePod(
  ctx: ToolContext,
  name: string,
  image: string,
  openedBy: string,
): Promise<void> {
  const manifest = kubectlConsolePod(name, image, openedBy);
  await writeJson<PodObject>(ctx, 'POST', podPath(KUBECTL_CONSOLE_NAMESPACE), 'application/json', manifest);
}

/** Writes the kubeconfig where the pod's KUBECONFIG points, over an exec's stdin. */
export async function writeConsoleKubeconfig(ctx: ToolContext, pod: string, kubeconfig: string): Promise<void> {
  await uploadFile(
    ctx,
    { namespace: KUBECTL_CONSOLE_NAMESPACE, pod, container: KUBECTL_CONSOLE_CONTAINER },
    HOME,
    KUBECONFIG_NAME,
    Buffer.from(kubeconfig),
  );
}
