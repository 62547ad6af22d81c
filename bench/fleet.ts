// `node dist/bench/fleet.js` (make bench-fleet): a fleet of BENCH_FLEET_CLUSTERS clusters (default
// 1,000) on one replica, then shared by BENCH_FLEET_REPLICAS replicas (default 3), for
// docs/fleet.md's sizing table. The clusters are simulated as the issue asks: Cluster objects on a
// few real API servers (the bench's host and target planes), each with credentials of its own (a
// ServiceAccount token per cluster) and so a TLS connection of its own.
// One replica: start to /readyz, start to every cluster ready, RSS and heap once all are ready (and
// with no cluster at all, for the per-cluster cost), the first request to every cluster (p50, p99),
// the sockets left open once the pools have idled (the probes'), and the CPU the probes cost idle.
// N replicas: start to every cluster ready, clusters held and RSS per replica, the first request to
// every cluster through one replica (most forwarded to their holder), and a replica SIGKILLed: time
// until all of its clusters are served again through another.
// BENCH_FLEET_HEAP=1 adds a heap snapshot of the one replica, summed by constructor.
// The planes are `make bench`'s (.kiteline/bench/host and target, started when not running);
// BENCH_FLEET_HOST_DIR and BENCH_FLEET_TARGET_DIR name others (e.g. running test planes).
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startControlPlane, type ControlPlaneHandle } from '../src/controlplane/controlplane.js';
import { kubeconfigYaml } from '../src/controlplane/kubeconfig.js';
import { API_VERSION, ID_LABEL } from '../src/host/resources.js';
import { openSockets, processStats, startGateway, waitHttpOk, type Child } from './children.js';
import { bootstrapAdmin, callGateway, readyClusterCount, until } from './gateway-setup.js';
import { DirectKube } from './kube.js';
import { percentile } from './load.js';
import { loadSettings } from './settings.js';

const CREDENTIALS_NAMESPACE = 'kiteline-fleet-bench';
const FIRST_CLUSTER_ID = 20_000;
/** kiteline's idle timeout of a cluster's pooled connections (clusters/connection.ts). */
const POOL_IDLE_MS = 30_000;

function log(message: string): void {
  process.stderr.write(`[bench fleet ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function whole(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name} must be a positive whole number, got "${raw}"`);
  return Number(raw);
}

const clusterName = (i: number) => `fleet-${String(i).padStart(4, '0')}`;

/** One kubeconfig per cluster: a ServiceAccount of its own on one of the planes, and its token. */
async function clusterKubeconfigs(planes: ControlPlaneHandle[], count: number): Promise<string[]> {
  const kubes = planes.map((cp) => new DirectKube(cp));
  for (const kube of kubes) {
    await kube.ensureNamespace(CREDENTIALS_NAMESPACE);
    await kube.expect(
      'POST',
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        metadata: { name: CREDENTIALS_NAMESPACE },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [
          {
            kind: 'Group',
            apiGroup: 'rbac.authorization.k8s.io',
            name: `system:serviceaccounts:${CREDENTIALS_NAMESPACE}`,
          },
        ],
      },
      [201, 409],
    );
  }
  const configs: string[] = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const kube = kubes[i % kubes.length];
      const cp = planes[i % planes.length];
      const sa = `c-${i}`;
      const base = `/api/v1/namespaces/${CREDENTIALS_NAMESPACE}/serviceaccounts`;
      await kube.expect('POST', base, { metadata: { name: sa } }, [201, 409]);
      const token = await kube.expect('POST', `${base}/${sa}/token`, { spec: { expirationSeconds: 86_400 } }, [201]);
      configs[i] = kubeconfigYaml(clusterName(i), cp.server, cp.caPem, { token: token.body.status.token as string });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  for (const kube of kubes) kube.close();
  return configs;
}

/** The replica's gauge, heap and external memory from its /metrics. */
async function metric(url: string, key: string, name: string): Promise<number> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: key } });
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await res.text())?.[1] ?? NaN);
}

/** The first request to each cluster through one replica (GET of the Namespace "default"), `concurrency` at a time. */
async function firstRequests(
  url: string,
  key: string,
  names: string[],
  concurrency = 4,
): Promise<{ p50: number; p99: number; max: number; failures: number }> {
  const times: number[] = [];
  let failures = 0;
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++];
      const started = performance.now();
      const res = await callGateway(url, 'GET', '/api/v1/namespaces/_all/default', {
        headers: { authorization: key, 'x-cluster-name': name },
      });
      times.push(performance.now() - started);
      if (res.status !== 200) failures++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 0.5), p99: percentile(times, 0.99), max: times[times.length - 1], failures };
}

/**
 * BENCH_FLEET_HEAP=1: a heap snapshot of the replica (SIGUSR2), summed by constructor: where the
 * JS heap of a thousand clusters goes (the largest ten, self sizes).
 */
