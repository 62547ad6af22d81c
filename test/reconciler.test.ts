// The reconciler on real control planes: declarative registration with kubectl apply (the
// deploy/examples pair), id assignment and status from the leader, Secret rotation, an invalid
// kubeconfig Secret, disable/enable and delete by kubectl, and a target that goes down and comes
// back (its status follows; the other cluster keeps serving).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseAllDocuments, stringify } from 'yaml';
import type { WarmConnection } from '../src/clusters/connection.js';
import { PACKAGE_ROOT } from '../src/config.js';
import { startControlPlane, stopControlPlane, type ControlPlaneHandle } from '../src/controlplane/controlplane.js';
import { DEFAULT_SINCE_ANNOTATION } from '../src/host/clusters.js';
import { ID_LABEL, type ClusterResource } from '../src/host/resources.js';
import { kubectl, testControlPlane, testPlaneVersion } from './helpers/clusters.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { eventually } from './helpers/eventually.js';

function kubeconfigFor(cp: ControlPlaneHandle, token = cp.token): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'c',
        cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') },
      },
    ],
    users: [{ name: 'u', user: { token } }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'c',
  });
}

/** The deploy/examples pair with the kubeconfig and names replaced. */
function examplePair(name: string, kubeconfig: string, withSpecName = true): string {
  const docs = parseAllDocuments(
    readFileSync(join(PACKAGE_ROOT, 'deploy', 'examples', 'cluster-staging.yaml'), 'utf8'),
  ).map((d) => d.toJS());
  const [secret, cluster] = docs;
  secret.metadata.name = `${name}-kubeconfig`;
  secret.stringData.kubeconfig = kubeconfig;
  cluster.metadata.name = name;
  if (withSpecName) cluster.spec.name = name;
  else delete cluster.spec.name;
  cluster.spec.kubeconfigSecretRef.name = `${name}-kubeconfig`;
  return [secret, cluster].map((d) => stringify(d)).join('---\n');
}

function cr(gw: TestGateway, name: string): ClusterResource | undefined {
  return gw.services.host.clusters.get(name, gw.namespace);
}

function apply(gw: TestGateway, yaml: string): void {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'apply', '-f', '-'], yaml);
  if (res.status !== 0) throw new Error(res.stderr);
}

const fastProbes = { KITELINE_PROBE_INTERVAL_MS: '300', KITELINE_CONNECT_TIMEOUT_MS: '1000' };

t.test('kubectl apply registers a cluster; rotation, invalid config, disable, delete', async (t) => {
  const gw = await startGateway(t, { env: fastProbes });
  const a = await testControlPlane('target-a');
  const b = await testControlPlane('target-b');

  apply(gw, examplePair('staging', kubeconfigFor(a)));
  const conn = (await eventually('staging ready', () => {
    const c = gw.services.clusters.get('staging');
    return c?.ready ? c : undefined;
  })) as WarmConnection;
  t.equal(conn.serverUrl, a.server);
  t.equal(conn.version, testPlaneVersion('target-a'));
  // The only cluster is also made the default (a spec change): wait for the status of the latest generation.
  const withStatus = await eventually('id and status written by the leader', () => {
    const o = cr(gw, 'staging');
    const current = o?.status?.observedGeneration === o?.metadata.generation;
    return o?.metadata.labels?.[ID_LABEL] && o.status?.ready && current ? o : undefined;
  });
  t.match(withStatus.status, {
    ready: true,
    version: testPlaneVersion('target-a'),
    observedGeneration: withStatus.metadata.generation,
    conditions: [{ type: 'Ready', status: 'True', reason: 'Reachable' }],
  });
  t.notOk(withStatus.status?.error, 'no error');
  await eventually('the only cluster becomes the default', () =>
    gw.services.clusters.defaultCluster()?.name === 'staging' ? true : undefined,
  );
  const printed = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', 'staging']);
  t.match(
    printed.stdout,
    new RegExp(`staging\\s+true\\s+${testPlaneVersion('target-a')}`),
    'kubectl get shows Ready and Version',
  );

  // Rotation to a bad token: the connection is rebuilt, the status says why.
  apply(gw, examplePair('staging', kubeconfigFor(a, 'wrong-token')));
  await eventually('status shows the rejected credentials', () => {
    const o = cr(gw, 'staging');
    return o?.status?.ready === false && /401/.test(o.status.error ?? '') ? o : undefined;
  });
  t.equal(gw.services.clusters.get('staging')?.ready, false);

  // Rotation to another cluster: the same name now reaches target-b.
  apply(gw, examplePair('staging', kubeconfigFor(b)));
  const moved = await eventually<WarmConnection>('staging on target-b', () => {
    const c = gw.services.clusters.get('staging') as WarmConnection | undefined;
    return c?.ready && c.serverUrl === b.server ? c : undefined;
  });
  const res = await moved.request({ method: 'GET', path: '/api/v1/namespaces/default' });
  t.equal(res.statusCode, 200);
  res.resume();

  // A kubeconfig that would run a program is refused; the reason is in the status.
  const exec = kubeconfigFor(b).replace(/token: .*/, 'exec: {command: /bin/sh}');
  apply(gw, examplePair('staging', exec));
  const refused = await eventually('status shows the refusal', () => {
    const o = cr(gw, 'staging');
    return /exec credential plugins are not allowed/.test(o?.status?.error ?? '') ? o : undefined;
  });
  t.match(refused.status?.conditions, [{ type: 'Ready', status: 'False', reason: 'KubeconfigInvalid' }]);
  t.notOk(gw.services.clusters.get('staging'), 'not served');

  apply(gw, examplePair('staging', kubeconfigFor(a)));
  await eventually('served again', () => gw.services.clusters.get('staging')?.ready || undefined);

  // Disable and enable with kubectl patch.
  t.equal(
    kubectl(gw.kubeconfig, [
      '-n',
      gw.namespace,
      'patch',
      'clusters.kiteline.io',
      'staging',
      '--type=merge',
      '-p',
      '{"spec":{"enabled":false}}',
    ]).status,
    0,
  );
  await eventually('disabled', () => (gw.services.clusters.get('staging') ? undefined : true));
  await eventually(
    'status says disabled',
    () => cr(gw, 'staging')?.status?.conditions?.[0]?.reason === 'Disabled' || undefined,
  );
  t.equal(
    kubectl(gw.kubeconfig, [
      '-n',
      gw.namespace,
      'patch',
      'clusters.kiteline.io',
      'staging',
      '--type=merge',
      '-p',
      '{"spec":{"enabled":true}}',
    ]).status,
    0,
  );
  await eventually('enabled', () => gw.services.clusters.get('staging')?.ready || undefined);

  // A second kubectl-applied cluster without spec.name uses metadata.name and gets its own id.
  apply(gw, examplePair('other', kubeconfigFor(b), false));
  const other = await eventually('other gets an id', () => {
    const o = cr(gw, 'other');
    return o?.metadata.labels?.[ID_LABEL] ? o : undefined;
  });
  await eventually('other served under its metadata.name', () => gw.services.clusters.get('other')?.ready || undefined);
  t.not(other.metadata.labels?.[ID_LABEL], cr(gw, 'staging')?.metadata.labels?.[ID_LABEL], 'distinct ids');

  t.equal(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'delete', 'clusters.kiteline.io', 'staging']).status, 0);
  await eventually('deleted', () => (gw.services.clusters.get('staging') ? undefined : true));
  await eventually('the remaining cluster becomes the default', () =>
    cr(gw, 'other')?.spec.isDefault ? true : undefined,
  );
});

