// Workload history and rollback on target-b (no node: controllers still create ReplicaSets and
// ControllerRevisions, pods just stay Pending): a Deployment after two template changes has three
// revisions with their templates; rollback to revision 1 as kubectl rollout undo does it (a new
// revision 4 with revision 1's template); Kite's rollback path (a history entry's YAML through
// POST /resources/apply); a StatefulSet's ControllerRevisions; other kinds an empty page;
// authorization (viewer: history yes, rollback no; anonymous 401) and bad input.
import t from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, testKubeconfig, type Caller } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { parse } from 'yaml';

const gw = await startGateway(t, { logName: 'tools-history' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b'), isDefault: true });
const kc = (await testControlPlane('target-b')).kubeconfigPath;
const ns = uniqueName('history');
t.equal(kubectl(kc, ['create', 'namespace', ns]).status, 0);
t.teardown(() => kubectl(kc, ['delete', 'namespace', ns, '--wait=false']));
let viewer: Caller;

function k(args: string[], input?: string): string {
  const res = kubectl(kc, ['-n', ns, ...args], input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

/** A restart annotation, as Kite's Restart button writes it: a timestamp, in a string. */
const RESTARTED_AT = '2026-11-24T10:00:00Z';
const deployment = (image: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web' },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: 'web' } },
    template: {
      metadata: { labels: { app: 'web' }, annotations: { 'kite.kubernetes.io/restartedAt': RESTARTED_AT } },
      spec: { terminationGracePeriodSeconds: 1, containers: [{ name: 'web', image, imagePullPolicy: 'Never' }] },
    },
  },
});

const history = (path: string, headers = admin.headers) =>
  call(gw.url, 'GET', `/api/v1/${path}/history?page=1&pageSize=10`, { headers });
const imageOf = (yamlText: string) => parse(yamlText).spec.template.spec.containers[0].image as string;
const revisionsOf = async () =>
  (await history(`deployments/${ns}/web`)).body.data.map(
    (e: { revision: number; resourceYaml: string; current: boolean }) => [
      e.revision,
      imageOf(e.resourceYaml),
      e.current,
    ],
  );

t.test('a Deployment after two template changes: three revisions, newest first', async (t) => {
  viewer = await apiKeyWithRoles(gw, admin, 'history-viewer', ['viewer']);
  for (const tag of ['1', '2', '3']) {
    k(['apply', '-f', '-'], JSON.stringify(deployment(`kiteline.local/busybox:${tag}`)));
    await eventually(`revision ${tag}`, async () => (await revisionsOf()).length === Number(tag), 30_000, 200);
  }
  const res = await history(`deployments/${ns}/web`);
  t.equal(res.status, 200, res.text);
  t.same(await revisionsOf(), [
    [3, 'kiteline.local/busybox:3', true],
    [2, 'kiteline.local/busybox:2', false],
    [1, 'kiteline.local/busybox:1', false],
  ]);
  t.same(res.body.pagination, {
    page: 1,
    pageSize: 10,
    total: 3,
    totalPages: 1,
    hasNextPage: false,
    hasPrevPage: false,
  });
  const newest = res.body.data[0];
  t.match(newest, {
    id: 3,
    resourceType: 'deployments',
    resourceName: 'web',
    namespace: ns,
    clusterName: 'b',
    success: true,
    operationType: 'revision',
  });
  t.equal(imageOf(newest.previousYaml), 'kiteline.local/busybox:2', 'previousYaml is the revision before');
  t.notOk(
    parse(newest.resourceYaml).spec.template.metadata.labels['pod-template-hash'],
    'the ReplicaSet hash label is not part of the template',
  );
  t.equal(res.body.data[2].previousYaml, '', 'the first revision has none before it');
  t.match(
    newest.resourceYaml,
    `kite.kubernetes.io/restartedAt: "${RESTARTED_AT}"`,
    "a timestamp string stays a string for Kite's YAML 1.1 reader (quoted)",
  );

  const paged = await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/history?page=2&pageSize=2`, {
    headers: admin.headers,
  });
  t.same(
    paged.body.data.map((e: { revision: number }) => e.revision),
    [1],
  );
  t.match(paged.body.pagination, {
    page: 2,
    pageSize: 2,
    total: 3,
    totalPages: 2,
    hasNextPage: false,
    hasPrevPage: true,
  });
});

t.test('rollback to revision 1, as kubectl rollout undo --to-revision=1', async (t) => {
  const denied = await call(gw.url, 'POST', `/api/v1/deployments/${ns}/web/rollback`, {
    headers: viewer.headers,
    body: { revision: 1 },
  });
  t.equal(denied.status, 403, 'the viewer may read history but not roll back');
  t.equal(
    (await call(gw.url, 'POST', `/api/v1/deployments/${ns}/web/rollback`, { body: { revision: 1 } })).status,
    401,
  );
  t.equal(
    (
      await call(gw.url, 'POST', `/api/v1/deployments/${ns}/web/rollback`, {
        headers: admin.headers,
        body: { revision: -1 },
      })
    ).status,
    400,
  );
  t.equal(
    (
      await call(gw.url, 'POST', `/api/v1/deployments/${ns}/web/rollback`, {
        headers: admin.headers,
        body: { revision: 99 },
      })
    ).status,
    404,
  );

  const res = await call(gw.url, 'POST', `/api/v1/deployments/${ns}/web/rollback`, {
    headers: admin.headers,
    body: { revision: 1 },
  });
  t.equal(res.status, 200, res.text);
  t.same(res.body, { message: `deployments ${ns}/web rolled back to revision 1`, revision: 1 });
  const live = JSON.parse(k(['get', 'deployment', 'web', '-o', 'json']));
  t.equal(live.spec.template.spec.containers[0].image, 'kiteline.local/busybox:1');
  // As kubectl: revision 1's ReplicaSet is reused and becomes revision 4.
  await eventually(
    'revision 4',
    async () =>
      JSON.stringify(await revisionsOf()) ===
      JSON.stringify([
        [4, 'kiteline.local/busybox:1', true],
        [3, 'kiteline.local/busybox:3', false],
        [2, 'kiteline.local/busybox:2', false],
      ]),
    30_000,
    200,
  );
  t.pass('the rolled-back template is the newest revision, as kubectl rollout history shows it');
  const same = await call(gw.url, 'POST', `/api/v1/deployments/${ns}/web/rollback`, {
    headers: admin.headers,
    body: { revision: 4 },
  });
  t.match(same.body.message, /skipped rollback/, 'rolling back to the current template changes nothing');
});

t.test("Kite's rollback: a history entry's YAML through POST /resources/apply", async (t) => {
  const entries = (await history(`deployments/${ns}/web`)).body.data as Array<{
    revision: number;
    resourceYaml: string;
  }>;
  const two = entries.find((e) => e.revision === 2)!;
  const res = await call(gw.url, 'POST', '/api/v1/resources/apply', {
    headers: admin.headers,
    body: { yaml: two.resourceYaml, force: true },
  });
  t.equal(res.status, 200, res.text);
  t.equal(
    JSON.parse(k(['get', 'deployment', 'web', '-o', 'json'])).spec.template.spec.containers[0].image,
    'kiteline.local/busybox:2',
  );
});

t.test("a StatefulSet's ControllerRevisions; other kinds: an empty page", async (t) => {
  const sts = (image: string) => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'db' },
    spec: {
      replicas: 0,
      serviceName: 'db',
      selector: { matchLabels: { app: 'db' } },
      template: {
        metadata: { labels: { app: 'db' } },
        spec: { containers: [{ name: 'db', image, imagePullPolicy: 'Never' }] },
      },
    },
  });
  k(['apply', '-f', '-'], JSON.stringify(sts('kiteline.local/busybox:1')));
  await eventually(
    'sts revision 1',
    async () => (await history(`statefulsets/${ns}/db`)).body.data.length === 1,
    30_000,
    200,
  );
  k(['apply', '-f', '-'], JSON.stringify(sts('kiteline.local/busybox:2')));
  const res = await eventually(
    'sts revision 2',
    async () => {
      const r = await history(`statefulsets/${ns}/db`);
      return r.body.data.length === 2 ? r : undefined;
    },
    30_000,
    200,
  );
  t.same(
    res.body.data.map((e: { revision: number; resourceYaml: string }) => [e.revision, imageOf(e.resourceYaml)]),
    [
      [2, 'kiteline.local/busybox:2'],
      [1, 'kiteline.local/busybox:1'],
    ],
  );
  const back = await call(gw.url, 'POST', `/api/v1/statefulsets/${ns}/db/rollback`, {
    headers: admin.headers,
    body: {},
  });
  t.equal(back.status, 200, back.text);
  t.equal(back.body.revision, 1, 'no revision: the one before the current');
  t.equal(
    JSON.parse(k(['get', 'statefulset', 'db', '-o', 'json'])).spec.template.spec.containers[0].image,
    'kiteline.local/busybox:1',
  );

  k(['create', 'configmap', 'plain', '--from-literal=a=b']);
  const plain = await history(`configmaps/${ns}/plain`, viewer.headers);
  t.equal(plain.status, 200);
  t.same(plain.body, {
    data: [],
    pagination: { page: 1, pageSize: 10, total: 0, totalPages: 0, hasNextPage: false, hasPrevPage: false },
  });
  const rollPlain = await call(gw.url, 'POST', `/api/v1/configmaps/${ns}/plain/rollback`, {
    headers: admin.headers,
    body: { revision: 1 },
  });
  t.equal(rollPlain.status, 400);
});

t.test('history: viewer allowed, anonymous 401, bad input 400, missing 404', async (t) => {
  t.equal((await history(`deployments/${ns}/web`, viewer.headers)).status, 200);
  t.equal((await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/history`)).status, 401);
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/history?pageSize=1000`, { headers: admin.headers }))
      .status,
    400,
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/history?page=0`, { headers: admin.headers })).status,
    400,
  );
  t.equal((await call(gw.url, 'GET', `/api/v1/deployments/_all/web/history`, { headers: admin.headers })).status, 400);
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/deployments/${ns}/nothing/history`, { headers: admin.headers })).status,
    404,
  );
  const generic = await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web`, { headers: admin.headers });
  t.equal(generic.body.kind, 'Deployment', 'the generic object route is untouched');
});
