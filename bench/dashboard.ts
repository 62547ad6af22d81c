// A simulated Kite dashboard (docs/benchmarks.md, "Cached reads"): `users` users, each polling the
// same `lists` lists every `intervalMs` through one gateway, as Kite's UI polls its resource lists.
// Measured: what the target's API server and etcd spend on it (CPU seconds from /proc, over the
// same time for each gateway), the lists answered and their latency. Run once through the gateway
// through each gateway given (the plain replica without a cache first): the ratios are what the
// cache saves the cluster.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlaneHandle } from '../src/controlplane/controlplane.js';
import { processStats } from './children.js';
import { callGateway } from './gateway-setup.js';
import type { Figure } from './table.js';

export interface DashboardPlan {
  target: ControlPlaneHandle;
  /** Each gateway with an API key of its own install. */
  gateways: Array<{ label: string; url: string; key: string }>;
  cluster: string;
  /** Gateway paths of the polled lists (/api/v1/<resource>/<namespace|_all>). */
  lists: string[];
  users: number;
  intervalMs: number;
  seconds: number;
  log: (message: string) => void;
}

interface Run {
  apiserverCpu: number;
  etcdCpu: number;
  lists: number;
  failures: number;
  p50Ms: number;
}

/** The target's API server and etcd pids, from its state file. */
function planePids(target: ControlPlaneHandle): { apiserver: number; etcd: number } {
  const state = JSON.parse(readFileSync(join(target.dir, 'state.json'), 'utf8')) as {
    pids: { apiserver: number; etcd: number };
  };
  return state.pids;
}

async function poll(plan: DashboardPlan, gateway: { url: string; key: string }, seconds: number): Promise<Run> {
  const pids = planePids(plan.target);
  const before = { apiserver: processStats(pids.apiserver), etcd: processStats(pids.etcd) };
  const deadline = Date.now() + seconds * 1000;
  const latencies: number[] = [];
  let failures = 0;
  const user = async (index: number) => {
    // Users start spread over one interval, as they would open their dashboards.
    await new Promise((resolve) => setTimeout(resolve, (plan.intervalMs * index) / plan.users));
    while (Date.now() < deadline) {
      const round = Date.now();
      await Promise.all(
        plan.lists.map(async (path) => {
          const started = performance.now();
          const res = await callGateway(gateway.url, 'GET', path, {
            headers: { authorization: gateway.key, 'x-cluster-name': plan.cluster },
          });
          latencies.push(performance.now() - started);
          if (res.status !== 200) failures++;
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, round + plan.intervalMs - Date.now())));
    }
  };
  await Promise.all(Array.from({ length: plan.users }, (_, i) => user(i)));
  const after = { apiserver: processStats(pids.apiserver), etcd: processStats(pids.etcd) };
  latencies.sort((a, b) => a - b);
  return {
    apiserverCpu: after.apiserver.cpuSeconds - before.apiserver.cpuSeconds,
    etcdCpu: after.etcd.cpuSeconds - before.etcd.cpuSeconds,
    lists: latencies.length,
    failures,
    p50Ms: latencies[Math.floor(latencies.length / 2)] ?? 0,
  };
}

/** What the target's API server and etcd spend with nobody polling, over `seconds`. */
async function idle(plan: DashboardPlan, seconds: number): Promise<{ apiserverCpu: number; etcdCpu: number }> {
  const pids = planePids(plan.target);
  const before = { apiserver: processStats(pids.apiserver), etcd: processStats(pids.etcd) };
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const after = { apiserver: processStats(pids.apiserver), etcd: processStats(pids.etcd) };
  return {
    apiserverCpu: after.apiserver.cpuSeconds - before.apiserver.cpuSeconds,
    etcdCpu: after.etcd.cpuSeconds - before.etcd.cpuSeconds,
  };
}

export async function dashboardFigures(plan: DashboardPlan): Promise<Figure[]> {
  const figures: Figure[] = [];
  const runs: Run[] = [];
  // The target's own work meanwhile (leader leases, controllers, the gateways' probes and watches):
  // taken off each run, so the ratios compare what the dashboard costs.
  plan.log(`the target idle for ${plan.seconds} s`);
  const baseline = await idle(plan, plan.seconds);
  figures.push({
    what: `target idle for ${plan.seconds} s (nobody polling; taken off the dashboard figures below)`,
    value: `API server CPU ${baseline.apiserverCpu.toFixed(2)} s, etcd ${baseline.etcdCpu.toFixed(2)} s`,
  });
  for (const gateway of plan.gateways) {
    plan.log(`simulated dashboard through ${gateway.label}: warming up`);
    await poll(plan, gateway, 3);
    plan.log(`simulated dashboard through ${gateway.label}: ${plan.seconds} s`);
    const run = await poll(plan, gateway, plan.seconds);
    run.apiserverCpu -= baseline.apiserverCpu;
    run.etcdCpu -= baseline.etcdCpu;
    runs.push(run);
    figures.push({
      what:
        `simulated Kite dashboard (${plan.users} users polling ${plan.lists.length} lists every ` +
        `${plan.intervalMs / 1000} s, ${plan.seconds} s) through ${gateway.label}`,
      value:
        `target API server CPU ${run.apiserverCpu.toFixed(2)} s, etcd ${run.etcdCpu.toFixed(2)} s above idle; ` +
        `${run.lists} lists, p50 ${run.p50Ms.toFixed(1)} ms, ${run.failures} failures`,
    });
  }
  // The first gateway is the baseline: each other one's API server CPU against it.
  for (let i = 1; i < runs.length && runs[0].apiserverCpu > 0; i++) {
    figures.push({
      what: `target API server CPU of the dashboard, ${plan.gateways[i].label} / ${plan.gateways[0].label}`,
      value: (runs[i].apiserverCpu / runs[0].apiserverCpu).toFixed(2),
    });
  }
  return figures;
}

/** How the gateway's read cache answered the rows' reads (kiteline_read_cache_reads_total by outcome). */
export async function cacheOutcomes(url: string, key: string, cluster: string): Promise<Figure[]> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: key } });
  const text = await res.text();
  const counts = [...text.matchAll(/^kiteline_read_cache_reads_total\{cluster="([^"]+)",outcome="([^"]+)"\} (\S+)$/gm)]
    .filter((m) => m[1] === cluster)
    .map((m) => `${m[2]} ${Number(m[3])}`);
  return [{ what: "the gateway's read cache over the rows, reads by outcome", value: counts.join(', ') || 'none' }];
}

/** What the gateway's read caches hold for a cluster, and its JS heap (from its /metrics). */
export async function cacheMemory(url: string, key: string, cluster: string): Promise<Figure[]> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: key } });
  const text = await res.text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const objects = value(`kiteline_read_cache_objects\\{cluster="${cluster}"\\}`);
  const bytes = value(`kiteline_read_cache_bytes\\{cluster="${cluster}"\\}`);
  const heap = value('nodejs_heap_size_used_bytes');
  const perObject = bytes / objects;
  return [
    {
      what: 'read caches of the target after the rows (every ConfigMap of the cluster, and the lists polled)',
      value:
        `${objects} objects, ${(bytes / 1024 / 1024).toFixed(1)} MiB of JSON (${perObject.toFixed(0)} bytes each: ` +
        `${((perObject * 5000) / 1024 / 1024).toFixed(1)} MiB for 5,000); gateway JS heap used ` +
        `${(heap / 1024 / 1024).toFixed(0)} MiB`,
    },
  ];
}
