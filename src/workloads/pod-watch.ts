// Kite's live pod list (GET /api/v1/pods/<ns>/watch): one upstream watch of the namespace's pods
// (or all namespaces) per client, its events re-sent as server-sent events named `added`,
// `modified`, `deleted` (one pod each, keyed by namespace/name on the client) and `error`
// ({error}); `close` ({message}) when the cluster ends the watch. Each pod carries Kite's
// `metrics` member (CPU in millicores, memory in bytes, from metrics.k8s.io when the cluster serves
// it, else null), and every 15 seconds the pods with metrics are sent again as `modified` with
// fresh numbers (one metrics list per tick; Kite fetched each pod again, one GET per pod).
//
// `reduce=true` (what Kite's UI sends) trims each pod as Kite does: metadata keeps name,
// namespace, generateName, creationTimestamp and deletionTimestamp; spec keeps nodeName and each
// container's name, image and restartPolicy; status stays whole.
import type { ClusterConnection } from '../clusters/types.js';
import { HttpError } from '../errors.js';
import type { UpstreamHeaders } from '../cluster-access/impersonation.js';
import { milliValue } from '../cluster-access/quantity.js';
import { readJson } from '../cluster-access/upstream.js';
import type { EventStream } from '../cluster-access/sse.js';
import { relayWatch, type OpenWatch, type PodObject } from '../cluster-access/watch-events.js';

/** How often the pods with metrics are sent again with fresh numbers (Kite's interval). */
export const METRICS_INTERVAL_MS = 15_000;
/** A metrics list that takes longer is skipped for this tick. */
const METRICS_TIMEOUT_MS = 5_000;

/** Kite's per-pod numbers; a member that is zero is left out (Go's omitempty). */
export interface PodMetricsView {
  cpuUsage?: number;
  cpuLimit?: number;
  cpuRequest?: number;
  memoryUsage?: number;
  memoryLimit?: number;
  memoryRequest?: number;
}

type Resources = Record<string, unknown> | undefined;
interface ContainerSpec {
  name: string;
  image?: string;
  restartPolicy?: string;
  resources?: { limits?: Resources; requests?: Resources };
}

/** What is kept of each pod between events: its view, and its spec's limits and requests. */
interface KnownPod {
  view: Record<string, unknown>;
  spec: PodMetricsView;
}

interface MetricsItem {
  metadata?: { name?: string; namespace?: string };
  containers?: Array<{ usage?: Record<string, unknown> }>;
}

export interface PodWatch {
  conn: ClusterConnection;
  headers: UpstreamHeaders;
  /** The metrics.k8s.io list of the same pods, or undefined when the caller may not read metrics. */
  metricsPath: string | undefined;
  reduce: boolean;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** Kite's reduced pod. */
export function reducePod(pod: PodObject): Record<string, unknown> {
  const { name, namespace, generateName, creationTimestamp, deletionTimestamp } = pod.metadata as Record<
    string,
    unknown
  >;
  const metadata: Record<string, unknown> = { name, namespace, creationTimestamp: creationTimestamp ?? null };
  if (deletionTimestamp) metadata.deletionTimestamp = deletionTimestamp;
  if (generateName) metadata.generateName = generateName;
  const slim = (c: ContainerSpec) => ({
    name: c.name,
    ...(c.image ? { image: c.image } : {}),
    ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
  });
  const spec = pod.spec as
    { nodeName?: string; initContainers?: ContainerSpec[]; containers?: ContainerSpec[] } | undefined;
  const reducedSpec: Record<string, unknown> = { containers: (spec?.containers ?? []).map(slim) };
  if (spec?.nodeName) reducedSpec.nodeName = spec.nodeName;
  if (spec?.initContainers?.length) reducedSpec.initContainers = spec.initContainers.map(slim);
  const view: Record<string, unknown> = { metadata, spec: reducedSpec, status: pod.status ?? {} };
  if (pod.apiVersion) view.apiVersion = pod.apiVersion;
  if (pod.kind) view.kind = pod.kind;
  return view;
}

/** The limits and requests of a pod's containers (CPU in millicores, memory in bytes). */
function specTotals(pod: PodObject): PodMetricsView {
  let cpuLimit = 0,
    memoryLimit = 0,
    cpuRequest = 0,
    memoryRequest = 0;
  for (const c of (pod.spec?.containers ?? []) as ContainerSpec[]) {
    cpuLimit += milliValue(c.resources?.limits?.cpu);
    memoryLimit += bytes(c.resources?.limits?.memory);
    cpuRequest += milliValue(c.resources?.requests?.cpu);
    memoryRequest += bytes(c.resources?.requests?.memory);
  }
  return { cpuLimit, memoryLimit, cpuRequest, memoryRequest };
}

function bytes(quantity: unknown): number {
  return Math.ceil(milliValue(quantity) / 1000);
}

/** Kite's metrics member: null without a metrics sample, else usage plus the spec's totals. */
function metricsOf(known: KnownPod, sample: MetricsItem | undefined): PodMetricsView | null {
  if (!sample?.containers?.length) return null;
  let cpuUsage = 0,
    memoryUsage = 0;
  for (const c of sample.containers) {
    cpuUsage += milliValue(c.usage?.cpu);
    memoryUsage += bytes(c.usage?.memory);
  }
  const all: PodMetricsView = { cpuUsage, memoryUsage, ...known.spec };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== 0));
}

