// `kiteline serve` against the shared host control plane: CRDs installed, health, readiness,
// the error body of CONTRACT section 3, request ids.
import t from 'tap';
import { kubectl } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';

t.test('serve installs CRDs, syncs caches and answers health checks', async (t) => {
  const gw = await startGateway(t);
  for (const crd of ['users.kiteline.io', 'clusters.kiteline.io', 'roles.kiteline.io', 'apikeys.kiteline.io']) {
    t.equal(kubectl(gw.kubeconfig, ['get', 'crd', crd]).status, 0, `${crd} installed`);
  }
  t.equal(kubectl(gw.kubeconfig, ['get', 'namespace', gw.namespace]).status, 0, 'install namespace created');
  t.same((await call(gw.url, 'GET', '/healthz')).body, { status: 'ok' });
  const ready = await call(gw.url, 'GET', '/readyz');
  t.equal(ready.status, 200);
  t.ok(ready.headers.get('x-request-id'), 'every answer carries a request id');
  const traced = await call(gw.url, 'GET', '/healthz', { headers: { 'x-request-id': 'trace-123' } });
  t.equal(traced.headers.get('x-request-id'), 'trace-123', 'a sane incoming request id is kept');
});

t.test('unknown routes get the contract error body', async (t) => {
  const gw = await startGateway(t);
  const res = await call(gw.url, 'GET', '/no/such/route?token=secret');
  t.equal(res.status, 404);
  t.same(res.body, { error: 'route not found: GET /no/such/route', reason: 'NotFound', code: 404 });
  t.match(res.headers.get('content-type') ?? '', /application\/json/);
});

t.test('a second replica against the same namespace starts cleanly (CRDs already there)', async (t) => {
  const first = await startGateway(t);
  const second = await startGateway(t, { namespace: first.namespace });
  t.equal((await call(second.url, 'GET', '/readyz')).status, 200);
});