t.test('a target that goes down and comes back; the other keeps serving', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kl-flaky-'));
  let flaky = await startControlPlane({ dir, name: 'flaky' });
  t.teardown(() => stopControlPlane(dir));
  const gw = await startGateway(t, { env: fastProbes });
  const a = await testControlPlane('target-a');
  apply(gw, examplePair('steady', kubeconfigFor(a)));
  apply(gw, examplePair('flaky', kubeconfigFor(flaky)));
  await eventually(
    'both ready',
    () => (gw.services.clusters.get('steady')?.ready && gw.services.clusters.get('flaky')?.ready) || undefined,
  );
  await eventually('status ready', () => (cr(gw, 'flaky')?.status?.ready ? true : undefined));

  await stopControlPlane(dir);
  const down = await eventually('flaky reported down', () => {
    const o = cr(gw, 'flaky');
    return o?.status?.ready === false ? o : undefined;
  });
  t.match(down.status?.error, /unreachable|ECONNREFUSED|connect/i, 'the last error says why');
  t.match(down.status?.conditions, [{ type: 'Ready', status: 'False', reason: 'Unreachable' }]);
  t.equal(gw.services.clusters.get('flaky')?.ready, false);
  const flakyConn = gw.services.clusters.get('flaky')!;
  const failure = await flakyConn.request({ method: 'GET', path: '/version' }).then(
    () => undefined,
    (err: { status?: number }) => err,
  );
  t.equal(failure?.status, 502, 'requests to it fail with 502');

  const steady = gw.services.clusters.get('steady')!;
  t.equal(steady.ready, true, 'the other cluster stays ready');
  t.equal(cr(gw, 'steady')?.status?.ready, true);
  const res = await steady.request({ method: 'GET', path: '/api/v1/namespaces/default' });
  t.equal(res.statusCode, 200, 'and serves');
  res.resume();

  flaky = await startControlPlane({ dir, name: 'flaky' });
  if (flaky.server !== (gw.services.clusters.get('flaky') as WarmConnection).serverUrl) {
    // The old port was taken meanwhile: point the Secret at the new one (a rotation).
    apply(gw, examplePair('flaky', kubeconfigFor(flaky)));
  }
  await eventually(
    'flaky back',
    () => (cr(gw, 'flaky')?.status?.ready && gw.services.clusters.get('flaky')?.ready ? true : undefined),
    90_000,
  );
  t.pass('status followed the cluster back up');
});

t.test('a default the leader picks itself loses to a default a user set, even an older one', async (t) => {
  const gw = await startGateway(t, { env: fastProbes });
  const a = await testControlPlane('target-a');
  apply(gw, examplePair('first', kubeconfigFor(a)));
  const fallback = await eventually('the leader to mark the only cluster default', () => {
    const o = cr(gw, 'first');
    return o?.spec.isDefault ? o : undefined;
  });
  t.equal(
    fallback.metadata.annotations?.[DEFAULT_SINCE_ANNOTATION],
    new Date(0).toISOString(),
    "the leader's own pick dates from the epoch",
  );

  // A default written by a user (an import's current context, kubectl) whose stamp predates the
  // leader's pick: it must still win, or an import's chosen default could be overruled.
  const [secret, cluster] = parseAllDocuments(examplePair('second', kubeconfigFor(a))).map((d) => d.toJS());
  cluster.spec.isDefault = true;
  cluster.metadata.annotations = { [DEFAULT_SINCE_ANNOTATION]: '2020-01-01T00:00:00.000Z' };
  apply(gw, [secret, cluster].map((d) => stringify(d)).join('---\n'));
  await eventually('the user default to be the only one', () =>
    cr(gw, 'second')?.spec.isDefault && cr(gw, 'first')?.spec.isDefault === false ? true : undefined,
  );
  t.pass('the leader cleared its own pick and kept the one the user set');
});
