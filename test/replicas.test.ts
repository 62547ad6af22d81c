// Fault test: two gateway replicas on one install namespace, the leader a child process
// (`node bin/kiteline.js serve`) that is SIGKILLed mid-traffic. The survivor keeps serving every
// request, takes the leader Lease over once it expires and keeps reconciling cluster status.
import t from 'tap';
import { LEADER_LEASE_NAME } from '../src/host/lease.js';
import { ID_LABEL } from '../src/host/resources.js';
import { kubectl, testControlPlane, testPlaneVersion, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { callWithin, sleep } from './helpers/faults.js';
import { addReadyCluster, bootstrapAdmin, registerCluster, testKubeconfig } from './helpers/fixtures.js';
import { spawnGatewayProcess, startGateway, type GatewayProcess, type TestGateway } from './helpers/gateway.js';

const host = await testControlPlane('host');
const namespace = uniqueName('kl-replicas');

/** The first replica: a real `kiteline serve` process. */
function spawnReplica(): Promise<GatewayProcess> {
  return spawnGatewayProcess(t, {
    kubeconfig: host.kubeconfigPath,
    namespace,
    logName: 'replicas-child',
    env: { POD_NAME: 'replica-child', KITELINE_PROBE_INTERVAL_MS: '1000' },
  });
}

const leaseHolder = (): string => {
  const res = kubectl(host.kubeconfigPath, ['-n', namespace, 'get', 'lease', LEADER_LEASE_NAME, '-o', 'json']);
  return res.status === 0 ? (JSON.parse(res.stdout).spec.holderIdentity ?? '') : '';
};

t.test('a replica killed while another serves: no failed request, the survivor leads and reconciles', async (t) => {
  const child = await spawnReplica();
  const admin = await bootstrapAdmin({ url: child.url } as TestGateway);
  await addReadyCluster({ url: child.url } as TestGateway, admin, {
    name: 'alpha',
    config: testKubeconfig('target-a'),
    isDefault: true,
  });
  await eventually('the child replica to lead', () => leaseHolder().startsWith('replica-child_'), 40_000, 200);

  const survivor = await startGateway(t, {
    namespace,
    logName: 'replicas',
    env: { KITELINE_PROBE_INTERVAL_MS: '1000' },
  });
  await eventually(
    'the key on the survivor',
    async () => (await callWithin(survivor.url, 'GET', '/api/v1/clusters', { headers: admin.headers })).status === 200,
    30_000,
    100,
  );
  await eventually(
    'the cluster served by the survivor',
    async () =>
      (await callWithin(survivor.url, 'GET', '/api/v1/configmaps/default', { headers: admin.headers })).status === 200,
    30_000,
    100,
  );
  t.equal(survivor.services.clusterManager.lease.isLeader, false, 'the survivor starts as a follower');

  // Traffic on the survivor while the leader dies and the lease moves.
  let running = true;
  const statuses: Array<{ path: string; status: number; text: string }> = [];
  const loop = async (path: string) => {
    while (running) {
      const res = await callWithin(survivor.url, 'GET', path, { headers: admin.headers });
      statuses.push({ path, status: res.status, text: res.text.slice(0, 200) });
      await sleep(50);
    }
  };
  const loops = [loop('/api/v1/clusters'), loop('/api/v1/configmaps/default'), loop('/api/v1/admin/roles/')];
  await sleep(500);
  process.kill(child.pid, 'SIGKILL');
  await child.exited;
  t.pass('the leader replica was killed');

  await eventually(
    'the survivor to take the lease over',
    () => survivor.services.clusterManager.lease.isLeader,
    60_000,
    200,
  );
  t.equal(leaseHolder(), survivor.services.clusterManager.lease.identity, 'the Lease names the survivor');
  running = false;
  await Promise.all(loops);
  t.ok(statuses.length >= 30, `${statuses.length} requests during the failover`);
  t.same(
    statuses.filter((s) => s.status !== 200),
    [],
    'every request on the survivor succeeded',
  );

  // The new leader reconciles: a cluster registered now gets its status written by it.
  const id = await registerCluster(survivor, admin, { name: 'beta', config: testKubeconfig('target-b') });
  const written = await eventually(
    'the status of the new cluster',
    () => {
      const cr = survivor.services.host.clusters.list().find((c) => c.metadata.labels?.[ID_LABEL] === String(id));
      return cr?.status?.ready ? cr : undefined;
    },
    60_000,
    200,
  );
  t.match(written.status, { ready: true, version: testPlaneVersion('target-b') }, 'the survivor wrote the status');
  const write = await callWithin(survivor.url, 'POST', '/api/v1/admin/roles/', {
    headers: admin.headers,
    body: { name: 'after-failover', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] },
  });
  t.equal(write.status, 201, `writes go on: ${write.text}`);
});
