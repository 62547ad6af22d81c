// The series of Kite's charts (docs/monitoring.md): a node's or the whole cluster's CPU, memory and
// network over the last 30m, 1h or 24h (GET /api/v1/prometheus/resource-usage-history), and one
// pod's (or a workload's pods') CPU, memory, network and disk (GET /api/v1/prometheus/pods/...),
// as range queries of cAdvisor's series, Kite's queries with Kite's steps and answer shapes.
//
// Every value put into a query is a PromQL string literal of a value already checked against the
// Kubernetes name rules by the route (and regex-escaped where it is a regex), so no request can
// change the query's shape.
//
// Decision (the allocatable of CPU and memory percentages): Kite divides by kube-state-metrics'
// `kube_node_status_allocatable`; kiteline uses it when Prometheus has it, else cAdvisor's machine
// capacity (`machine_cpu_cores`, `machine_memory_bytes`, from the same /metrics/cadvisor scrape as
// the usage), so a Prometheus scraping only the kubelets draws both charts. The fallback is the
// machine's capacity, which is larger than allocatable by the node's reserved resources.
import { firstSeries, type UsagePoint } from './prometheus.js';
import { promqlString, regexLiteral } from './promql.js';

export const DURATIONS = ['30m', '1h', '24h'] as const;
export type Duration = (typeof DURATIONS)[number];

const RANGE_SECONDS: Record<Duration, number> = { '30m': 1800, '1h': 3600, '24h': 86400 };
/** Kite's steps: node and cluster charts. */
const NODE_STEP_SECONDS: Record<Duration, number> = { '30m': 60, '1h': 120, '24h': 1800 };
/** Kite's steps: pod charts. */
const POD_STEP_SECONDS: Record<Duration, number> = { '30m': 15, '1h': 60, '24h': 300 };

export interface PrometheusTarget {
  prometheusURL: string;
  name: string;
}

export interface ResourceUsageHistory {
  cpu: UsagePoint[];
  memory: UsagePoint[];
  networkIn: UsagePoint[];
  networkOut: UsagePoint[];
  /** Kite never fills these on the node chart (its UI reads them only from pod metrics). */
  diskRead: null;
  diskWrite: null;
}

export interface PodMetrics {
  cpu: UsagePoint[];
  memory: UsagePoint[];
  networkIn: UsagePoint[];
  networkOut: UsagePoint[];
  diskRead: UsagePoint[];
  diskWrite: UsagePoint[];
  /** Kite's metrics-server fallback; kiteline's series always come from Prometheus. */
  fallback: false;
}

/** A selector's matchers, each `label<op>"value"` with the value as a PromQL string. */
function selector(matchers: Array<[label: string, op: '=' | '!=' | '=~', value: string]>): string {
  return `{${matchers.map(([label, op, value]) => `${label}${op}${promqlString(value)}`).join(',')}}`;
}

const REAL_CONTAINERS: Array<[string, '!=', string]> = [
  ['container', '!=', 'POD'],
  ['container', '!=', ''],
];

/**
 * A node's (instance given) or the cluster's usage. The node is matched by the label `instance`
 * (the node name, as Prometheus' kubernetes_sd role `node` sets it), and, when that finds nothing
 * at all, by the label `node` (kube-prometheus-stack's relabelling): Kite's two tries.
 */
export async function resourceUsageHistory(
  target: PrometheusTarget,
  instance: string | undefined,
  duration: Duration,
  signal: AbortSignal,
): Promise<ResourceUsageHistory> {
  const first = await nodeUsage(target, instance, 'instance', duration, signal);
  if (instance === undefined || !allEmpty(first)) return first;
  return nodeUsage(target, instance, 'node', duration, signal);
}

function allEmpty(usage: ResourceUsageHistory): boolean {
  return [usage.cpu, usage.memory, usage.networkIn, usage.networkOut].every((s) => s.length === 0);
}

