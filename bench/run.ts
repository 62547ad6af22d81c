// `make bench`: the same requests at the same concurrency against one target cluster through
// (a) its API server directly, (b) `kubectl proxy`, (c) the kiteline gateway's /api/v1 routes with
// an API key, (d) the gateway's /k8s/clusters proxy (kubectl's path), then the gateway's scale
// figures. Prints two Markdown tables (see docs/benchmarks.md) and writes
// them to .kiteline/bench/results-<time>.md.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControlPlane, stopControlPlane, type ControlPlaneHandle } from '../src/controlplane/controlplane.js';
import { auditFigures } from './audit.js';
import { openSockets, processStats, startGateway, startKubectlProxy, waitHttpOk, type Child } from './children.js';
import { bootstrapAdmin, callGateway, readyClusterCount, registerCluster, until } from './gateway-setup.js';
import { cacheMemory, cacheOutcomes, dashboardFigures } from './dashboard.js';
import { DirectKube } from './kube.js';
import {
  combineRounds,
  measureLoad,
  runLoad,
  runWatch,
  warmUp,
  type LoadRequest,
  type LoadResult,
  type Path,
} from './load.js';
import { clusterObjects, createUsers, FIRST_CLUSTER_ID, kubectlApply, kubectlDeleteAll } from './scale.js';
import { loadSettings, type BenchSettings } from './settings.js';
import { comparisonTable, figureTable, type ComparisonRow, type Figure } from './table.js';

const TARGET_CLUSTER = 'target';
const KUBECTL_PROXY = 'kubectl proxy';
const OBJECT_NAMESPACE = 'bench';

function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function ms(value: number): string {
  return `${value.toFixed(0)} ms`;
}

/** The target's objects: one ConfigMap to GET, one to PATCH, and the LIST and watch namespaces. */
async function prepareTarget(
  target: DirectKube,
  s: BenchSettings,
): Promise<{ listNamespace: string; watchNamespace: string; spreadNamespace: string }> {
  const listNamespace = `bench-list-${s.listSize}`;
  const watchNamespace = `bench-watch-${s.watchEvents}`;
  const spreadNamespace = `bench-list-${s.spreadSize}`;
  await target.ensureNamespace(OBJECT_NAMESPACE);
  for (const name of ['bench-get', 'bench-patch']) {
    await target.expect(
      'POST',
      `/api/v1/namespaces/${OBJECT_NAMESPACE}/configmaps`,
      { metadata: { name }, data: { greeting: 'hello' } },
      [201, 409],
    );
  }
  const filler = 'x'.repeat(200);
  for (const [namespace, size] of [
    [listNamespace, s.listSize],
    [watchNamespace, s.watchEvents],
    [spreadNamespace, s.spreadSize],
  ] as const) {
    await target.ensureNamespace(namespace);
    const path = `/api/v1/namespaces/${namespace}/configmaps`;
    const have = await target.count(path);
    // kube-root-ca.crt is created by the controller manager in every namespace.
    const want = size - 1;
    if (have - 1 < want) {
      log(`creating ${want} ConfigMaps in ${namespace} on the target (once; later runs reuse them)`);
      await target.createMany(path, 0, want, 32, (i) => ({
        metadata: { name: `cm-${i}`, labels: { bench: 'yes' } },
        data: { index: String(i), filler },
      }));
    }
  }
  return { listNamespace, watchNamespace, spreadNamespace };
}

interface Row {
  /** The BENCH_ROWS name of the row. */
  id: string;
  row: string;
  unit: string;
  /** Paths of this row when not the common three. */
  paths?: Path[];
  /** A request/response row: the request on each path (index: direct, proxy, gateway, then more gateways). */
  load?: { connections: number; request: (index: number) => LoadRequest };
  /** Any other row (watch): runs it on one path. */
  run?: (path: Path, index: number) => Promise<LoadResult>;
}

/**
 * Runs each row on every path. Request/response rows warm every path up, then measure in rounds
 * that alternate the paths (rotating who goes first), so a machine or an etcd that drifts during
 * the run weighs on every path alike; the rounds are combined (combineRounds).
 */
