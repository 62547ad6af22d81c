// `node dist/bench/search.js`: how fast GET /api/v1/search answers on a cluster of 5,000 objects.
// Creates BENCH_SEARCH_OBJECTS ConfigMaps (default 5,000, once: later runs reuse them) in one
// namespace of the target plane, starts a gateway (a child process, as `make bench` does) with the
// target registered, times the first search (the index's first lists), waits until the index holds
// every ConfigMap, then times BENCH_SEARCH_QUERIES searches one after the other for each kind of
// query, and prints Markdown rows with p50 and p99 for docs/benchmarks.md ("Search").
//
// The planes are `make bench`'s (.kiteline/bench/host and target, started when not running and then
// stopped again unless BENCH_KEEP_CLUSTERS=1); BENCH_SEARCH_HOST_DIR and BENCH_SEARCH_TARGET_DIR name
// other plane directories (e.g. running test planes, which are then left running).
// BENCH_SEARCH_CLEANUP=1 deletes the ConfigMaps' namespace at the end.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isRunning, startControlPlane, stopControlPlane } from '../src/controlplane/controlplane.js';
import { startGateway, waitHttpOk, type Child } from './children.js';
import { bootstrapAdmin, callGateway, registerCluster, until } from './gateway-setup.js';
import { DirectKube } from './kube.js';
import { percentile } from './load.js';
import { loadSettings } from './settings.js';

const TARGET_CLUSTER = 'target';

function log(message: string): void {
  process.stderr.write(`[bench search ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function whole(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name} must be a positive whole number, got "${raw}"`);
  return Number(raw);
}

interface SearchAnswer {
  results: unknown[];
  total: number;
  partial: boolean;
}

/** One search through the gateway: its answer and how long it took (ms). */
async function timedSearch(base: string, key: string, query: string): Promise<{ ms: number; answer: SearchAnswer }> {
  const started = performance.now();
  const res = await callGateway(base, 'GET', `/api/v1/search?${query}`, {
    headers: { authorization: key, 'x-cluster-name': TARGET_CLUSTER },
  });
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`search ${query}: ${res.status} ${JSON.stringify(res.body)}`);
  return { ms, answer: res.body as SearchAnswer };
}

async function main(): Promise<void> {
  const s = loadSettings();
  const objects = whole('BENCH_SEARCH_OBJECTS', 5000);
  const queries = whole('BENCH_SEARCH_QUERIES', 200);
  const hostDir = resolve(process.env.BENCH_SEARCH_HOST_DIR || join(s.dir, 'host'));
  const targetDir = resolve(process.env.BENCH_SEARCH_TARGET_DIR || join(s.dir, 'target'));
  const logDir = join(s.dir, 'logs');
  mkdirSync(logDir, { recursive: true });

  const startedHere = [hostDir, targetDir].filter((dir) => !isRunning(dir));
  const starting = startedHere.length ? ` (starting ${startedHere.length})` : '';
  log(`control planes: host ${hostDir}, target ${targetDir}${starting}`);
  const [hostCp, targetCp] = await Promise.all([
    startControlPlane({ dir: hostDir, name: 'bench-host' }),
    startControlPlane({ dir: targetDir, name: 'bench-target' }),
  ]);
  const host = new DirectKube(hostCp);
  const target = new DirectKube(targetCp);
  const installNamespace = `bench-${randomBytes(3).toString('hex')}`;
  const objectNamespace = `bench-search-${objects}`;
  let gateway: Child | undefined;
  try {
    await target.ensureNamespace(objectNamespace);
    const collection = `/api/v1/namespaces/${objectNamespace}/configmaps`;
    // kube-root-ca.crt, made by the controller manager, is one of the namespace's objects.
    const want = objects - 1;
    if ((await target.count(collection)) - 1 < want) {
      log(`creating ${want} ConfigMaps in ${objectNamespace} (once; later runs reuse them)`);
      await target.createMany(collection, 0, want, 32, (i) => ({
        metadata: { name: `cm-${i}`, labels: { bench: 'search', shard: `shard-${i % 100}` } },
        data: { index: String(i) },
      }));
    }

    await host.ensureNamespace(installNamespace);
    gateway = await startGateway({
      kubeconfig: hostCp.kubeconfigPath,
      namespace: installNamespace,
      logDir,
      logLevel: s.gatewayLogLevel,
      nodeArgs: s.gatewayNodeArgs,
      logName: 'search',
    });
    await waitHttpOk(gateway.process, `${gateway.url}/readyz`, 120_000);
    const key = await bootstrapAdmin(gateway.url);
    await registerCluster(gateway.url, key, TARGET_CLUSTER, readFileSync(targetCp.kubeconfigPath, 'utf8'));

    const first = await timedSearch(gateway.url, key, 'q=cm-1');
    log(`first search (the index's first lists): ${first.ms.toFixed(0)} ms, partial ${first.answer.partial}`);
    await until(
      'the index to hold every ConfigMap',
      async () => {
        const { answer } = await timedSearch(gateway!.url, key, `q=cm-&namespace=${objectNamespace}`);
        return !answer.partial && answer.total === want ? true : undefined;
      },
      120_000,
      200,
    );

    const kinds: Array<{ what: string; query: (i: number) => string }> = [
      {
        what: 'a part of a name (about 11 matches)',
        query: (i) => `q=cm-${(i * 37) % Math.max(1, Math.floor(want / 10))}`,
      },
      { what: 'an exact name', query: (i) => `q=cm-${(i * 7919) % want}` },
      { what: 'a label value (1 in 100 match)', query: (i) => `q=shard-${i % 100}` },
      { what: `a name part every ConfigMap matches (${want} matches, limit 50)`, query: () => 'q=cm-' },
      { what: 'no match', query: (i) => `q=nothing-${i}` },
    ];
    const rows: string[] = [];
    for (const kind of kinds) {
      for (let i = 0; i < 10; i++) await timedSearch(gateway.url, key, kind.query(i)); // warm up
      const times: number[] = [];
      for (let i = 0; i < queries; i++) times.push((await timedSearch(gateway.url, key, kind.query(i))).ms);
      times.sort((a, b) => a - b);
      const [p50, p99] = [percentile(times, 0.5).toFixed(1), percentile(times, 0.99).toFixed(1)];
      rows.push(`| ${kind.what} | ${objects} | ${queries} | ${p50} | ${p99} |`);
    }
    process.stdout.write(
      [
        `First search of the cluster (index built by its first lists): ${first.ms.toFixed(0)} ms.`,
        '',
        '| query | ConfigMaps | searches | p50 ms | p99 ms |',
        '|---|---|---|---|---|',
        ...rows,
        '',
      ].join('\n'),
    );
  } finally {
    await gateway?.stop();
    await host.request('DELETE', `/api/v1/namespaces/${installNamespace}`).catch(() => undefined);
    if (process.env.BENCH_SEARCH_CLEANUP === '1')
      await target.request('DELETE', `/api/v1/namespaces/${objectNamespace}`).catch(() => undefined);
    host.close();
    target.close();
    if (process.env.BENCH_KEEP_CLUSTERS !== '1') for (const dir of startedHere) await stopControlPlane(dir);
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
