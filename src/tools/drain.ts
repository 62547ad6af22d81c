// Drain of a Node (POST /api/v1/nodes/_all/<node>/drain), as `kubectl drain` does it:
//   1. list the pods on the node (optionally only those matching podSelector, kubectl's
//      --pod-selector) and sort them: mirror pods (static pods the kubelet owns) and, with
//      ignoreDaemonsets, DaemonSet pods are skipped; pods without a controller need `force`, pods
//      with emptyDir volumes need `deleteLocalData`; otherwise the whole drain is refused (400)
//      before anything changes;
//   2. the caller's callback authorizes the eviction in every namespace concerned (403 otherwise,
//      still before anything changes);
//   3. cordon the node;
//   4. evict each pod through the Eviction API (policy/v1, or policy/v1beta1 on clusters that only
//      serve that, e.g. 1.20): the API server enforces PodDisruptionBudgets and answers 429 while
//      one forbids the eviction; such pods are retried until the timeout;
//   5. wait until the evicted pods are gone.
// The report lists evicted (and still terminating), blocked, failed and skipped pods. An incomplete
// drain (time ran out) is a 504 whose details carry the report; the node stays cordoned either way,
// as with kubectl.
import { BadRequestError, HttpError } from '../errors.js';
import { withSearch } from '../cluster-access/read-query.js';
import { getJson, tryWrite, type KubeList, type KubeObject, type ToolContext } from '../cluster-access/calls.js';
import { nodePath, setUnschedulable } from './node-actions.js';

export const DEFAULT_DRAIN_TIMEOUT_SECONDS = 60;
export const MAX_DRAIN_TIMEOUT_SECONDS = 600;
/** Pause between eviction rounds while a PodDisruptionBudget blocks (kubectl waits 5 s). */
const RETRY_MS = 1000;
const MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

export interface DrainOptions {
  /** Evict pods that no controller manages (they will not come back). */
  force: boolean;
  /** Seconds each pod gets to terminate; negative: the pod's own terminationGracePeriodSeconds. */
  gracePeriod: number;
  /** Evict pods with emptyDir volumes (their data is lost). */
  deleteLocalData: boolean;
  /** Skip DaemonSet pods (without it, a node with DaemonSet pods is refused, as kubectl does). */
  ignoreDaemonsets: boolean;
  timeoutSeconds: number;
  /** Only pods matching this label selector (kubectl drain --pod-selector). */
  podSelector?: string;
}

export interface PodRef {
  namespace: string;
  name: string;
}
export interface PodNote extends PodRef {
  reason: string;
}

export interface DrainReport {
  message: string;
  node: string;
  /** Every pod to evict was evicted and is gone. */
  complete: boolean;
  /** Pods whose eviction the API server accepted. */
  evicted: PodRef[];
  /** Evicted pods still there (terminating) when the timeout ran out. */
  terminating: PodRef[];
  /** Pods a PodDisruptionBudget kept (429) until the timeout ran out. */
  blocked: PodNote[];
  failed: PodNote[];
  skipped: PodNote[];
  options: DrainOptions;
}

interface Pod extends KubeObject {
  spec?: { nodeName?: string; volumes?: Array<{ emptyDir?: unknown }> };
  status?: { phase?: string };
}

/** The pods on the node, sorted into to-evict, skipped and refused (kubectl's filters). */
export interface DrainPlan {
  evict: Pod[];
  skipped: PodNote[];
  refused: PodNote[];
}