async function compare(common: Path[], rows: Row[], s: BenchSettings): Promise<ComparisonRow[]> {
  const out: ComparisonRow[] = [];
  for (const row of rows) {
    const paths = row.paths ?? common;
    const results: LoadResult[] = [];
    if (row.load) {
      const { connections, request } = row.load;
      for (const [index, path] of paths.entries()) {
        log(`${row.row}: warming up ${path.label}`);
        await warmUp(path, request(index), connections, s.warmupSeconds);
      }
      const rounds: LoadResult[][] = paths.map(() => []);
      const seconds = Math.max(1, Math.round(s.durationSeconds / s.rounds));
      for (let round = 0; round < s.rounds; round++) {
        for (let k = 0; k < paths.length; k++) {
          const index = (k + round) % paths.length;
          log(`${row.row} via ${paths[index].label} (round ${round + 1} of ${s.rounds})`);
          rounds[index].push(await measureLoad(paths[index], request(index), connections, seconds));
        }
      }
      results.push(...rounds.map(combineRounds));
    } else {
      for (const [index, path] of paths.entries()) {
        log(`${row.row} via ${path.label}`);
        results.push(await row.run!(path, index));
      }
    }
    const proxyIndex = paths.findIndex((p) => p.label === KUBECTL_PROXY);
    for (const [index, path] of paths.entries()) {
      out.push({
        row: row.row,
        path: path.label,
        result: results[index],
        directPerSecond: results[0].requestsPerSecond,
        ...(proxyIndex >= 0 ? { kubectlProxy: results[proxyIndex] } : {}),
        unit: row.unit,
      });
    }
  }
  return out;
}

interface ScaleContext {
  s: BenchSettings;
  hostCp: ControlPlaneHandle;
  host: DirectKube;
  namespace: string;
  targetKubeconfig: string;
  key: string;
  logDir: string;
  /** Started processes (stopped by main); a restarted gateway is added. */
  children: Child[];
  gateway: Child;
}

