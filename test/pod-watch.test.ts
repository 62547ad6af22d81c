// Issue 18 point 3: Kite's live pod list, GET /api/v1/pods/<ns>/watch, server-sent events from
// one upstream watch of real pods on the target-a node: the pods already there come as `added`,
// a new pod as `added` then `modified`, a deleted one as `deleted`; reduce=true trims each pod as
// Kite does; the label selector holds; the upstream watch ends when the client leaves. Then the
// attacks: the viewer may watch, a namespace-limited role not outside its namespace, nobody
// kiteline's own namespace on the host (and `_all` there leaves it out), anonymous callers nothing.
import t from 'tap';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { apiserverLongRunning } from './helpers/faults.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl, openSse, type SseEvent } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const gw = await startGateway(t, { logName: 'pod-watch' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

const ns = uniqueName('podwatch');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
const SLEEP = ['sh', '-c', 'exec sleep 3600'];
await k(
  ['apply', '-f', '-'],
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [busyboxPod('first', { app: 'w' }, SLEEP), busyboxPod('outsider', { app: 'x' }, SLEEP)],
  }),
);

const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
const LIMITED_ROLE = uniqueName('only-elsewhere');
await createRole(gw, admin, {
  name: LIMITED_ROLE,
  clusters: ['*'],
  namespaces: [uniqueName('elsewhere')],
  resources: ['*'],
  verbs: ['*'],
});
const limited = await apiKeyWithRoles(gw, admin, uniqueName('limited'), [LIMITED_ROLE]);

const watchUrl = (namespace: string, query: string) => `${gw.url}/api/v1/pods/${namespace}/watch?${query}`;
const about = (name: string, event?: string) => (e: SseEvent) =>
  (event === undefined || e.event === event) && JSON.parse(e.data)?.metadata?.name === name;
const POD_WATCHES = { resource: 'pods', scope: 'namespace', verb: 'WATCH' };

t.test('reduce=true: the pods there, then added, modified, deleted, as Kite sends them', async (t) => {
  const sse = await openSse(watchUrl(ns, 'reduce=true&labelSelector=app%3Dw'), admin.headers);
  t.teardown(() => sse.close());
  t.equal(sse.status, 200);
  t.match(sse.headers.get('content-type'), /^text\/event-stream/);
  t.match(sse.headers.get('cache-control'), /no-cache/);
  const existing = JSON.parse((await sse.waitFor('the pod already there', about('first', 'added'))).data);
  t.same(
    Object.keys(existing.metadata).sort(),
    ['creationTimestamp', 'name', 'namespace'],
    'metadata trimmed (no labels, uid, managedFields)',
  );
  t.equal(existing.metadata.namespace, ns);
  t.same(
    existing.spec.containers,
    [{ name: 'main', image: 'kiteline.local/busybox:1' }],
    'containers: name and image only',
  );
  t.notOk('command' in existing.spec.containers[0], 'no command');
  t.ok(existing.status, 'status kept');
  t.ok('metrics' in existing, "Kite's metrics member (null without metrics-server)");

  await k(['apply', '-f', '-'], JSON.stringify(busyboxPod('second', { app: 'w' }, SLEEP)));
  await sse.waitFor('the new pod added', about('second', 'added'));
  const running = await sse.waitFor(
    'the new pod running',
    (e) => about('second', 'modified')(e) && JSON.parse(e.data).status?.phase === 'Running',
    90_000,
  );
  t.equal(JSON.parse(running.data).spec.nodeName, target.node!.name, 'spec.nodeName kept');
  await k(['delete', 'pod', 'second', '--wait=false']);
  await sse.waitFor('the pod deleted', about('second', 'deleted'), 60_000);
  t.notOk(sse.events.some(about('outsider')), 'the label selector holds');
  t.ok(
    sse.events.every((e) => ['added', 'modified', 'deleted'].includes(e.event)),
    'only named events',
  );
});

t.test('without reduce: whole pods; the upstream watch ends when the client leaves', async (t) => {
  const sse = await openSse(watchUrl(ns, 'labelSelector=app%3Dw'), viewer.headers);
  t.teardown(() => sse.close());
  const pod = JSON.parse((await sse.waitFor('the pod', about('first', 'added'))).data);
  t.same(pod.spec.containers[0].command, SLEEP, 'the whole spec');
  t.equal(pod.metadata.labels.app, 'w');
  // Its watch is open (its first event came), so the API server's count includes it.
  const open = await apiserverLongRunning(target, POD_WATCHES);
  t.ok(open >= 1, `the API server counts open pod watches (${open})`);
  sse.close();
  await eventually(
    'the upstream watch to end',
    async () => (await apiserverLongRunning(target, POD_WATCHES)) <= open - 1,
    30_000,
    200,
  );
  t.pass('one upstream watch fewer after the client left');
});