function ref(pod: Pod): PodRef {
  return { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' };
}

/** Lists and sorts the node's pods (nothing is changed). `guardSelector` hides protected namespaces. */
export async function planDrain(
  ctx: ToolContext,
  node: string,
  options: DrainOptions,
  guardSelector: string | undefined,
): Promise<DrainPlan> {
  await getJson(ctx, nodePath(node)); // 404 for an unknown node
  const search = new URLSearchParams({
    fieldSelector: [guardSelector, `spec.nodeName=${node}`].filter(Boolean).join(','),
  });
  if (options.podSelector) search.set('labelSelector', options.podSelector);
  const pods = (await getJson<KubeList<Pod>>(ctx, withSearch('/api/v1/pods', search))).items ?? [];
  const plan: DrainPlan = { evict: [], skipped: [], refused: [] };
  for (const pod of pods) {
    const note = (reason: string) => ({ ...ref(pod), reason });
    const finished = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
    const controller = pod.metadata?.ownerReferences?.find((o) => o.controller);
    if (pod.metadata?.annotations?.[MIRROR_ANNOTATION] !== undefined) {
      plan.skipped.push(note('mirror pod (a static pod of the kubelet)'));
    } else if (controller?.kind === 'DaemonSet' && !finished) {
      if (options.ignoreDaemonsets) plan.skipped.push(note('managed by a DaemonSet'));
      else plan.refused.push(note('managed by a DaemonSet (set ignoreDaemonsets)'));
    } else if (!controller && !finished && !options.force) {
      plan.refused.push(note('not managed by a controller: it would not come back (set force)'));
    } else if (
      !finished &&
      (pod.spec?.volumes ?? []).some((v) => v.emptyDir !== undefined) &&
      !options.deleteLocalData
    ) {
      plan.refused.push(note('has emptyDir volumes whose data would be lost (set deleteLocalData)'));
    } else {
      plan.evict.push(pod);
    }
  }
  return plan;
}

/** The Eviction version the cluster takes: policy/v1, or policy/v1beta1 before Kubernetes 1.22. */
async function evictionApiVersion(ctx: ToolContext): Promise<string> {
  const core = await getJson<{ resources?: Array<{ name?: string; group?: string; version?: string }> }>(
    ctx,
    '/api/v1',
    {},
  );
  const eviction = core.resources?.find((r) => r.name === 'pods/eviction');
  return eviction?.group && eviction.version ? `${eviction.group}/${eviction.version}` : 'policy/v1beta1';
}

/** Whether the pod is gone (or replaced by another of the same name). */
async function gone(ctx: ToolContext, pod: Pod): Promise<boolean> {
  const { namespace, name } = ref(pod);
  try {
    const now = await getJson<Pod>(
      ctx,
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`,
    );
    return now.metadata?.uid !== pod.metadata?.uid;
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) return true;
    throw err;
  }
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/** Cordons the node and evicts the planned pods; answers the report or throws 504 with it. */
export async function drainNode(
  ctx: ToolContext,
  node: string,
  plan: DrainPlan,
  options: DrainOptions,
): Promise<DrainReport> {
  if (plan.refused.length > 0) {
    const first = plan.refused[0];
    throw new BadRequestError(
      `cannot drain node ${node}: ${plan.refused.length} pod(s) cannot be evicted as asked, ` +
        `e.g. ${first.namespace}/${first.name}: ${first.reason}; nothing was changed`,
      { refused: plan.refused },
    );
  }
  await setUnschedulable(ctx, node, true);
  const apiVersion = await evictionApiVersion(ctx);
  const deadline = Date.now() + options.timeoutSeconds * 1000;
  const evicted: Pod[] = [];
  const failed: PodNote[] = [];
  let waiting = [...plan.evict];
  const blockedReasons = new Map<Pod, string>();

  // Rounds until everything is evicted and gone, or time runs out: evict what is still waiting (a
  // PodDisruptionBudget answers 429 until another pod of the budget is ready again), then see
  // which evicted pods are gone (they terminate within their grace period).
  let terminating: Pod[] = [];
  while (!ctx.signal.aborted) {
    const stillBlocked: Pod[] = [];
    for (const pod of waiting) {
      const { namespace, name } = ref(pod);
      const body = {
        apiVersion,
        kind: 'Eviction',
        metadata: { name, namespace },
        deleteOptions: {
          ...(options.gracePeriod >= 0 ? { gracePeriodSeconds: options.gracePeriod } : {}),
          preconditions: { uid: pod.metadata?.uid },
        },
      };
      const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}/eviction`;
      const outcome = await tryWrite(ctx, 'POST', path, 'application/json', body);
      if (
        outcome.ok ||
        outcome.status === 404 ||
        (outcome.status === 409 && /precondition|UID/i.test(outcome.error.message))
      ) {
        evicted.push(pod);
        terminating.push(pod);
      } else if (outcome.status === 429) {
        blockedReasons.set(pod, outcome.error.message);
        stillBlocked.push(pod);
      } else {
        failed.push({ namespace, name, reason: outcome.error.message });
      }
    }
    waiting = stillBlocked;
    const left: Pod[] = [];
    for (const pod of terminating) if (!(await gone(ctx, pod))) left.push(pod);
    terminating = left;
    if ((waiting.length === 0 && terminating.length === 0) || Date.now() + RETRY_MS > deadline) break;
    await sleep(RETRY_MS, ctx.signal);
  }

  const blocked: PodNote[] = waiting.map((pod) => ({
    ...ref(pod),
    reason: blockedReasons.get(pod) ?? 'the eviction is refused by a PodDisruptionBudget',
  }));
  const complete = blocked.length === 0 && failed.length === 0 && terminating.length === 0;
  const report: DrainReport = {
    message: complete
      ? `Node ${node} drained successfully: ${evicted.length} pod(s) evicted, ${plan.skipped.length} skipped`
      : `Node ${node} is cordoned but not drained: ${evicted.length} pod(s) evicted ` +
        `(${terminating.length} still terminating), ${blocked.length} blocked, ${failed.length} failed`,
    node,
    complete,
    evicted: evicted.map(ref),
    terminating: terminating.map(ref),
    blocked,
    failed,
    skipped: plan.skipped,
    options,
  };
  if (complete) return report;
  if (failed.length === 0)
    throw new HttpError(
      504,
      'Timeout',
      `${report.message} within ${options.timeoutSeconds} s (PodDisruptionBudgets or slow pods)`,
      report,
    );
  const firstFailure = failed[0];
  throw new HttpError(
    409,
    'Conflict',
    `${report.message}: ${firstFailure.namespace}/${firstFailure.name}: ${firstFailure.reason}`,
    report,
  );
}
