// Leader election on the host cluster: two gateway replicas in one namespace have exactly one
// leader (the Lease names it); the leader writes Cluster status; when it stops, the other takes
// over and writes. A lease held by a vanished holder is taken over once it expires.
import { readFileSync } from 'node:fs';
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { LeaderElector, LEADER_LEASE_NAME } from '../src/host/lease.js';
import { createLogger } from '../src/log.js';
import { ID_LABEL } from '../src/host/resources.js';
import { kubectl, testControlPlane, testPlaneVersion, uniqueName } from './helpers/clusters.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { eventually } from './helpers/eventually.js';

function lease(gw: { kubeconfig: string; namespace: string }, name = LEADER_LEASE_NAME) {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'lease', name, '-o', 'json']);
  return res.status === 0 ? JSON.parse(res.stdout) : undefined;
}

const isLeader = (gw: TestGateway) => gw.services.clusterManager.lease.isLeader;

t.test('two replicas: one leader, status from the leader, failover on stop', async (t) => {
  const first = await startGateway(t);
  const second = await startGateway(t, { namespace: first.namespace });
  const leader = await eventually(
    'a leader',
    () => (isLeader(first) ? first : isLeader(second) ? second : undefined),
    40_000,
  );
  const follower = leader === first ? second : first;
  t.equal(isLeader(follower), false, 'exactly one leader');
  t.equal(lease(first).spec.holderIdentity, leader.services.clusterManager.lease.identity, 'the Lease names it');

  const su = await call(first.url, 'POST', '/api/v1/admin/users/create_super_user', {
    body: { username: 'admin', password: 'correct-horse-1', name: 'A' },
  });
  t.ok(su.status < 300);
  // create_super_user signs the new admin in: the import that follows goes with that session.
  const cookie = (su.headers.get('set-cookie') ?? '').split(';')[0];
  const config = readFileSync((await testControlPlane('target-a')).kubeconfigPath, 'utf8');
  const imported = await eventually('the import on the follower', async () => {
    const res = await call(follower.url, 'POST', '/api/v1/admin/clusters/import', {
      body: { config },
      headers: { cookie },
    });
    return res.status === 401 ? undefined : res; // the follower's cache has not seen the new user yet
  });
  t.equal(imported.status, 201, 'any replica takes writes');
  const name = 'target-a';
  const objects = () => first.services.host.clusters.list();
  await eventually('status written', () => objects()[0]?.status?.ready || undefined, 40_000);
  await eventually(
    'both replicas serve it',
    () => (first.services.clusters.get(name)?.ready && second.services.clusters.get(name)?.ready) || undefined,
    40_000,
  );

  await leader.close();
  await eventually('the follower takes over', () => isLeader(follower) || undefined, 40_000);
  t.equal(lease(follower).spec.holderIdentity, follower.services.clusterManager.lease.identity);
  t.ok(lease(follower).spec.leaseTransitions >= 1, 'a transition is recorded');

  // A cluster applied now gets its id and status from the new leader.
  const yaml = kubectl(follower.kubeconfig, [
    '-n',
    follower.namespace,
    'get',
    'secret',
    objects()[0].spec.kubeconfigSecretRef!.name,
    '-o',
    'json',
  ]);
  const secret = JSON.parse(yaml.stdout);
  const late = {
    apiVersion: 'kiteline.io/v1alpha1',
    kind: 'Cluster',
    metadata: { name: 'late' },
    spec: { kubeconfigSecretRef: { name: secret.metadata.name } },
  };
  t.equal(kubectl(follower.kubeconfig, ['-n', follower.namespace, 'apply', '-f', '-'], JSON.stringify(late)).status, 0);
  const written = await eventually(
    'late gets id and status',
    () => {
      const o = follower.services.host.clusters.get('late', follower.namespace);
      return o?.metadata.labels?.[ID_LABEL] && o.status?.ready ? o : undefined;
    },
    40_000,
  );
  t.match(written.status, { ready: true, version: testPlaneVersion('target-a') });
});