async function heapProfile(child: Child, dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const before = new Set(readdirSync(dir));
  child.process.kill('SIGUSR2');
  const file = await until(
    'the heap snapshot',
    async () => {
      const made = readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
      if (!made) return undefined;
      const size = statSync(join(dir, made)).size;
      await new Promise((r) => setTimeout(r, 2000));
      return statSync(join(dir, made)).size === size && size > 0 ? join(dir, made) : undefined;
    },
    300_000,
    500,
  );
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const types = snapshot.snapshot.meta.node_types[0];
  const bySize = new Map<string, number>();
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    const type = types[snapshot.nodes[i + typeAt]];
    const name = type === 'object' || type === 'closure' ? snapshot.strings[snapshot.nodes[i + nameAt]] : `(${type})`;
    bySize.set(name, (bySize.get(name) ?? 0) + snapshot.nodes[i + sizeAt]);
  }
  rmSync(file);
  return [...bySize]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10)
    .map(([name, size]) => `${name} ${(size / 1024 / 1024).toFixed(1)} MiB`)
    .join(', ');
}

const shuffled = <T>(list: T[]): T[] => {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
};
const mib = (n: number) => `${n.toFixed(0)} MiB`;
const ms = (n: number) => `${n.toFixed(0)} ms`;

async function main(): Promise<void> {
  const s = loadSettings();
  const clusters = whole('BENCH_FLEET_CLUSTERS', 1000);
  const replicas = whole('BENCH_FLEET_REPLICAS', 3);
  const hostDir = resolve(process.env.BENCH_FLEET_HOST_DIR || join(s.dir, 'host'));
  const targetDir = resolve(process.env.BENCH_FLEET_TARGET_DIR || join(s.dir, 'target'));
  const logDir = join(s.dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  log(`control planes: host ${hostDir}, target ${targetDir}`);
  const planes = await Promise.all([
    startControlPlane({ dir: hostDir, name: 'bench-host' }),
    startControlPlane({ dir: targetDir, name: 'bench-target' }),
  ]);
  const [hostCp] = planes;
  const host = new DirectKube(hostCp);
  const namespace = `bench-fleet-${randomBytes(3).toString('hex')}`;
  const children: Child[] = [];
  const rows: Array<[string, string]> = [];
  const addRows = (...measured: Array<[string, string]>) => {
    rows.push(...measured);
    for (const [what, value] of measured) log(`${what}: ${value}`);
  };
  const heapDir = process.env.BENCH_FLEET_HEAP ? join(s.dir, 'heap') : undefined;
  const gateway = async (logName: string, nodeArgs: string[] = []) => {
    const child = await startGateway({
      kubeconfig: hostCp.kubeconfigPath,
      namespace,
      logDir,
      logLevel: s.gatewayLogLevel,
      nodeArgs: [...s.gatewayNodeArgs, ...nodeArgs],
      logName,
    });
    children.push(child);
    return child;
  };
  try {
    log(`credentials for ${clusters} clusters (a ServiceAccount token each, on ${planes.length} API servers)`);
    const kubeconfigs = await clusterKubeconfigs(planes, clusters);
    await host.ensureNamespace(namespace);
    const emptyStartedAt = Date.now();
    const empty = await gateway('fleet-empty');
    await waitHttpOk(empty.process, `${empty.url}/readyz`, 120_000);
    const emptyReadyz = Date.now() - emptyStartedAt;
    const key = await bootstrapAdmin(empty.url);
    await new Promise((r) => setTimeout(r, 2000));
    const emptyRss = processStats(empty.process.pid!).rssMiB;
    const emptyHeap = (await metric(empty.url, key, 'nodejs_heap_size_used_bytes')) / 1024 / 1024;
    await empty.stop();

    log(`registering ${clusters} clusters (Secrets and Cluster objects straight into the host)`);
    const base = `/api/v1/namespaces/${namespace}/secrets`;
    await host.createMany(base, 0, clusters, 32, (i) => ({
      metadata: { name: `${clusterName(i)}-kubeconfig` },
      type: 'Opaque',
      stringData: { kubeconfig: kubeconfigs[i] },
    }));
    await host.createMany(`/apis/${API_VERSION}/namespaces/${namespace}/clusters`, 0, clusters, 32, (i) => ({
      apiVersion: API_VERSION,
      kind: 'Cluster',
      metadata: { name: clusterName(i), labels: { [ID_LABEL]: String(FIRST_CLUSTER_ID + i) } },
      spec: {
        name: clusterName(i),
        enabled: true,
        kubeconfigSecretRef: { name: `${clusterName(i)}-kubeconfig`, key: 'kubeconfig' },
      },
    }));
    const names = Array.from({ length: clusters }, (_, i) => clusterName(i));

    // ---- one replica ----
    log('one replica: start');
    const startedAt = Date.now();
    const one = await gateway(
      'fleet-one',
      heapDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${heapDir}`] : [],
    );
    await waitHttpOk(one.process, `${one.url}/readyz`, 120_000);
    const readyzAt = Date.now();
    await until(
      'every cluster ready',
      async () => ((await readyClusterCount(one.url, key)) >= clusters ? true : undefined),
      600_000,
      100,
    );
    const allReadyAt = Date.now();
    const ready = processStats(one.process.pid!);
    const heap = (await metric(one.url, key, 'nodejs_heap_size_used_bytes')) / 1024 / 1024;
    const external = (await metric(one.url, key, 'nodejs_external_memory_bytes')) / 1024 / 1024;
    if (heapDir) addRows(['one replica: heap by constructor, all clusters ready', await heapProfile(one, heapDir)]);
    log('one replica: the first request to every cluster');
    const first = await firstRequests(one.url, key, shuffled(names));
    const afterRequests = processStats(one.process.pid!);
    log(`waiting ${(POOL_IDLE_MS + 5000) / 1000} s for the pools to idle`);
    const idleFrom = processStats(one.process.pid!);
    await new Promise((r) => setTimeout(r, POOL_IDLE_MS + 5000));
    const idleTo = processStats(one.process.pid!);
    const sockets = openSockets(one.process.pid);
    const idleCpu = ((idleTo.cpuSeconds - idleFrom.cpuSeconds) / ((POOL_IDLE_MS + 5000) / 1000)) * 100;
    addRows(
      ['one replica: start to /readyz', `${ms(readyzAt - startedAt)} (with no cluster: ${ms(emptyReadyz)})`],
      [`one replica: start to all ${clusters} clusters ready`, ms(allReadyAt - startedAt)],
      [
        `one replica: RSS with all ${clusters} ready (peak)`,
        `${mib(ready.rssMiB)} (${mib(ready.peakRssMiB)}); JS heap ${mib(heap)}, external ${mib(external)}; ` +
          `with no cluster: RSS ${mib(emptyRss)}, heap ${mib(emptyHeap)}`,
      ],
      [
        `one replica: first request to each of the ${clusters} clusters (4 at a time)`,
        `p50 ${ms(first.p50)}, p99 ${ms(first.p99)}, max ${ms(first.max)}, ${first.failures} failed; ` +
          `RSS after ${mib(afterRequests.rssMiB)}`,
      ],
      [
        `one replica: open sockets ${(POOL_IDLE_MS + 5000) / 1000} s after the last request`,
        `${sockets} (${clusters} probe connections expected, plus the host's)`,
      ],
      ['one replica: CPU while idle (probes every 5 s)', `${idleCpu.toFixed(1)} % of one core`],
    );
    await one.stop();

    // ---- N replicas ----
    log(`${replicas} replicas: start`);
    const fleetStartedAt = Date.now();
    const fleet = await Promise.all(Array.from({ length: replicas }, (_, i) => gateway(`fleet-${i}`)));
    await Promise.all(fleet.map((g) => waitHttpOk(g.process, `${g.url}/readyz`, 120_000)));
    await until(
      'every replica to see the others and all clusters ready',
      async () => {
        for (const g of fleet) if ((await metric(g.url, key, 'kiteline_fleet_replicas')) !== replicas) return undefined;
        return (await readyClusterCount(fleet[0].url, key)) >= clusters ? true : undefined;
      },
      600_000,
      200,
    );
    const fleetReadyAt = Date.now();
    const held = await Promise.all(fleet.map((g) => metric(g.url, key, 'kiteline_fleet_held_clusters')));
    const rss = fleet.map((g) => processStats(g.process.pid!).rssMiB);
    log(`${replicas} replicas: the first request to every cluster through one`);
    const through = await firstRequests(fleet[0].url, key, shuffled(names));
    const again = await firstRequests(fleet[0].url, key, shuffled(names));
    addRows(
      [`${replicas} replicas: start to all ${clusters} clusters ready`, ms(fleetReadyAt - fleetStartedAt)],
      [`${replicas} replicas: clusters held, RSS`, held.map((h, i) => `${h} held, ${mib(rss[i])}`).join('; ')],
      [
        `${replicas} replicas: first request to each cluster through one replica (${Math.round(
          ((clusters - held[0]) / clusters) * 100,
        )} % forwarded)`,
        `p50 ${ms(through.p50)}, p99 ${ms(through.p99)}, ${through.failures} failed; second request p50 ` +
          `${ms(again.p50)}, p99 ${ms(again.p99)}`,
      ],
    );
    if (replicas > 1) {
      const victim = fleet[replicas - 1];
      const killedAt = Date.now();
      victim.process.kill('SIGKILL');
      await until(
        'every cluster served again through the first replica',
        async () => {
          const res = await firstRequests(fleet[0].url, key, names, 16);
          return res.failures === 0 ? true : undefined;
        },
        120_000,
        100,
      );
      addRows([
        `${replicas} replicas: one SIGKILLed, until all ${clusters} clusters answer through another`,
        ms(Date.now() - killedAt),
      ]);
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await host.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => undefined);
    host.close();
  }
  const table = [
    '| fleet | measured |',
    '|---|---|',
    ...rows.map(([what, value]) => `| ${what} | ${value} |`),
    '',
  ].join('\n');
  process.stdout.write(table);
  writeFileSync(join(s.dir, `fleet-${new Date().toISOString().replace(/[:.]/g, '-')}.md`), table);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