/** Apply-to-served time, start-up with many clusters, and the user list with many users. */
async function scaleFigures(ctx: ScaleContext): Promise<Figure[]> {
  const { s, hostCp, host, namespace, targetKubeconfig, key, logDir, children } = ctx;
  let gateway = ctx.gateway;
  const figures: Figure[] = [];
  // kubectl apply of a new Cluster until a resource request through it succeeds.
  log('timing kubectl apply of a Cluster to its first served request');
  const applied = 'bench-applied';
  const firstServed = Date.now();
  kubectlApply(hostCp.kubeconfigPath, clusterObjects(namespace, applied, targetKubeconfig));
  const kubectlDone = Date.now();
  await until(
    'the applied cluster to serve',
    async () => {
      const res = await callGateway(gateway.url, 'GET', `/api/v1/configmaps/${OBJECT_NAMESPACE}/bench-get`, {
        headers: { authorization: key, 'x-cluster-name': applied },
      });
      return res.status === 200 ? true : undefined;
    },
    60_000,
    10,
  );
  const servedAt = Date.now();
  figures.push({
    what: 'kubectl apply of a Cluster to its first served request',
    value: `${ms(servedAt - firstServed)} (${ms(servedAt - kubectlDone)} after kubectl returned)`,
  });

  // Many clusters: apply them, then time a fresh gateway's start.
  // They are applied as already registered ones (ids assigned), so the start measures serving
  // registered clusters, not assigning 200 ids; the gateway is stopped first.
  log(`applying ${s.clusters} Cluster CRs and starting a fresh gateway`);
  await gateway.stop();
  // The audit records of the rows before (and of the audit figures) go first: this start measures
  // clusters. The trail's own load is the audit figures' "until the gateway lists" (it runs in the
  // background and /readyz does not wait for it).
  kubectlDeleteAll(hostCp.kubeconfigPath, namespace, 'auditchunks.kiteline.io');
  const many: object[] = [];
  for (let i = 0; i < s.clusters; i++)
    many.push(
      ...clusterObjects(namespace, `bench-c-${String(i).padStart(3, '0')}`, targetKubeconfig, FIRST_CLUSTER_ID + i),
    );
  kubectlApply(hostCp.kubeconfigPath, many);
  const expectedReady = s.clusters + 2; // plus target and bench-applied
  const startedAt = Date.now();
  gateway = await startGateway({
    kubeconfig: hostCp.kubeconfigPath,
    namespace,
    logDir,
    logLevel: s.gatewayLogLevel,
    nodeArgs: s.gatewayNodeArgs,
  });
  children.push(gateway);
  await waitHttpOk(gateway.process, `${gateway.url}/readyz`, 120_000);
  const readyzAt = Date.now();
  await until(
    `${expectedReady} clusters ready after the restart`,
    async () => ((await readyClusterCount(gateway.url, key)) >= expectedReady ? true : undefined),
    300_000,
    50,
  );
  const allReadyAt = Date.now();
  const manyStats = processStats(gateway.process.pid!);
  const memory = await gatewayMemory(gateway.url, key);
  figures.push(
    { what: `gateway start to /readyz with ${expectedReady} clusters`, value: ms(readyzAt - startedAt) },
    { what: `gateway start to all ${expectedReady} clusters ready`, value: ms(allReadyAt - startedAt) },
    {
      what: `gateway RSS with ${expectedReady} ready clusters (peak during start)`,
      value:
        `${manyStats.rssMiB.toFixed(0)} MiB (${manyStats.peakRssMiB.toFixed(0)} MiB); ` +
        `JS heap used ${memory.heapMiB.toFixed(0)} MiB, external ${memory.externalMiB.toFixed(0)} MiB`,
    },
  );

  // Many users: CRs straight into the host, then the admin list and a search.
  log(`creating ${s.users} users`);
  await createUsers(host, namespace, s.users);
  await until(
    `${s.users + 1} users in the gateway's cache`,
    async () => {
      const res = await callGateway(gateway.url, 'GET', '/api/v1/admin/users/?size=1', {
        headers: { authorization: key },
      });
      return res.status === 200 && res.body.total >= s.users + 1 ? true : undefined;
    },
    300_000,
    250,
  );
  const gatewayPath: Path = { label: 'gateway', base: gateway.url, headers: { authorization: key } };
  for (const [what, query] of [
    ['GET /api/v1/admin/users/', ''],
    ['GET /api/v1/admin/users/?search=user-12', '?search=user-12'],
  ] as const) {
    log(what);
    const r = await runLoad(
      gatewayPath,
      { method: 'GET', path: `/api/v1/admin/users/${query}` },
      8,
      s.durationSeconds,
      s.warmupSeconds,
    );
    figures.push({
      what: `${what} with ${s.users + 1} users`,
      value:
        `p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, ` +
        `${r.requestsPerSecond.toFixed(0)} req/s, ${r.failures} failures`,
    });
  }

  // Nobody has sent a cluster request since the clusters became ready (the user rows touch none):
  // once the pools' idle timeout has passed, what is left open is the health probes' connections.
  const wait = Math.max(0, POOL_IDLE_MS + 5_000 - (Date.now() - allReadyAt));
  log(`waiting ${Math.round(wait / 1000)} s for idle cluster connections to close`);
  await new Promise((resolve) => setTimeout(resolve, wait));
  figures.push({
    what: `gateway open sockets ${Math.round((Date.now() - allReadyAt) / 1000)} s after the last cluster request`,
    value: `${openSockets(gateway.process.pid)} (${expectedReady} clusters: one health-probe connection each)`,
  });
  return figures;
}

/** kiteline's idle timeout of a cluster's pooled connections (clusters/connection.ts). */
const POOL_IDLE_MS = 30_000;

/** The gateway's JS heap and external memory, from its own /metrics. */
async function gatewayMemory(url: string, key: string): Promise<{ heapMiB: number; externalMiB: number }> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: key } });
  const text = await res.text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) / 1024 / 1024;
  return { heapMiB: value('nodejs_heap_size_used_bytes'), externalMiB: value('nodejs_external_memory_bytes') };
}