t.test(
  'a gateway shutting down ends an open live pod list after a few seconds instead of waiting for it',
  async (t) => {
    const other = await startGateway(t, { logName: 'pod-watch' });
    const otherAdmin = await bootstrapAdmin(other);
    await addReadyCluster(other, otherAdmin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
    const sse = await openSse(`${other.url}/api/v1/pods/${ns}/watch?labelSelector=app%3Dw`, otherAdmin.headers);
    t.teardown(() => sse.close());
    await sse.waitFor('the pod', about('first', 'added'));
    const started = Date.now();
    await other.close();
    // Without the cut, close() would wait for the stream for ever (this test's timeout).
    t.pass(`closed in ${Date.now() - started} ms`);
    await eventually('the stream ended for the client', () => sse.ended(), 10_000);
  },
);

t.test('authorization: viewer yes, namespace-limited role and anonymous no', async (t) => {
  const allowed = await openSse(watchUrl(ns, 'reduce=true'), viewer.headers);
  t.teardown(() => allowed.close());
  t.equal(allowed.status, 200, 'viewer');
  await allowed.waitFor('a pod', about('outsider', 'added'));
  const denied = await call(gw.url, 'GET', `/api/v1/pods/${ns}/watch`, { headers: limited.headers });
  t.equal(denied.status, 403, 'namespace-limited role outside its namespace');
  t.match(denied.body.error, /may not watch pods/);
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/pods/_all/watch`, { headers: limited.headers })).status,
    403,
    'nor across all namespaces',
  );
  t.equal((await call(gw.url, 'GET', `/api/v1/pods/${ns}/watch`)).status, 401, 'anonymous');
});

t.test("kiteline's own namespace on the host: 403, and left out of _all", async (t) => {
  const host = namespacedKubectl(gw.kubeconfig, gw.namespace);
  const tenant = uniqueName('tenant');
  const label = uniqueName('mark');
  await host(['create', 'namespace', tenant]);
  t.teardown(() => host(['delete', 'namespace', tenant, '--wait=false']));
  const marked = (name: string) => busyboxPod(name, { mark: label }, SLEEP);
  await host(['apply', '-f', '-'], JSON.stringify(marked('hidden')));
  await namespacedKubectl(gw.kubeconfig, tenant)(['apply', '-f', '-'], JSON.stringify(marked('visible')));
  t.teardown(() => host(['delete', 'pod', 'hidden', '--wait=false']));
  const onHost = { ...admin.headers, 'x-cluster-name': 'self' };
  const own = await call(gw.url, 'GET', `/api/v1/pods/${gw.namespace}/watch`, { headers: onHost });
  t.equal(own.status, 403, 'admin, the install namespace');
  t.match(own.body.error, /not reachable through kiteline/);
  const all = await openSse(watchUrl('_all', `reduce=true&labelSelector=mark%3D${label}`), onHost);
  t.teardown(() => all.close());
  t.equal(all.status, 200);
  await all.waitFor("the tenant's pod", about('visible', 'added'));
  await new Promise((r) => setTimeout(r, 500));
  t.notOk(all.events.some(about('hidden')), "the install namespace's pod never shows");
});

t.test('bad parameters: a 400', async (t) => {
  for (const path of [
    `/api/v1/pods/${ns}/watch?reduce=maybe`,
    '/api/v1/pods/Bad_NS/watch',
    `/api/v1/pods/${ns}/watch?labelSelector=%3D%3D%3D`,
  ]) {
    const res = await call(gw.url, 'GET', path, { headers: admin.headers });
    t.equal(res.status, 400, path);
    t.type(res.body?.error, 'string', 'a JSON error, not an event stream');
  }
  const missing = await call(gw.url, 'GET', '/api/v1/pods/no-such-namespace-here/watch', {
    headers: admin.headers,
    signal: AbortSignal.timeout(2000),
  }).catch(() => undefined);
  t.ok(missing === undefined || missing.status === 200, 'a namespace with no pods is just an empty stream');
});

t.test('the resource routes still answer under /api/v1/pods and /api/v1/namespaces', async (t) => {
  const pod = await call(gw.url, 'GET', `/api/v1/pods/${ns}/first`, { headers: admin.headers });
  t.equal(pod.status, 200, 'GET /api/v1/pods/<ns>/<name>');
  t.equal(pod.body.metadata.name, 'first');
  const namespace = await call(gw.url, 'GET', `/api/v1/namespaces/_all/${ns}`, { headers: admin.headers });
  t.equal(namespace.status, 200, 'GET /api/v1/namespaces/_all/<name>');
});
