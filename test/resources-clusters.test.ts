// The resource gateway when a target cluster is not there: one that goes down after it was ready
// (its own control plane, stopped by the test: 502, never a hang), one that never became ready
// (503 with the last error) and a disabled one (404).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startControlPlane, stopControlPlane } from '../src/controlplane/controlplane.js';
import { uniqueName } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, registerCluster, testKubeconfig } from './helpers/fixtures.js';

// A long probe interval: the health probe must not notice the outage before the request does.
const gw = await startGateway(t, {
  logName: 'resources-clusters',
  env: { KITELINE_PROBE_INTERVAL_MS: '600000', KITELINE_CONNECT_TIMEOUT_MS: '2000' },
});
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'alpha', config: testKubeconfig('target-a'), isDefault: true });

t.test('a target that goes down answers 502 at once, other clusters are unaffected', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kl-down-'));
  t.teardown(async () => {
    await stopControlPlane(dir);
    rmSync(dir, { recursive: true, force: true });
  });
  const cp = await startControlPlane({ dir, name: 'down' });
  await addReadyCluster(gw, admin, { name: 'doomed', config: readFileSync(cp.kubeconfigPath, 'utf8') });
  const before = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
    headers: { ...admin.headers, 'x-cluster-name': 'doomed' },
  });
  t.equal(before.status, 200, 'served while up');

  await stopControlPlane(dir);
  const down = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
    headers: { ...admin.headers, 'x-cluster-name': 'doomed' },
  });
  t.equal(down.status, 502, down.text);
  t.match(down.body, { reason: 'BadGateway', code: 502, error: /doomed/ });
  const write = await call(gw.url, 'POST', '/api/v1/configmaps/default', {
    body: { metadata: { name: 'x' } },
    headers: { ...admin.headers, 'x-cluster-name': 'doomed' },
  });
  t.equal(write.status, 502, 'writes too');
  const other = await call(gw.url, 'GET', '/api/v1/namespaces/_all/default', { headers: admin.headers });
  t.equal(other.status, 200, 'the default cluster still answers');
});

t.test('a registered cluster that is not ready: 503 with its last error; disabled: 404', async (t) => {
  const name = uniqueName('never');
  const unreachable = testKubeconfig('target-a').replace(
    /server: https:\/\/127\.0\.0\.1:\d+/,
    'server: https://127.0.0.1:1',
  );
  const id = await registerCluster(gw, admin, { name, config: unreachable });
  const notReady = await eventually(
    'the cluster to be known',
    async () => {
      const res = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
        headers: { ...admin.headers, 'x-cluster-name': name },
      });
      return res.status === 503 ? res : undefined;
    },
    30_000,
    200,
  );
  t.match(notReady.body, {
    reason: 'ServiceUnavailable',
    code: 503,
    error: new RegExp(`cluster ${name} is not ready`),
  });
  const overview = await call(gw.url, 'GET', `/api/v1/overview?x-cluster-name=${name}`, { headers: admin.headers });
  t.equal(overview.status, 503, 'the overview too');

  const disabled = await call(gw.url, 'PUT', `/api/v1/admin/clusters/${id}`, {
    body: { enabled: false },
    headers: admin.headers,
  });
  t.equal(disabled.status, 200, disabled.text);
  const gone = await eventually(
    'the disabled cluster to be unknown',
    async () => {
      const res = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
        headers: { ...admin.headers, 'x-cluster-name': name },
      });
      return res.status === 404 ? res : undefined;
    },
    30_000,
    200,
  );
  t.same(gone.body, { error: `cluster not found: ${name}`, reason: 'NotFound', code: 404 });
});
