// The fleet (docs/fleet.md): three replicas on one install namespace share 300 clusters. Each holds
// a warm connection for about a third of them, decided from the replicas' Leases with a stable
// hash, and reaches the others through their holder's signed internal hop; a replica that joins
// takes its share within seconds, and when one (a real `kiteline serve` process) is SIGKILLed
// under load, its clusters are served by the survivors again within 10 s and no request fails
// beyond those in flight; restarted at its address (as the kubelet restarts a container), it takes
// its share back and no request fails once it is ready. Statuses are written by each cluster's
// holder only. The hop refuses anyone who is not a replica.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { clusterObjects } from '../bench/scale.js';
import { WarmConnection } from '../src/clusters/connection.js';
import { HOP_HEADER } from '../src/clusters/fleet.js';
import { RemoteConnection } from '../src/clusters/remote-connection.js';
import { login } from './helpers/auth-session.js';
import {
  kubectl,
  kubectlInBackground,
  TEST_DIR,
  testControlPlane,
  uniqueName,
  type TestClusterName,
} from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { apiserverMetric, callWithin, sleep } from './helpers/faults.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { call, spawnGatewayProcess, startGateway, type TestGateway } from './helpers/gateway.js';
import { busyboxPod } from './helpers/workload-streams.js';

const host = await testControlPlane('host');
const namespace = uniqueName('kl-fleet');
const CLUSTERS = 300;
const FIRST_ID = 5000;
const PLANES: TestClusterName[] = ['target-a', 'target-b', 'host'];
const names = Array.from({ length: CLUSTERS }, (_, i) => `fleet-${String(i).padStart(3, '0')}`);
const env = { KITELINE_PROBE_INTERVAL_MS: '2000' };

/** A replica's gauge from its /metrics. */
async function gauge(url: string, admin: Caller, name: string): Promise<number> {
  const res = await callWithin(url, 'GET', '/metrics', { headers: admin.headers });
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(res.text)?.[1] ?? NaN);
}

/** How many of the clusters the admin API shows ready, through one replica. */
async function readyCount(url: string, admin: Caller): Promise<number> {
  const res = await callWithin(url, 'GET', '/api/v1/admin/clusters/', { headers: admin.headers }, 30_000);
  const list = (Array.isArray(res.body) ? res.body : (res.body?.clusters ?? [])) as Array<{
    name: string;
    ready: boolean;
  }>;
  return list.filter((c) => c.name.startsWith('fleet-') && c.ready).length;
}

/** A GET through a replica of a ConfigMap list on one cluster: 200 when it was served. */
async function served(url: string, admin: Caller, cluster: string): Promise<number> {
  const res = await callWithin(url, 'GET', '/api/v1/namespaces', {
    headers: { ...admin.headers, 'x-cluster-name': cluster },
  });
  return res.status;
}

const held = (gw: TestGateway) =>
  names.filter((n) => gw.services.clusterManager.registry.get(n) instanceof WarmConnection);

interface Served {
  /** When the request started. */
  at: number;
  status: number;
  cluster: string;
  text: string;
}

/** Two workers per gateway reading the given clusters in turn until stop(), which gives every answer. */
function loadOn(gateways: Array<{ url: string }>, admin: Caller, clusters: string[]) {
  let running = true;
  const results: Served[] = [];
  const worker = async (gw: { url: string }, offset: number) => {
    for (let i = offset; running; i += 7) {
      const cluster = clusters[i % clusters.length];
      const at = Date.now();
      const res = await callWithin(gw.url, 'GET', '/api/v1/namespaces', {
        headers: { ...admin.headers, 'x-cluster-name': cluster },
      });
      results.push({ at, status: res.status, cluster, text: res.status === 200 ? '' : res.text.slice(0, 300) });
    }
  };
  const workers = gateways.flatMap((gw, g) => [0, 1].map((i) => worker(gw, g * 2 + i)));
  return {
    workers: workers.length,
    stop: async () => {
      running = false;
      await Promise.all(workers);
      return results;
    },
  };
}