async function nodeUsage(
  target: PrometheusTarget,
  instance: string | undefined,
  nodeLabel: 'instance' | 'node',
  duration: Duration,
  signal: AbortSignal,
): Promise<ResourceUsageHistory> {
  const onNode: Array<[string, '=', string]> = instance === undefined ? [] : [[nodeLabel, '=', instance]];
  const ksmNode: Array<[string, '=', string]> = instance === undefined ? [] : [['node', '=', instance]];
  const containers = selector([...REAL_CONTAINERS, ...onNode]);
  const capacity = (resource: 'cpu' | 'memory', machineMetric: string) =>
    `(sum(kube_node_status_allocatable${selector([['resource', '=', resource], ...ksmNode])})` +
    ` or sum(${machineMetric}${selector(onNode)}))`;
  const range = rangeOf(duration, NODE_STEP_SECONDS);
  const [cpu, memory, networkIn, networkOut] = await Promise.all(
    [
      `sum(rate(container_cpu_usage_seconds_total${containers}[1m])) / ${capacity('cpu', 'machine_cpu_cores')} * 100`,
      `sum(container_memory_usage_bytes${containers}) / ${capacity('memory', 'machine_memory_bytes')} * 100`,
      `sum(rate(container_network_receive_bytes_total${selector(onNode)}[1m]))`,
      `sum(rate(container_network_transmit_bytes_total${selector(onNode)}[1m]))`,
    ].map((query) => firstSeries(target, query, range, signal)),
  );
  return { cpu: cpu, memory: memory, networkIn: networkIn, networkOut: networkOut, diskRead: null, diskWrite: null };
}

/**
 * A pod's series. `pod` is a name or a name prefix (Kite's workload tabs send a Deployment's name or
 * a pod's generateName): every pod whose name starts with it, in `namespace` only.
 */
export async function podMetrics(
  target: PrometheusTarget,
  pod: { namespace: string; pod: string; container?: string },
  duration: Duration,
  signal: AbortSignal,
): Promise<PodMetrics> {
  const thePod: Array<[string, '=' | '=~', string]> = [
    ['pod', '=~', `${regexLiteral(pod.pod)}.*`],
    ...(pod.container === undefined ? [] : ([['container', '=', pod.container]] as Array<[string, '=', string]>)),
    ['namespace', '=', pod.namespace],
  ];
  const containers = selector([...REAL_CONTAINERS, ...thePod]);
  const anyContainer = selector(thePod);
  const range = rangeOf(duration, POD_STEP_SECONDS);
  const series = await Promise.all(
    [
      `sum(rate(container_cpu_usage_seconds_total${containers}[1m]))`,
      `sum(container_memory_usage_bytes${containers}) / 1024 / 1024`,
      `sum(rate(container_network_receive_bytes_total${anyContainer}[1m]))`,
      `sum(rate(container_network_transmit_bytes_total${anyContainer}[1m]))`,
      `sum(rate(container_fs_reads_bytes_total${containers}[1m]))`,
      `sum(rate(container_fs_writes_bytes_total${containers}[1m]))`,
    ].map(async (query) => frontFilled(await firstSeries(target, query, range, signal), range)),
  );
  const [cpu, memory, networkIn, networkOut, diskRead, diskWrite] = series as [
    UsagePoint[],
    UsagePoint[],
    UsagePoint[],
    UsagePoint[],
    UsagePoint[],
    UsagePoint[],
  ];
  return { cpu, memory, networkIn, networkOut, diskRead, diskWrite, fallback: false };
}

interface Range {
  start: number;
  end: number;
  stepSeconds: number;
}

function rangeOf(duration: Duration, steps: Record<Duration, number>): Range {
  const end = Date.now();
  return { start: end - RANGE_SECONDS[duration] * 1000, end, stepSeconds: steps[duration] };
}

/**
 * Kite's front-filling of a pod's series: zero points, one per step, from the start of the range up
 * to the first point (a pod younger than the range starts at zero rather than mid-chart).
 */
export function frontFilled(points: UsagePoint[], range: Range): UsagePoint[] {
  if (points.length === 0) return points;
  const step = range.stepSeconds * 1000;
  const first = Date.parse(points[0].timestamp);
  if (first - range.start <= step) return points;
  const zeros: UsagePoint[] = [];
  for (let t = range.start + step; t < first; t += step) zeros.push({ timestamp: new Date(t).toISOString(), value: 0 });
  return [...zeros, ...points];
}
