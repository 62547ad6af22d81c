// GET /api/v1/overview (Kite's home page): node, pod, namespace and service counts of the
// selected cluster plus CPU and memory allocatable/requested/limited in milli-units (Kite's
// units: MilliValue for both). Lists are read page by page (limit 500), never whole.
import type { ClusterConnection } from '../clusters/types.js';
import { readJson } from '../cluster-access/upstream.js';
import { milliValue } from '../cluster-access/quantity.js';
import { withSearch } from '../cluster-access/read-query.js';
import type { UpstreamHeaders } from '../cluster-access/impersonation.js';

export interface ResourceAmounts {
  allocatable: number;
  requested: number;
  limited: number;
}

export interface Overview {
  totalNodes: number;
  readyNodes: number;
  totalPods: number;
  runningPods: number;
  totalNamespaces: number;
  totalServices: number;
  prometheusEnabled: boolean;
  resource: { cpu: ResourceAmounts; memory: ResourceAmounts };
}

/** The resources the overview lists (each authorized as list across all namespaces). */
export const OVERVIEW_RESOURCES = ['nodes', 'pods', 'namespaces', 'services'] as const;

const PAGE_SIZE = 500;

type Item = Record<string, any>;

/** Calls onItem for every object of a core collection, one page at a time. */
async function eachItem(
  conn: ClusterConnection,
  plural: string,
  headers: UpstreamHeaders,
  signal: AbortSignal,
  onItem: (item: Item) => void,
): Promise<void> {
  let token: string | undefined;
  do {
    const search = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (token) search.set('continue', token);
    const page = await readJson<{ items?: Item[]; metadata?: { continue?: string } }>(
      await conn.request({
        method: 'GET',
        path: withSearch(`/api/v1/${plural}`, search),
        headers: { accept: 'application/json', ...headers },
        signal,
      }),
    );
    for (const item of page.items ?? []) onItem(item);
    token = page.metadata?.continue || undefined;
  } while (token);
}

export async function loadOverview(
  conn: ClusterConnection,
  headers: UpstreamHeaders,
  clientSignal: AbortSignal,
): Promise<Overview> {
  // One failed list stops the others.
  const failed = new AbortController();
  const signal = AbortSignal.any([clientSignal, failed.signal]);
  const cpu: ResourceAmounts = { allocatable: 0, requested: 0, limited: 0 };
  const memory: ResourceAmounts = { allocatable: 0, requested: 0, limited: 0 };
  const counts = { totalNodes: 0, readyNodes: 0, totalPods: 0, runningPods: 0, totalNamespaces: 0, totalServices: 0 };

  await Promise.all(
    [
      eachItem(conn, 'nodes', headers, signal, (node) => {
        counts.totalNodes++;
        const conditions: Item[] = node.status?.conditions ?? [];
        if (conditions.some((c) => c.type === 'Ready' && c.status === 'True')) counts.readyNodes++;
        cpu.allocatable += milliValue(node.status?.allocatable?.cpu);
        memory.allocatable += milliValue(node.status?.allocatable?.memory);
      }),
      eachItem(conn, 'pods', headers, signal, (pod) => {
        counts.totalPods++;
        const phase = pod.status?.phase;
        if (phase === 'Running') counts.runningPods++;
        if (phase === 'Succeeded' || phase === 'Failed') return; // finished pods hold no resources
        for (const container of (pod.spec?.containers ?? []) as Item[]) {
          cpu.requested += milliValue(container.resources?.requests?.cpu);
          memory.requested += milliValue(container.resources?.requests?.memory);
          cpu.limited += milliValue(container.resources?.limits?.cpu);
          memory.limited += milliValue(container.resources?.limits?.memory);
        }
      }),
      eachItem(conn, 'namespaces', headers, signal, () => counts.totalNamespaces++),
      eachItem(conn, 'services', headers, signal, () => counts.totalServices++),
    ].map((list) =>
      list.catch((err) => {
        failed.abort();
        throw err;
      }),
    ),
  );
  // Kite's rule: a Prometheus is configured for the cluster (no health check; src/monitoring/).
  return { ...counts, prometheusEnabled: conn.prometheusURL !== '', resource: { cpu, memory } };
}