async function main(): Promise<void> {
  const s = loadSettings();
  const logDir = join(s.dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  log(`settings: ${JSON.stringify(s)}`);
  log('starting the host and target control planes');
  const [hostCp, targetCp] = await Promise.all([
    startControlPlane({ dir: join(s.dir, 'host'), name: 'bench-host' }),
    startControlPlane({ dir: join(s.dir, 'target'), name: 'bench-target' }),
  ]);
  const host = new DirectKube(hostCp);
  const target = new DirectKube(targetCp);
  const namespace = `bench-${randomBytes(3).toString('hex')}`;
  /** The namespaces of the comparison gateways, each an install of its own. */
  const installs: string[] = [];
  const children: Child[] = [];
  try {
    const { listNamespace, watchNamespace, spreadNamespace } = await prepareTarget(target, s);
    await host.ensureNamespace(namespace);
    const targetKubeconfig = readFileSync(targetCp.kubeconfigPath, 'utf8');

    log(`starting the gateway (install namespace ${namespace}) and kubectl proxy`);
    // Every replica keeps all audit records: the audit figures add BENCH_AUDIT_RECORDS to what the
    // rows before them recorded, and the leader (any replica) would prune past the default 100,000.
    const keepAudit = { KITELINE_AUDIT_MAX_RECORDS: String(10_000_000) };
    const gateway = await startGateway({
      kubeconfig: hostCp.kubeconfigPath,
      namespace,
      logDir,
      logLevel: s.gatewayLogLevel,
      nodeArgs: s.gatewayNodeArgs,
      env: keepAudit,
    });
    children.push(gateway);
    await waitHttpOk(gateway.process, `${gateway.url}/readyz`, 120_000);
    const key = await bootstrapAdmin(gateway.url);
    await registerCluster(gateway.url, key, TARGET_CLUSTER, targetKubeconfig);
    const proxy = await startKubectlProxy(targetCp.kubeconfigPath, logDir);
    children.push(proxy);
    // A second gateway with read coalescing, write turns and the read cache off, for the GET, LIST
    // and PATCH rows and the simulated dashboard: what each request costs on its own when no
    // request helps another. Each such gateway is an install of its own (its own namespace, admin
    // key and registration of the target): replicas of one install share the fleet (docs/fleet.md),
    // so one of them would hold the target and the others would reach it over the internal hop.
    const replica = async (logName: string, env: Record<string, string>): Promise<Child & { key: string }> => {
      const own = `${namespace}-${logName}`;
      await host.ensureNamespace(own);
      installs.push(own);
      const child = await startGateway({
        kubeconfig: hostCp.kubeconfigPath,
        namespace: own,
        logDir,
        logLevel: s.gatewayLogLevel,
        nodeArgs: s.gatewayNodeArgs,
        env: { ...keepAudit, ...env },
        logName,
      });
      children.push(child);
      await waitHttpOk(child.process, `${child.url}/readyz`, 120_000);
      const ownKey = await bootstrapAdmin(child.url);
      await registerCluster(child.url, ownKey, TARGET_CLUSTER, targetKubeconfig);
      await until(
        `the target ready on the ${logName} replica`,
        async () => ((await readyClusterCount(child.url, ownKey)) >= 1 ? true : undefined),
        60_000,
        50,
      );
      return { ...child, key: ownKey };
    };
    const plain = await replica('plain', {
      KITELINE_COALESCE_READS: 'false',
      KITELINE_WRITE_TURNS: 'false',
      KITELINE_READ_CACHE: 'false',
    });
    // A third replica as shipped but with the audit trail off, for the PATCH row: what recording
    // every write costs a request (same run, same target object).
    const unaudited = await replica('unaudited', { KITELINE_AUDIT_TRAIL: 'false' });

    const paths: Path[] = [
      {
        label: 'direct',
        base: targetCp.server,
        headers: { authorization: `Bearer ${targetCp.token}` },
        ca: targetCp.caPem,
      },
      { label: KUBECTL_PROXY, base: proxy.url, headers: {}, pid: proxy.process.pid },
      {
        label: 'gateway',
        base: gateway.url,
        headers: { authorization: key, 'x-cluster-name': TARGET_CLUSTER },
        pid: gateway.process.pid,
      },
      // kubectl's way through the gateway: the Kubernetes path under /k8s/clusters/<cluster>, no body parsed.
      {
        label: 'gateway /k8s/clusters',
        base: gateway.url,
        headers: { authorization: `Bearer ${key}` },
        pid: gateway.process.pid,
      },
    ];
    const plainPath: Path = {
      label: 'gateway, plain',
      base: plain.url,
      headers: { authorization: plain.key, 'x-cluster-name': TARGET_CLUSTER },
      pid: plain.process.pid,
    };
    const unauditedPath: Path = {
      label: 'gateway, audit trail off',
      base: unaudited.url,
      headers: { authorization: unaudited.key, 'x-cluster-name': TARGET_CLUSTER },
      pid: unaudited.process.pid,
    };
    const K8S_PROXY_INDEX = 3;
    // Upstream paths for direct and kubectl proxy (and under /k8s/clusters), the gateway's own
    // /api/v1 path for the gateways.
    const pick = (index: number, upstream: string, viaGateway: string) => {
      if (index === K8S_PROXY_INDEX) return `/k8s/clusters/${TARGET_CLUSTER}${upstream}`;
      return index >= 2 ? viaGateway : upstream;
    };
    const accept = { accept: 'application/json' };
    let patchCounter = 0;
    /** GET of a ConfigMap picked at random among the spread namespace's, with `query`. */
    const spreadGet = (id: string, row: string, query: string): Row => ({
      id,
      row,
      unit: 'req/s',
      paths: [...paths, plainPath],
      load: {
        connections: s.spreadConnections,
        request: (i) => ({
          method: 'GET',
          headers: accept,
          path: () => {
            const name = `cm-${Math.floor(Math.random() * (s.spreadSize - 1))}`;
            return pick(
              i,
              `/api/v1/namespaces/${spreadNamespace}/configmaps/${name}${query}`,
              `/api/v1/configmaps/${spreadNamespace}/${name}${query}`,
            );
          },
        }),
      },
    });
    const rows: Row[] = [
      {
        id: 'get',
        row: 'GET one object',
        unit: 'req/s',
        paths: [...paths, plainPath],
        load: {
          connections: s.connections,
          request: (i) => ({
            method: 'GET',
            headers: accept,
            path: pick(
              i,
              `/api/v1/namespaces/${OBJECT_NAMESPACE}/configmaps/bench-get`,
              `/api/v1/configmaps/${OBJECT_NAMESPACE}/bench-get`,
            ),
          }),
        },
      },
      spreadGet('spread-get', `GET one of ${s.spreadSize} objects (spread)`, ''),
      // The same with resourceVersion=0 (any version): the API server answers from its own watch
      // cache, kiteline from its read cache, neither asks etcd: cache against cache.
      spreadGet(
        'spread-get-any',
        `GET one of ${s.spreadSize} objects, resourceVersion=0 (spread)`,
        '?resourceVersion=0',
      ),
      {
        id: 'spread-list',
        paths: [...paths, plainPath],
        row: `LIST ${s.spreadSize} ConfigMaps (spread)`,
        unit: 'req/s',
        load: {
          connections: s.spreadConnections,
          request: (i) => ({
            method: 'GET',
            headers: accept,
            path: pick(i, `/api/v1/namespaces/${spreadNamespace}/configmaps`, `/api/v1/configmaps/${spreadNamespace}`),
          }),
        },
      },
      {
        id: 'list',
        paths: [...paths, plainPath],
        row: `LIST ${s.listSize} ConfigMaps`,
        unit: 'req/s',
        load: {
          connections: s.listConnections,
          request: (i) => ({
            method: 'GET',
            headers: accept,
            path: pick(i, `/api/v1/namespaces/${listNamespace}/configmaps`, `/api/v1/configmaps/${listNamespace}`),
          }),
        },
      },
      {
        id: 'patch',
        row: 'PATCH one object',
        unit: 'req/s',
        paths: [...paths, plainPath, unauditedPath],
        load: {
          connections: s.connections,
          request: (i) => ({
            method: 'PATCH',
            headers: { ...accept, 'content-type': 'application/merge-patch+json' },
            path: pick(
              i,
              `/api/v1/namespaces/${OBJECT_NAMESPACE}/configmaps/bench-patch`,
              `/api/v1/configmaps/${OBJECT_NAMESPACE}/bench-patch?patchType=merge`,
            ),
            body: () => JSON.stringify({ data: { counter: String(++patchCounter) } }),
          }),
        },
      },
      {
        id: 'watch',
        row: `watch of ${s.watchEvents} events`,
        unit: 'events/s',
        run: (path, i) =>
          runWatch(
            path,
            pick(
              i,
              `/api/v1/namespaces/${watchNamespace}/configmaps?watch=true&resourceVersion=0`,
              `/api/v1/configmaps/${watchNamespace}?watch=true&resourceVersion=0`,
            ),
            s.watchEvents,
            s.watchRounds,
          ),
      },
    ];

    const before = processStats(gateway.process.pid!);
    const proxyBefore = processStats(proxy.process.pid!);
    const comparison = await compare(
      paths,
      rows.filter((r) => s.rows.includes(r.id)),
      s,
    );
    const after = processStats(gateway.process.pid!);
    const proxyAfter = processStats(proxy.process.pid!);
    const figures: Figure[] = [
      {
        what: 'gateway CPU seconds during the comparison rows',
        value: `${(after.cpuSeconds - before.cpuSeconds).toFixed(1)} s`,
      },
      {
        what: 'kubectl proxy CPU seconds during the comparison rows',
        value: `${(proxyAfter.cpuSeconds - proxyBefore.cpuSeconds).toFixed(1)} s`,
      },
      { what: 'gateway peak RSS (whole run so far)', value: `${after.peakRssMiB.toFixed(0)} MiB` },
      { what: 'kubectl proxy peak RSS', value: `${proxyAfter.peakRssMiB.toFixed(0)} MiB` },
    ];

    if (s.rows.includes('dashboard')) {
      // A replica that checks each collection's resourceVersion at most once a second and whose reads
      // wait up to 3 s for the cache to be fresh (docs/read-cache.md): fewer requests, slower reads.
      // Twenty users share the bench's one API key: its limit of requests in flight is raised.
      const waiting = await replica('waiting', {
        KITELINE_READ_CACHE_WAIT_MS: '3000',
        KITELINE_READ_CACHE_CHECK_INTERVAL_MS: '1000',
        KITELINE_READ_CACHE_MIN_CONSISTENT_KIB: '0',
        KITELINE_MAX_REQUESTS_PER_PRINCIPAL: '1000',
      });
      figures.push(
        ...(await cacheOutcomes(gateway.url, key, TARGET_CLUSTER)),
        ...(await cacheMemory(gateway.url, key, TARGET_CLUSTER)),
        ...(await dashboardFigures({
          target: targetCp,
          gateways: [
            { label: 'the plain replica (no cache)', url: plain.url, key: plain.key },
            { label: 'the gateway', url: gateway.url, key },
            { label: 'a replica checking once a second, reads waiting up to 3 s', url: waiting.url, key: waiting.key },
          ],
          cluster: TARGET_CLUSTER,
          lists: [
            `/api/v1/configmaps/${spreadNamespace}`,
            '/api/v1/services/_all',
            '/api/v1/events/_all',
            '/api/v1/namespaces/_all',
            '/api/v1/serviceaccounts/_all',
          ],
          users: 20,
          intervalMs: 2000,
          seconds: s.durationSeconds * 2,
          log,
        })),
      );
    }

    if (s.rows.includes('audit')) {
      figures.push(
        ...(await auditFigures({
          s,
          hostKubeconfig: hostCp.kubeconfigPath,
          namespace,
          gatewayUrl: gateway.url,
          key,
          log,
        })),
      );
    }

    if (s.scale) {
      const scale = await scaleFigures({
        s,
        hostCp,
        host,
        namespace,
        targetKubeconfig,
        key,
        logDir,
        children,
        gateway,
      });
      figures.push(...scale);
    }

    const output = [
      `# kiteline benchmark ${new Date().toISOString()}`,
      '',
      `connections ${s.connections} (LIST ${s.listConnections}, spread rows ${s.spreadConnections}), ` +
        `${s.durationSeconds} s per row and path ` +
        `in ${s.rounds} alternating rounds after ${s.warmupSeconds} s warm-up, ` +
        `watch: median of ${s.watchRounds} rounds`,
      '',
      comparisonTable(comparison),
      '',
      figureTable(figures),
      '',
    ].join('\n');
    process.stdout.write(output);
    const file = join(s.dir, `results-${new Date().toISOString().replace(/[:.]/g, '-')}.md`);
    writeFileSync(file, output);
    log(`written to ${file}`);
  } finally {
    for (const child of children.reverse()) await child.stop();
    for (const ns of [namespace, ...installs])
      await host.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    host.close();
    target.close();
    if (process.env.BENCH_KEEP_CLUSTERS !== '1') {
      log('stopping the control planes (BENCH_KEEP_CLUSTERS=1 keeps them)');
      await stopPlanes([hostCp, targetCp]);
    }
  }
}

async function stopPlanes(planes: ControlPlaneHandle[]): Promise<void> {
  await Promise.all(planes.map((p) => stopControlPlane(p.dir)));
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
