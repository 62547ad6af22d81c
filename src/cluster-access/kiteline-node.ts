// kiteline never evicts itself. On kiteline's own host cluster, a node that runs a pod of the install
// namespace is not drained, given a NoExecute taint or deleted through kiteline (403): evicting
// kiteline from its nodes would leave nobody able to undo it through kiteline. Whether kiteline runs
// on a node is read with kiteline's own credentials (one pod of the install namespace with that
// spec.nodeName), and only on the host cluster. Whether a write adds a NoExecute taint is decided by
// what the API server would make of it: the write is dry-run first (any patch type, any body) and
// the NoExecute taints of its result are compared with the node's current ones.
import type { ClusterConnection, ResolvedResource } from '../clusters/types.js';
import { ForbiddenError } from '../errors.js';
import type { HostGuard } from './host-guard.js';
import { readJson } from './upstream.js';

interface Taint {
  key?: unknown;
  value?: unknown;
  effect?: unknown;
}
interface NodeLike {
  spec?: { taints?: unknown };
}

/** Node objects: the writes that could evict kiteline from its own node go through this file's checks. */
export function isNodes(resolved: ResolvedResource): boolean {
  return resolved.group === '' && resolved.resource === 'nodes';
}

/** Whether the node runs kiteline on kiteline's own host cluster (false on any other cluster). */
export async function nodeRunsKiteline(
  hostGuard: HostGuard,
  conn: ClusterConnection,
  node: string,
  signal?: AbortSignal,
): Promise<boolean> {
  if (!(await hostGuard.reachesHost(conn))) return false;
  const search = new URLSearchParams({ fieldSelector: `spec.nodeName=${node}`, limit: '1' });
  const res = await conn.request({
    method: 'GET',
    path: `/api/v1/namespaces/${encodeURIComponent(hostGuard.installNamespace)}/pods?${search}`,
    headers: { accept: 'application/json' },
    signal,
  });
  const pods = await readJson<{ items?: unknown[] }>(res);
  return (pods.items ?? []).length > 0;
}

/** The 403 of an action that would evict kiteline from its own node. */
export function evictsKiteline(conn: ClusterConnection, node: string, action: string): ForbiddenError {
  return new ForbiddenError(
    `node ${node} runs kiteline itself (cluster ${conn.name} is kiteline's host): ${action} it with kubectl, ` +
      'not through kiteline',
  );
}

/** Throws 403 when the node runs kiteline on its host; `action` names what was refused ("drain", "delete"). */
export async function refuseOnKitelineNode(
  hostGuard: HostGuard,
  conn: ClusterConnection,
  node: string,
  action: string,
  signal?: AbortSignal,
): Promise<void> {
  if (await nodeRunsKiteline(hostGuard, conn, node, signal)) throw evictsKiteline(conn, node, action);
}

/**
 * Throws 403 when a write of the node (a PUT or PATCH, run as `dryRun` first) would add a NoExecute
 * taint to a node that runs kiteline on its host.
 */
export async function refuseEvictingWrite(
  hostGuard: HostGuard,
  conn: ClusterConnection,
  node: string,
  dryRun: () => Promise<unknown>,
  signal?: AbortSignal,
): Promise<void> {
  if (!(await nodeRunsKiteline(hostGuard, conn, node, signal))) return;
  const res = await conn.request({
    method: 'GET',
    path: `/api/v1/nodes/${encodeURIComponent(node)}`,
    headers: { accept: 'application/json' },
    signal,
  });
  const current = await readJson<NodeLike>(res);
  if (addedNoExecuteTaints(current, (await dryRun()) as NodeLike).length > 0) throw evictsKiteline(conn, node, 'taint');
}

/** The NoExecute taints of `after` that `before` does not have (same key and value). */
export function addedNoExecuteTaints(before: NodeLike, after: NodeLike): Taint[] {
  const noExecute = (node: NodeLike): Taint[] =>
    (Array.isArray(node?.spec?.taints) ? (node.spec.taints as Taint[]) : []).filter(
      (taint) => taint?.effect === 'NoExecute',
    );
  const had = noExecute(before);
  return noExecute(after).filter((taint) => !had.some((old) => old.key === taint.key && old.value === taint.value));
}