const keyOf = (namespace: string | undefined, name: string | undefined) => `${namespace ?? ''}/${name ?? ''}`;

/**
 * Re-sends the watch's events until the cluster ends it (then `close`) or the client leaves.
 * The watch is open already (its errors were plain HTTP answers); this owns and ends it.
 */
export async function relayPodWatch(events: EventStream, watch: PodWatch, upstream: OpenWatch): Promise<void> {
  const pods = new Map<string, KnownPod>();
  let metrics = await readMetrics(watch);
  const tick = setInterval(() => void refreshMetrics(), METRICS_INTERVAL_MS);

  async function refreshMetrics(): Promise<void> {
    if (!watch.metricsPath || events.closed) return;
    metrics = await readMetrics(watch);
    for (const [key, sample] of metrics) {
      const known = pods.get(key);
      if (known) await events.sendJson('modified', { ...known.view, metrics: metricsOf(known, sample) });
    }
  }

  try {
    await relayWatch<PodObject>(events, upstream, async (name, event) => {
      const pod = event.object;
      if (!pod.metadata) return;
      const key = keyOf(pod.metadata.namespace, pod.metadata.name);
      const known: KnownPod = {
        view: watch.reduce ? reducePod(pod) : pod,
        spec: specTotals(pod),
      };
      if (event.type === 'DELETED') pods.delete(key);
      else pods.set(key, known);
      await events.sendJson(name, { ...known.view, metrics: metricsOf(known, metrics.get(key)) });
    });
  } finally {
    clearInterval(tick);
  }
}

/** The metrics samples of the watched pods by namespace/name; empty when there are none to read. */
async function readMetrics(watch: PodWatch): Promise<Map<string, MetricsItem>> {
  const samples = new Map<string, MetricsItem>();
  if (!watch.metricsPath || watch.signal.aborted) return samples;
  try {
    const signal = AbortSignal.any([watch.signal, AbortSignal.timeout(METRICS_TIMEOUT_MS)]);
    const res = await watch.conn.request({
      method: 'GET',
      path: watch.metricsPath,
      headers: { accept: 'application/json', ...watch.headers },
      signal,
    });
    const list = await readJson<{ items?: MetricsItem[] }>(res);
    for (const item of list.items ?? []) samples.set(keyOf(item.metadata?.namespace, item.metadata?.name), item);
  } catch (err) {
    // No metrics-server, no permission, or slow: pods go without numbers, as in Kite. A cluster
    // that does not serve metrics.k8s.io at all is not asked again by this stream.
    if (err instanceof HttpError && err.status === 404) watch.metricsPath = undefined;
  }
  return samples;
}
