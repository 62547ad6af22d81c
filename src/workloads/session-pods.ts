// The short-lived pods a terminal session starts and ends: the node terminal's privileged pod on a
// node (node-terminal.ts) and the kubectl console's pod (kubectl-console.ts). Both are created for
// one session, waited for until their container runs, and deleted when the session ends, whichever
// side ends it, when the client vanishes and when the gateway shuts down (SessionPods, awaited by
// routes/terminal.ts's preClose hook). Deletion uses kiteline's own credentials, so a caller whose
// cluster RBAC allows create but not delete still leaves nothing behind. A gateway killed outright
// leaves the pod; its activeDeadlineSeconds stops it after MAX_SESSION_SECONDS at the latest, and
// its labels find it.
import type { ClusterConnection } from '../clusters/types.js';
import { BadGatewayError, GatewayTimeoutError, ServiceUnavailableError } from '../errors.js';
import { getJson, type ToolContext } from '../cluster-access/calls.js';
import type { PodObject } from '../cluster-access/watch-events.js';

/** The longest a session pod lasts: its container sleeps this long and activeDeadlineSeconds stops it then. */
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

export function podPath(namespace: string, name?: string): string {
  const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

interface ContainerStatus {
  name: string;
  state?: { running?: unknown; waiting?: { reason?: string; message?: string } };
}

/**
 * Polls the pod until `container` runs; throws when it cannot (its reason), or after START_TIMEOUT_MS.
 * `what` names the pod in messages ("the node terminal pod").
 */
export async function waitForSessionPod(
  ctx: ToolContext,
  namespace: string,
  name: string,
  container: string,
  what: string,
): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  const pod = `${what} ${namespace}/${name}`;
  let last = 'not scheduled yet';
  while (Date.now() < deadline) {
    ctx.signal.throwIfAborted();
    const object = await getJson<PodObject>(ctx, podPath(namespace, name));
    const status = object.status as
      { phase?: string; reason?: string; message?: string; containerStatuses?: ContainerStatus[] } | undefined;
    const state = status?.containerStatuses?.find((c) => c.name === container)?.state;
    if (status?.phase === 'Running' && state?.running) return;
    if (status?.phase === 'Failed' || status?.phase === 'Succeeded')
      throw new BadGatewayError(`${pod} ended: ${status.reason ?? status.phase} ${status.message ?? ''}`.trim());
    const waiting = state?.waiting;
    if (waiting?.reason && HOPELESS_REASONS.has(waiting.reason))
      throw new BadGatewayError(`${pod} cannot start: ${waiting.reason}: ${waiting.message ?? ''}`.trim());
    last = waiting?.reason ?? status?.phase ?? last;
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
  throw new GatewayTimeoutError(`${pod} did not start within ${START_TIMEOUT_MS / 1000} s (${last})`);
}

/**
 * Deletes the pod at once with kiteline's own credentials; a pod already gone is fine. Retries a failed attempt
 * twice.
 */
export async function deleteSessionPod(conn: ClusterConnection, namespace: string, name: string): Promise<void> {
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
      throw new BadGatewayError(`deleting the session pod ${namespace}/${name}: status ${res.statusCode}`);
    } catch (err) {
      if (attempt >= 3) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000 * attempt));
    }
  }
}

/**
 * The session pods of this gateway's live sessions, so that shutting down deletes them too.
 * track() returns the session's own clean-up: idempotent, and awaited by deleteAll() if running.
 */
export class SessionPods {
  private readonly live = new Map<string, () => Promise<void>>();
  /** Set by deleteAll(): the gateway is shutting down, a pod tracked from then on goes at once. */
  private closing = false;

  constructor(private readonly onError: (err: unknown, pod: string) => void) {}

  /** `alsoUndo` runs with the deletion (a console's token is revoked with its pod). */
  track(conn: ClusterConnection, namespace: string, name: string, alsoUndo?: () => Promise<void>): () => Promise<void> {
    const key = `${conn.name}/${namespace}/${name}`;
    let deletion: Promise<void> | undefined;
    const cleanUp = () => {
      deletion ??= Promise.all([
        deleteSessionPod(conn, namespace, name).catch((err) => this.onError(err, key)),
        alsoUndo?.().catch((err) => this.onError(err, key)),
      ])
        .then(() => undefined)
        .finally(() => this.live.delete(key));
      return deletion;
    };
    this.live.set(key, cleanUp);
    if (this.closing) {
      void cleanUp();
      throw new ServiceUnavailableError('the gateway is shutting down');
    }
    return cleanUp;
  }

  /** Deletes every tracked pod (best effort: each failure is reported, none stops the others). */
  async deleteAll(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.live.values()].map((cleanUp) => cleanUp()));
  }
}