t.test('three replicas share 300 clusters and take over a dead one', async (t) => {
  const a = await startGateway(t, { namespace, logName: 'fleet-a', env });
  const admin = await bootstrapAdmin(a);
  const objects = names.flatMap((name, i) =>
    clusterObjects(namespace, name, testKubeconfig(PLANES[i % PLANES.length]), FIRST_ID + i),
  );
  const applied = kubectl(
    host.kubeconfigPath,
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
  );
  t.equal(applied.status, 0, `kubectl apply of ${CLUSTERS} Clusters: ${applied.stderr}`);
  const child = await spawnGatewayProcess(t, {
    kubeconfig: host.kubeconfigPath,
    namespace,
    logName: 'fleet-child',
    env: { POD_NAME: 'fleet-child', ...env },
  });
  await eventually(
    'two replicas holding all clusters',
    async () => (await readyCount(a.url, admin)) === CLUSTERS,
    60_000,
    500,
  );

  // Two replicas share them (a may have held all of them until it saw the child's Lease).
  await eventually(
    'a and the child to hold about half each',
    async () => {
      const [mine, theirs] = [held(a).length, await gauge(child.url, admin, 'kiteline_fleet_held_clusters')];
      return mine + theirs === CLUSTERS && Math.abs(mine - theirs) < CLUSTERS / 3 ? true : undefined;
    },
    20_000,
    200,
  );

  const statusWritesBefore = await apiserverMetric(host, 'apiserver_request_total', {
    resource: 'clusters',
    subresource: 'status',
  });

  // A third replica joins: it takes about a third within seconds, from both others.
  const heldBeforeJoin = held(a);
  const joinedAt = Date.now();
  // b also serves https, for kubectl's bearer token (the exec below).
  const b = await startGateway(t, { namespace, logName: 'fleet-b', env: { ...env, KITELINE_TLS_PORT: '0' } });
  const spread = await eventually(
    'the third replica to take its share',
    async () => {
      const counts = [held(a).length, await gauge(child.url, admin, 'kiteline_fleet_held_clusters'), held(b).length];
      return counts.every((c) => c >= CLUSTERS / 3 - 40 && c <= CLUSTERS / 3 + 40) &&
        counts.reduce((x, y) => x + y, 0) === CLUSTERS
        ? counts
        : undefined;
    },
    20_000,
    200,
  );
  t.pass(`held by a, the child and b: ${spread.join(', ')} (${Date.now() - joinedAt} ms after b started)`);
  const moved = heldBeforeJoin.filter((n) => !held(a).includes(n));
  t.ok(
    moved.every((n) => held(b).includes(n)),
    `the ${moved.length} clusters a gave up went to b, none to the child (a stable hash)`,
  );
  t.equal(await gauge(a.url, admin, 'kiteline_fleet_replicas'), 3, 'a sees three replicas');
  await eventually(
    'all clusters ready after the move',
    async () => (await readyCount(b.url, admin)) === CLUSTERS,
    30_000,
    500,
  );

  // A replica reaches a cluster it does not hold through the holder, with no connection of its own.
  const notHeldByA = names.find((n) => !held(a).includes(n))!;
  t.ok(a.services.clusterManager.registry.get(notHeldByA) instanceof RemoteConnection, 'a has a remote connection');
  t.equal(await served(a.url, admin, notHeldByA), 200, `a serves ${notHeldByA} through its holder`);
  const sample = names.filter((_, i) => i % 10 === 0);
  const statuses = await Promise.all(sample.map((n) => served(a.url, admin, n)));
  t.same(
    statuses.filter((s) => s !== 200),
    [],
    `${sample.length} clusters served through a, held anywhere`,
  );

  // Impersonation crosses the hop intact, one Impersonate-Group line per group: a key whose access
  // on the target comes only from a binding to its kiteline role's group reads through a replica
  // that does not hold the cluster.
  const impersonating = uniqueName('imp');
  const impersonatingId = await addReadyCluster(a, admin, {
    name: impersonating,
    config: testKubeconfig('target-a'),
    impersonate: true,
  });
  const roleName = uniqueName('hop-reader');
  await createRole(a, admin, {
    name: roleName,
    clusters: ['*'],
    namespaces: ['*'],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const reader = await apiKeyWithRoles(a, admin, roleName, [roleName]);
  const targetAdmin = join(TEST_DIR, 'target-a', 'kubeconfig');
  t.teardown(() => kubectl(targetAdmin, ['delete', 'clusterrolebinding', roleName]));
  const bound = kubectl(targetAdmin, [
    'create',
    'clusterrolebinding',
    roleName,
    '--clusterrole=view',
    `--group=kiteline:role:${roleName}`,
  ]);
  t.equal(bound.status, 0, `view for the group kiteline:role:${roleName} on target-a: ${bound.stderr}`);
  const [remote] = await eventually(
    `a replica reaching ${impersonating} through its holder`,
    () => {
      const found = [a, b].filter(
        (gw) => gw.services.clusterManager.registry.get(impersonating) instanceof RemoteConnection,
      );
      return found.length > 0 ? found : undefined;
    },
    10_000,
    100,
  );
  const throughHop = await eventually(
    'the group binding to take effect',
    async () => {
      const res = await callWithin(remote.url, 'GET', '/api/v1/configmaps/kube-system', {
        headers: { ...reader.headers, 'x-cluster-name': impersonating },
      });
      return res.status === 403 ? undefined : res;
    },
    10_000,
    200,
  ).catch(() => undefined);
  t.equal(throughHop?.status, 200, 'a read allowed by the group binding, through the hop');
  const removed = await call(a.url, 'DELETE', `/api/v1/admin/clusters/${impersonatingId}`, { headers: admin.headers });
  t.equal(removed.status, 200, 'the impersonating cluster removed (the counts below are of the 300)');

  // Each status is written by the cluster's holder: the third replica's arrival moved the
  // holders, but did not make every replica write every status.
  const statusWrites =
    (await apiserverMetric(host, 'apiserver_request_total', { resource: 'clusters', subresource: 'status' })) -
    statusWritesBefore;
  t.ok(statusWrites < CLUSTERS, `${statusWrites} status writes while 300 clusters moved between replicas`);

  // The hop is for replicas only, and a signature is good for one request: its path, its
  // Impersonate-* headers, once (one seen on the network cannot be used again, nor as another user).
  const fleetOfA = a.services.clusterManager.fleet;
  const hopPath = `/internal/fleet/${held(a)[0]}/k8s/api/v1/namespaces`;
  const asAlice = { 'impersonate-user': 'kiteline:alice', 'impersonate-group': ['kiteline:authenticated'] };
  const signed = fleetOfA.sign('GET', hopPath, {});
  const first = await call(a.url, 'GET', hopPath, { headers: { [HOP_HEADER]: signed } });
  t.equal(first.status, 200, 'a signed hop request is served');
  const forAlice = fleetOfA.sign('GET', hopPath, asAlice);
  for (const [what, headers] of [
    ['no signature', {}],
    ['the admin key', admin.headers],
    [
      'a forged signature',
      { [HOP_HEADER]: `${Buffer.from('x').toString('base64url')}.bm9uY2U.${Date.now() + 10_000}.AAAA` },
    ],
    ['a signature for another path', { [HOP_HEADER]: fleetOfA.sign('GET', '/internal/fleet/x/k8s/api', {}) }],
    ['a signature used a second time', { [HOP_HEADER]: signed }],
    [
      'a signature for one user sent as another',
      { ...asAlice, 'impersonate-user': 'kiteline:mallory', [HOP_HEADER]: forAlice },
    ],
    [
      'a signature for a user sent with a group added',
      { ...asAlice, 'impersonate-group': ['kiteline:authenticated', 'kiteline:role:admin'], [HOP_HEADER]: forAlice },
    ],
  ] as const) {
    const res = await call(a.url, 'GET', hopPath, { headers: headers as Record<string, string> });
    t.equal(res.status, 401, `the hop refuses ${what}`);
  }

  // Kill the child under load: its clusters are served by a and b within 10 s.
  const childClusters = names.filter((n) => !held(a).includes(n) && !held(b).includes(n));
  t.ok(childClusters.length > 50, `the child holds ${childClusters.length} clusters`);
  const load = loadOn([a, b], admin, childClusters);
  await sleep(1000);
  const killedAt = Date.now();
  process.kill(child.pid, 'SIGKILL');
  await child.exited;
  const takenOver = await eventually(
    "the survivors to hold the dead replica's clusters",
    () => (held(a).length + held(b).length === CLUSTERS ? Date.now() : undefined),
    20_000,
    100,
  );
  t.ok(takenOver - killedAt <= 10_000, `the survivors hold all clusters ${takenOver - killedAt} ms after the kill`);
  const everyOne = await Promise.all(childClusters.map((n) => served(b.url, admin, n)));
  const servedAgainAt = Date.now();
  const results = await load.stop();
  t.same(
    everyOne.filter((s) => s !== 200),
    [],
    `all ${childClusters.length} clusters of the dead one served again ${servedAgainAt - killedAt} ms after the kill`,
  );
  const failed = results.filter((r) => r.status !== 200);
  t.ok(results.length > 20, `${results.length} requests to the dead replica's clusters during the kill`);
  t.ok(failed.length <= load.workers, `${failed.length} failed: at most those in flight at the kill`, {
    failed: failed.map((r) => ({ ...r, at: r.at - killedAt })),
  });
  await eventually(
    'all clusters ready on the survivors',
    async () => (await readyCount(a.url, admin)) === CLUSTERS,
    30_000,
    500,
  );
  t.equal(await gauge(b.url, admin, 'kiteline_fleet_replicas'), 2, 'b sees two replicas');

  // exec through a replica that does not hold the cluster: the upgrade goes through the hop.
  const onNode = names.find((n, i) => PLANES[i % PLANES.length] === 'target-a' && held(a).includes(n))!;
  const podNamespace = uniqueName('fleet-exec');
  t.teardown(() => kubectl(targetAdmin, ['delete', 'namespace', podNamespace, '--wait=false']));
  const created = await kubectlInBackground(targetAdmin, ['create', 'namespace', podNamespace]);
  t.equal(created.status, 0, 'a namespace for the pod');
  const pod = await kubectlInBackground(
    targetAdmin,
    ['-n', podNamespace, 'apply', '-f', '-'],
    JSON.stringify(busyboxPod('sleeper', {}, ['sleep', '3600'])),
  );
  t.equal(pod.status, 0, `a pod on target-a: ${pod.stderr}`);
  const cookie = await login(b.url, 'admin', 'correct-horse-battery');
  const kubeconfig = await call(b.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  t.equal(kubeconfig.status, 200, 'a kubeconfig from b');
  const kubeconfigPath = join(TEST_DIR, `${uniqueName('fleet')}.kubeconfig`);
  writeFileSync(kubeconfigPath, kubeconfig.text);
  await eventually(
    'the pod to run',
    async () =>
      (
        await kubectlInBackground(targetAdmin, [
          '-n',
          podNamespace,
          'get',
          'pod',
          'sleeper',
          '-o',
          'jsonpath={.status.phase}',
        ])
      ).stdout === 'Running',
    60_000,
    500,
  );
  t.ok(b.services.clusterManager.registry.get(onNode) instanceof RemoteConnection, `b does not hold ${onNode}`);
  const exec = await kubectlInBackground(kubeconfigPath, [
    '--context',
    onNode,
    '-n',
    podNamespace,
    'exec',
    'sleeper',
    '--',
    'echo',
    'through-the-hop',
  ]);
  t.equal(exec.stdout.trim(), 'through-the-hop', `kubectl exec through b, held by a: ${exec.stderr}`);

  // A container the kubelet restarts: a new process at the address of one SIGKILLed a while before
  // (past the survivors' suspicion of it), whose Lease is still there. The newcomer counts that
  // Lease dead at once, as the others do (it names the newcomer's own address, which deletes it,
  // and it was renewed long ago), so they agree on who holds what: once ready, nothing fails. The
  // load goes through the survivors only (as an in-cluster client's kept-alive connections do):
  // the newcomer's own requests would tell it the truth through its own hop.
  const spawnSecond = (logName: string, port?: number) =>
    spawnGatewayProcess(t, {
      kubeconfig: host.kubeconfigPath,
      namespace,
      logName,
      env: { POD_NAME: 'fleet-second', ...env },
      port,
    });
  const sharedWith = async (third: { url: string }) => {
    const counts = [held(a).length, await gauge(third.url, admin, 'kiteline_fleet_held_clusters'), held(b).length];
    return counts.every((c) => c > CLUSTERS / 6) && counts.reduce((x, y) => x + y, 0) === CLUSTERS ? counts : undefined;
  };
  const second = await spawnSecond('fleet-second');
  await eventually('three replicas to share the clusters again', () => sharedWith(second), 20_000, 200);
  const survivorsLoad = loadOn([a, b], admin, names);
  await sleep(500);
  const secondKilledAt = Date.now();
  process.kill(second.pid, 'SIGKILL');
  await second.exited;
  await sleep(10_000);
  const restarted = await spawnSecond('fleet-restarted', Number(new URL(second.url).port));
  const readyAt = await eventually(
    'the restarted replica to be ready',
    async () => ((await callWithin(restarted.url, 'GET', '/readyz', {})).status === 200 ? Date.now() : undefined),
    30_000,
    100,
  );
  const shared = await eventually('the restarted replica to take its share', () => sharedWith(restarted), 20_000, 200);
  await sleep(8_000);
  const answers = await survivorsLoad.stop();
  const afterReady = answers.filter((r) => r.at >= readyAt);
  t.ok(
    afterReady.length > 50,
    `${afterReady.length} requests once the restarted replica was ready; held ${shared.join(', ')}`,
  );
  t.same(
    afterReady.filter((r) => r.status !== 200).map((r) => ({ ...r, at: r.at - readyAt })),
    [],
    'no failure once the restarted replica is ready',
  );
  t.ok(
    answers.filter((r) => r.at < readyAt && r.status !== 200).length <= survivorsLoad.workers,
    `before: at most the requests in flight at the kill failed (${readyAt - secondKilledAt} ms from kill to ready)`,
  );
  const port = new URL(restarted.url).port;
  const leases = kubectl(host.kubeconfigPath, [
    '-n',
    namespace,
    'get',
    'leases',
    '-l',
    'kiteline.io/replica=true',
    '-o',
    'json',
  ]);
  const atPort = (
    JSON.parse(leases.stdout) as { items: Array<{ metadata: { annotations?: Record<string, string> } }> }
  ).items
    .map((l) => l.metadata.annotations?.['kiteline.io/internal-address'] ?? '')
    .filter((address) => address.endsWith(`:${port}`));
  t.same(
    atPort,
    [`http://127.0.0.1:${port}`],
    "one Lease names the restarted replica's address: its predecessor's was deleted",
  );
});