t.test('a lease whose holder vanished is taken over after it expires', async (t) => {
  const host = await testControlPlane('host');
  const namespace = uniqueName('kl-lease');
  t.equal(kubectl(host.kubeconfigPath, ['create', 'namespace', namespace]).status, 0);
  t.teardown(() => kubectl(host.kubeconfigPath, ['delete', 'namespace', namespace, '--wait=false']));
  const ghost = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'test-lease', namespace },
    spec: {
      holderIdentity: 'ghost',
      leaseDurationSeconds: 2,
      renewTime: new Date().toISOString().replace('Z', '000Z'),
      leaseTransitions: 3,
    },
  };
  t.equal(kubectl(host.kubeconfigPath, ['apply', '-f', '-'], JSON.stringify(ghost)).status, 0);

  const kc = new k8s.KubeConfig();
  kc.loadFromFile(host.kubeconfigPath);
  const log = createLogger('silent');
  const elector = new LeaderElector(kc, namespace, 'replica-b', log, {
    name: 'test-lease',
    leaseDurationSeconds: 2,
    renewIntervalMs: 300,
    retryIntervalMs: 200,
  });
  const rival = new LeaderElector(kc, namespace, 'replica-c', log, {
    name: 'test-lease',
    leaseDurationSeconds: 2,
    renewIntervalMs: 300,
    retryIntervalMs: 200,
  });
  t.teardown(() => Promise.all([elector.stop(), rival.stop()]));
  let started = 0;
  elector.on('started', () => started++);
  rival.on('started', () => started++);
  elector.start();
  rival.start();
  const winner = await eventually(
    'someone takes over',
    () => (elector.isLeader ? elector : rival.isLeader ? rival : undefined),
    40_000,
  );
  const l = lease({ kubeconfig: host.kubeconfigPath, namespace }, 'test-lease');
  t.equal(l.spec.holderIdentity, winner.identity);
  t.equal(l.spec.leaseTransitions, 4, 'one transition from the ghost');
  t.notOk(elector.isLeader && rival.isLeader, 'never two leaders');
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(started, 1, 'leadership did not flap between the two');
  t.equal(elector.isLeader !== rival.isLeader, true);
});

t.test('a leader stopped while a renewal is in flight releases the lease and stays stopped', async (t) => {
  // CI48: the stopping leader's renewal, sent just before stop(), landed after stop() had let go;
  // the dying replica became leader again, its release failed with a conflict, and the others
  // waited out the lease. Renewing back to back makes a renewal in flight at every stop.
  const host = await testControlPlane('host');
  const namespace = uniqueName('kl-lease');
  t.equal(kubectl(host.kubeconfigPath, ['create', 'namespace', namespace]).status, 0);
  t.teardown(() => kubectl(host.kubeconfigPath, ['delete', 'namespace', namespace, '--wait=false']));
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(host.kubeconfigPath);
  const log = createLogger('silent');
  for (let round = 1; round <= 5; round++) {
    const elector = new LeaderElector(kc, namespace, `replica-${round}`, log, {
      name: 'busy-lease',
      leaseDurationSeconds: 15,
      renewIntervalMs: 1,
      retryIntervalMs: 50,
    });
    const events: string[] = [];
    elector.on('started', () => events.push('started'));
    elector.on('stopped', () => events.push('stopped'));
    elector.start();
    await eventually(`round ${round}: leader`, () => elector.isLeader || undefined, 20_000, 5);
    await new Promise((r) => setTimeout(r, 20 + round * 7));
    await elector.stop();
    await new Promise((r) => setTimeout(r, 200));
    const l = lease({ kubeconfig: host.kubeconfigPath, namespace }, 'busy-lease');
    t.equal(l.spec.holderIdentity, '', `round ${round}: released`);
    t.equal(elector.isLeader, false, `round ${round}: not the leader after stop`);
    t.same(events, ['started', 'stopped'], `round ${round}: led once, then stopped`);
  }
});
