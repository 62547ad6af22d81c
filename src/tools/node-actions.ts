// Cordon, uncordon, taint and untaint of a Node (POST /api/v1/nodes/_all/<node>/<action>, Kite's
// bodies and answers). Cordon is the strategic merge patch kubectl sends (spec.unschedulable).
// Taints are read, changed and written back with the read resourceVersion as a precondition
// (a concurrent change is a 409 from the cluster, and the change is retried on the fresh Node), so
// two callers tainting at once never drop each other's taints. A taint is identified by key and
// effect, as Kubernetes does (Kite replaced any taint of the same key).
import { BadRequestError, HttpError, NotFoundError } from '../errors.js';
import { getJson, writeJson, type KubeObject, type ToolContext } from '../cluster-access/calls.js';

export const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
export type TaintEffect = (typeof TAINT_EFFECTS)[number];

export interface Taint {
  key: string;
  value?: string;
  effect: TaintEffect;
  timeAdded?: string;
}

/** A qualified name (optional DNS-subdomain prefix, then a name of at most 63 characters). */
const TAINT_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const TAINT_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
/** Attempts of a taint change that meets concurrent changes of the same Node. */
const TAINT_ATTEMPTS = 5;

export function nodePath(node: string): string {
  return `/api/v1/nodes/${encodeURIComponent(node)}`;
}

/** Checks a taint key (and value); throws 400. */
export function checkTaint(
  key: unknown,
  value: unknown,
  effect: unknown,
  effectRequired: boolean,
): Taint | { key: string; effect?: TaintEffect } {
  if (typeof key !== 'string' || key.length > 316 || !TAINT_KEY.test(key))
    throw new BadRequestError('key must be a label key such as example.com/dedicated');
  if (value !== undefined && value !== null && (typeof value !== 'string' || !TAINT_VALUE.test(value))) {
    throw new BadRequestError('value must be a label value: at most 63 letters, digits, -, _ or .');
  }
  if (effect === undefined || effect === null || effect === '') {
    if (effectRequired) throw new BadRequestError(`effect must be one of ${TAINT_EFFECTS.join(', ')}`);
    return { key };
  }
  if (typeof effect !== 'string' || !(TAINT_EFFECTS as readonly string[]).includes(effect))
    throw new BadRequestError(`effect must be one of ${TAINT_EFFECTS.join(', ')}`);
  return { key, ...(typeof value === 'string' && value !== '' ? { value } : {}), effect: effect as TaintEffect };
}

/** Sets spec.unschedulable; answers Kite's {message, node, unschedulable}. */
export async function setUnschedulable(
  ctx: ToolContext,
  node: string,
  unschedulable: boolean,
): Promise<{ message: string; node: string; unschedulable: boolean }> {
  await writeJson(
    ctx,
    'PATCH',
    nodePath(node),
    'application/strategic-merge-patch+json',
    { spec: { unschedulable } },
    nodePath(node),
  );
  return { message: `Node ${node} ${unschedulable ? 'cordoned' : 'uncordoned'} successfully`, node, unschedulable };
}

/**
 * Reads the Node, lets `change` compute its new taints (or throw), and writes them with the read
 * resourceVersion as a precondition; retried when someone else changed the Node in between.
 */
async function changeTaints(ctx: ToolContext, node: string, change: (taints: Taint[]) => Taint[]): Promise<Taint[]> {
  for (let attempt = 1; ; attempt++) {
    const current = await getJson<KubeObject>(ctx, nodePath(node));
    const taints = ((current.spec as { taints?: Taint[] } | undefined)?.taints ?? []).map((t) => ({ ...t }));
    const next = change(taints);
    const patch = {
      metadata: { resourceVersion: current.metadata?.resourceVersion },
      spec: { taints: next.length > 0 ? next : null },
    };
    try {
      await writeJson(ctx, 'PATCH', nodePath(node), 'application/merge-patch+json', patch, nodePath(node));
      return next;
    } catch (err) {
      if (!(err instanceof HttpError) || err.status !== 409 || attempt >= TAINT_ATTEMPTS) throw err;
    }
  }
}

/** Adds a taint, or replaces the one with the same key and effect; answers Kite's {message, node, taint}. */
export async function addTaint(
  ctx: ToolContext,
  node: string,
  taint: Taint,
): Promise<{ message: string; node: string; taint: Taint }> {
  // kubectl stamps NoExecute taints: tolerationSeconds of the pods count from then.
  const written: Taint =
    taint.effect === 'NoExecute' ? { ...taint, timeAdded: new Date().toISOString().replace(/\.\d+Z$/, 'Z') } : taint;
  await changeTaints(ctx, node, (taints) => {
    const kept = taints.filter((t) => !(t.key === taint.key && t.effect === taint.effect));
    return [...kept, written];
  });
  return { message: `Node ${node} tainted successfully`, node, taint };
}

/** Removes the taints with the key (and effect, when given); 404 when there is none. */
export async function removeTaint(
  ctx: ToolContext,
  node: string,
  key: string,
  effect: TaintEffect | undefined,
): Promise<{ message: string; node: string; removedTaintKey: string }> {
  await changeTaints(ctx, node, (taints) => {
    const kept = taints.filter((t) => !(t.key === key && (effect === undefined || t.effect === effect)));
    if (kept.length === taints.length)
      throw new NotFoundError(
        `Taint with key '${key}'${effect ? ` and effect ${effect}` : ''} not found on node ${node}`,
      );
    return kept;
  });
  return { message: `Taint with key '${key}' removed from node ${node} successfully`, node, removedTaintKey: key };
}
