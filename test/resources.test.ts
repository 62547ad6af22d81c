// The resource gateway against real control planes: every route and option of CONTRACT section 7
// on ConfigMaps, Deployments, Pods, Namespaces, Nodes and a custom resource, on the shared target
// cluster target-a registered through the admin API. Objects live in a namespace of their own.
import t from 'tap';
import { installWidgetCrd, kubectl, uniqueName } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';
import { eventually } from './helpers/eventually.js';
import { LONG_RUNNING_GAUGE } from './helpers/faults.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';

const gw = await startGateway(t, { logName: 'resources' });
const admin = await bootstrapAdmin(gw);
const targetConfig = testKubeconfig('target-a');
const target = gw.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
const CLUSTER = uniqueName('alpha');
await addReadyCluster(gw, admin, { name: CLUSTER, config: targetConfig, isDefault: true });

const ns = uniqueName('res');
t.equal(kubectl(target, ['create', 'namespace', ns]).status, 0, 'test namespace on the target');
t.teardown(() => {
  kubectl(target, ['delete', 'namespace', ns, '--wait=false']);
});

const H = { ...admin.headers, 'x-cluster-name': CLUSTER };
const api = (
  method: string,
  path: string,
  options: { body?: unknown; raw?: string; headers?: Record<string, string> } = {},
) => call(gw.url, method, path, { ...options, headers: { ...H, ...options.headers } });
const kube = (...args: string[]) => kubectl(target, args);
const exists = (kind: string, name: string, namespace = ns) => kube('get', kind, name, '-n', namespace).status === 0;

t.test('ConfigMaps: create, get, list, replace, delete', async (t) => {
  const created = await api('POST', `/api/v1/configmaps/${ns}`, {
    body: { metadata: { name: 'settings', labels: { app: 'web' } }, data: { color: 'blue' } },
  });
  t.equal(created.status, 201, created.text);
  t.equal(created.body.metadata.namespace, ns, 'namespace filled from the path');
  t.match(created.headers.get('content-type'), /application\/json/);
  t.equal(
    kube('get', 'configmap', 'settings', '-n', ns, '-o', 'jsonpath={.data.color}').stdout,
    'blue',
    'the target cluster has it',
  );

  const got = await api('GET', `/api/v1/configmaps/${ns}/settings`);
  t.equal(got.status, 200);
  t.equal(got.body.data.color, 'blue');

  const listed = await api('GET', `/api/v1/configmaps/${ns}?labelSelector=app%3Dweb&reduce=true`);
  t.equal(listed.status, 200);
  t.same(
    listed.body.items.map((i: any) => i.metadata.name),
    ['settings'],
    'labelSelector passes; unknown query ignored',
  );
  t.equal(listed.body.kind, 'ConfigMapList');
  const everywhere = await api('GET', `/api/v1/configmaps/_all?fieldSelector=metadata.namespace%3D${ns}`);
  t.ok(
    everywhere.body.items.some((i: any) => i.metadata.name === 'settings'),
    '_all lists across namespaces, fieldSelector passes',
  );
  const bare = await api('GET', `/api/v1/configmaps?labelSelector=app%3Dweb`);
  t.ok(
    bare.body.items.some((i: any) => i.metadata.namespace === ns),
    'no second segment lists across namespaces',
  );

  const duplicate = await api('POST', `/api/v1/configmaps/${ns}`, { body: { metadata: { name: 'settings' } } });
  t.equal(duplicate.status, 409);
  t.equal(duplicate.body.reason, 'AlreadyExists');
  t.equal(duplicate.body.code, 409);
  t.match(duplicate.body.details, { name: 'settings', kind: 'configmaps' }, 'details of the cluster Status are kept');

  const mismatch = await api('POST', `/api/v1/configmaps/${ns}`, {
    body: { metadata: { name: 'other', namespace: 'default' } },
  });
  t.equal(mismatch.status, 400);
  t.match(mismatch.body.error, /differs from the namespace in the path/);
  t.notOk(exists('configmap', 'other'), 'nothing created');

  const noVersion = await api('PUT', `/api/v1/configmaps/${ns}/settings`, {
    body: { metadata: { name: 'settings' }, data: { color: 'red' } },
  });
  t.equal(noVersion.status, 400);
  t.match(noVersion.body.error, /resourceVersion is required/);

  const rv = got.body.metadata.resourceVersion;
  const replaced = await api('PUT', `/api/v1/configmaps/${ns}/settings`, {
    body: { ...got.body, data: { color: 'green' } },
  });
  t.equal(replaced.status, 200, replaced.text);
  t.equal(replaced.body.data.color, 'green');
  const stale = await api('PUT', `/api/v1/configmaps/${ns}/settings`, {
    body: { ...got.body, metadata: { ...got.body.metadata, resourceVersion: rv }, data: { color: 'stale' } },
  });
  t.equal(stale.status, 409, 'a stale PUT is a conflict');
  t.equal(stale.body.reason, 'Conflict');
  t.equal(
    kube('get', 'configmap', 'settings', '-n', ns, '-o', 'jsonpath={.data.color}').stdout,
    'green',
    'the stale write changed nothing',
  );

  const invalid = await api('POST', `/api/v1/configmaps/${ns}`, { body: { metadata: { name: 'Not_Valid' } } });
  t.equal(invalid.status, 422);
  t.equal(invalid.body.reason, 'Invalid');
  t.ok(invalid.body.details?.causes?.length, 'the causes of a 422 are kept');

  const deleted = await api('DELETE', `/api/v1/configmaps/${ns}/settings`);
  t.equal(deleted.status, 200, deleted.text);
  t.same(deleted.body, { message: `configmaps ${ns}/settings deleted` });
  t.notOk(exists('configmap', 'settings'), 'gone on the target when the DELETE answers');
  const missing = await api('GET', `/api/v1/configmaps/${ns}/settings`);
  t.equal(missing.status, 404);
  t.equal(missing.body.reason, 'NotFound');
});

t.test('malformed input is refused before it reaches the cluster', async (t) => {
  const bad = await api('POST', `/api/v1/configmaps/${ns}`, {
    raw: '{"metadata":{"name":"half"',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(bad.status, 400);
  t.match(bad.body, { reason: 'BadRequest', code: 400, error: /not valid JSON/ });
  t.notOk(exists('configmap', 'half'));
  const wrongKind = await api('POST', `/api/v1/configmaps/${ns}`, {
    body: { kind: 'Secret', metadata: { name: 'kind' } },
  });
  t.equal(wrongKind.status, 400);
  t.notOk(exists('configmap', 'kind'));
  const traversal = await api('GET', `/api/v1/configmaps/${ns}/..%2F..%2Fsecrets`);
  t.equal(traversal.status, 400, 'encoded slashes and dot-dot in a name are 400');
  const badNs = await api('GET', '/api/v1/configmaps/Not_A_Namespace');
  t.equal(badNs.status, 400);
  const badLimit = await api('GET', `/api/v1/configmaps/${ns}?limit=-3`);
  t.equal(badLimit.status, 400, 'limit must be a positive integer');
  const badTimeout = await api('DELETE', `/api/v1/configmaps/${ns}/x?timeoutSeconds=601`);
  t.equal(badTimeout.status, 400, 'timeoutSeconds is 1..600');
  const unknown = await api('GET', `/api/v1/nosuchthings/${ns}`);
  t.equal(unknown.status, 404);
  t.match(unknown.body.error, /resource not found on cluster .*: nosuchthings/);
  const anonymous = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, { headers: { 'x-cluster-name': CLUSTER } });
  t.equal(anonymous.status, 401, 'no credentials: 401');
  const anonymousBad = await call(gw.url, 'POST', `/api/v1/configmaps/${ns}`, {
    raw: '{',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(anonymousBad.status, 401, 'authentication comes before body parsing');
});

t.test('list pagination with continue across pages, and 410 kept', async (t) => {
  const items = [1, 2, 3, 4, 5].map((i) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `page-${i}`, namespace: ns, labels: { paged: 'yes' } },
  }));
  t.equal(
    kubectl(target, ['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items })).status,
    0,
    'five ConfigMaps',
  );
  const seen: string[] = [];
  let token = '';
  let pages = 0;
  do {
    const res = await api(
      'GET',
      `/api/v1/configmaps/${ns}?labelSelector=paged%3Dyes&limit=2` +
        (token ? `&continue=${encodeURIComponent(token)}` : ''),
    );
    t.equal(res.status, 200, res.text);
    t.ok(res.body.items.length <= 2, 'limit passes through');
    seen.push(...res.body.items.map((i: any) => i.metadata.name));
    token = res.body.metadata.continue ?? '';
    pages++;
  } while (token && pages < 10);
  t.equal(pages, 3, 'three pages of two');
  t.same(seen.sort(), ['page-1', 'page-2', 'page-3', 'page-4', 'page-5'], 'every object exactly once');

  // A list at an old resourceVersion: the cluster says 410 Expired once etcd has compacted.
  const direct = kube(
    'get',
    '--raw',
    `/api/v1/namespaces/${ns}/configmaps?resourceVersion=2&resourceVersionMatch=Exact`,
  );
  const old = await api('GET', `/api/v1/configmaps/${ns}?resourceVersion=2&resourceVersionMatch=Exact`);
  if (/Expired/.test(direct.stderr)) {
    t.equal(old.status, 410);
    t.equal(old.body.reason, 'Expired');
  } else {
    t.equal(old.status, direct.status === 0 ? 200 : old.status, 'the cluster answer is passed on');
  }
});

/** Reads a streaming response line by line until `until` returns true for a parsed event. */
async function readEvents(body: ReadableStream<Uint8Array>, until: (event: any) => boolean): Promise<any[]> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const events: any[] = [];
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return events;
    buffered += decoder.decode(value, { stream: true });
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (!line) continue;
      const event = JSON.parse(line);
      events.push(event);
      if (until(event)) {
        reader.releaseLock();
        return events;
      }
    }
  }
}

function namespacedConfigMapWatchers(): number {
  const metrics = kube('get', '--raw', '/metrics').stdout;
  let total = 0;
  for (const line of metrics.split('\n')) {
    if (
      line.startsWith(`${LONG_RUNNING_GAUGE}{`) &&
      line.includes('resource="configmaps"') &&
      // A watch narrowed to one name counts as scope "resource" from Kubernetes 1.33 on, "namespace" before.
      (line.includes('scope="namespace"') || line.includes('scope="resource"')) &&
      line.includes('verb="WATCH"')
    ) {
      total += Number(line.split(' ').pop());
    }
  }
  return total;
}

t.test('watch streams events until the client leaves, then the upstream watch closes', async (t) => {
  const before = namespacedConfigMapWatchers();
  const controller = new AbortController();
  const res = await fetch(`${gw.url}/api/v1/configmaps/${ns}/watched?watch=true`, {
    headers: H,
    signal: controller.signal,
  });
  t.equal(res.status, 200, 'the head arrives before any event');
  t.match(res.headers.get('content-type'), /application\/json/);
  t.ok(namespacedConfigMapWatchers() >= before + 1, 'a watch is open on the target');
  const reading = readEvents(res.body!, (e) => e.type === 'MODIFIED');
  t.equal(kube('create', 'configmap', 'watched', '-n', ns, '--from-literal=a=1').status, 0);
  const patched = await api('PATCH', `/api/v1/configmaps/${ns}/watched?patchType=merge`, {
    body: { data: { a: '2' } },
  });
  t.equal(patched.status, 200);
  const events = await reading;
  t.same(
    events.map((e) => e.type),
    ['ADDED', 'MODIFIED'],
    'the change is seen',
  );
  t.equal(events[1].object.data.a, '2');
  controller.abort();
  await eventually('the upstream watch to close', async () => namespacedConfigMapWatchers() <= before, 30_000, 200);
  t.pass('the upstream watch closed after the client left');
  t.equal((await api('GET', `/api/v1/configmaps/${ns}/watched`)).status, 200, 'the gateway is fine afterwards');

  const listWatch = await fetch(`${gw.url}/api/v1/configmaps/${ns}?watch=true&labelSelector=stream%3Dyes`, {
    headers: H,
  });
  const got = readEvents(listWatch.body!, (e) => e.type === 'ADDED');
  t.equal(
    kubectl(
      target,
      ['create', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'streamed', namespace: ns, labels: { stream: 'yes' } },
      }),
    ).status,
    0,
  );
  t.equal((await got)[0].object.metadata.name, 'streamed', 'a collection watch with a selector');
  await listWatch.body!.cancel();
});

t.test('patches of each type, dry run and field manager', async (t) => {
  t.equal(kube('create', 'configmap', 'patched', '-n', ns, '--from-literal=a=1').status, 0);
  const path = `/api/v1/configmaps/${ns}/patched`;
  const strategic = await api('PATCH', path, { body: { data: { b: '2' } } });
  t.equal(strategic.status, 200, strategic.text);
  t.same(strategic.body.data, { a: '1', b: '2' }, 'strategic merge (no patchType)');
  const merge = await api('PATCH', `${path}?patchType=merge`, { body: { data: { a: null } } });
  t.same(merge.body.data, { b: '2' }, 'JSON merge patch removes with null');
  const json = await api('PATCH', `${path}?patchType=json`, {
    body: [
      { op: 'add', path: '/data/c', value: '3' },
      { op: 'test', path: '/data/b', value: '2' },
    ],
  });
  t.equal(json.status, 200, json.text);
  t.same(json.body.data, { b: '2', c: '3' }, 'JSON patch');
  const failedTest = await api('PATCH', `${path}?patchType=json`, {
    body: [
      { op: 'test', path: '/data/b', value: 'nope' },
      { op: 'remove', path: '/data/b' },
    ],
  });
  t.equal(failedTest.status, 422, "a failing test operation is the cluster's 422");
  const badJson = await api('PATCH', `${path}?patchType=json`, {
    body: [{ op: 'replace', path: 'data/b', value: 'x' }],
  });
  t.equal(badJson.status, 400);
  t.match(badJson.body.error, /invalid JSON patch/);
  const applyYaml = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: patched\ndata:\n  owner: kiteline-test\n';
  const apply = await api('PATCH', `${path}?patchType=apply&fieldManager=kl-test`, {
    raw: applyYaml,
    headers: { 'content-type': 'application/apply-patch+yaml' },
  });
  t.equal(apply.status, 200, apply.text);
  t.equal(apply.body.data.owner, 'kiteline-test', 'server-side apply from YAML');
  t.ok(
    apply.body.metadata.managedFields.some((f: any) => f.manager === 'kl-test' && f.operation === 'Apply'),
    'fieldManager passes through',
  );
  const noManager = await api('PATCH', `${path}?patchType=apply`, { body: { apiVersion: 'v1', kind: 'ConfigMap' } });
  t.equal(noManager.status, 400);
  const unknownType = await api('PATCH', `${path}?patchType=yaml`, { body: {} });
  t.equal(unknownType.status, 400);
  t.same(
    JSON.parse(kube('get', 'configmap', 'patched', '-n', ns, '-o', 'json').stdout).data,
    { b: '2', c: '3', owner: 'kiteline-test' },
    'refused patches changed nothing',
  );

  const dry = await api('POST', `/api/v1/configmaps/${ns}?dryRun=All`, { body: { metadata: { name: 'dry' } } });
  t.equal(dry.status, 201);
  t.notOk(exists('configmap', 'dry'), 'dryRun=All creates nothing');
  const dryPatch = await api('PATCH', `${path}?patchType=merge&dryRun=All`, { body: { data: { b: 'dry' } } });
  t.equal(dryPatch.body.data.b, 'dry');
  t.equal(
    kube('get', 'configmap', 'patched', '-n', ns, '-o', 'jsonpath={.data.b}').stdout,
    '2',
    'dry-run patch changed nothing',
  );
  const managed = await api('POST', `/api/v1/configmaps/${ns}?fieldManager=creator-1`, {
    body: { metadata: { name: 'managed' }, data: { k: 'v' } },
  });
  t.ok(
    managed.body.metadata.managedFields.some((f: any) => f.manager === 'creator-1'),
    'fieldManager on create',
  );
  const dryDelete = await api('DELETE', `/api/v1/configmaps/${ns}/managed?dryRun=All`);
  t.ok(dryDelete.status === 200 || dryDelete.status === 202, dryDelete.text);
  t.ok(exists('configmap', 'managed'), 'dry-run delete deleted nothing');
});

const deploymentBody = (name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'web', image: 'registry.invalid/web:1' }] },
    },
  },
});

const replicaSets = (app: string) =>
  JSON.parse(kube('get', 'replicasets', '-n', ns, '-l', `app=${app}`, '-o', 'json').stdout).items as any[];

t.test("Deployments: restart by PATCH and by Kite's PUT roll out new ReplicaSets", async (t) => {
  const created = await api('POST', `/api/v1/deployments/${ns}`, { body: deploymentBody('web') });
  t.equal(created.status, 201, created.text);
  await eventually('the first ReplicaSet', async () => replicaSets('web').length === 1, 60_000, 200);
  const restartedAt = new Date().toISOString();
  const restart = await api('PATCH', `/api/v1/deployments/${ns}/web`, {
    body: { spec: { template: { metadata: { annotations: { 'kiteline.io/restartedAt': restartedAt } } } } },
  });
  t.equal(restart.status, 200, restart.text);
  t.equal(restart.body.spec.template.metadata.annotations['kiteline.io/restartedAt'], restartedAt);
  const afterPatch = await eventually(
    'a second ReplicaSet',
    async () => {
      const sets = replicaSets('web');
      return sets.length === 2 ? sets : undefined;
    },
    60_000,
    200,
  );
  t.ok(
    afterPatch.some((rs) => rs.spec.template.metadata.annotations?.['kiteline.io/restartedAt'] === restartedAt),
    'the new ReplicaSet carries the annotation',
  );

  // Kite's web UI: a full PUT of the fetched object with its own annotation.
  const current = await api('GET', `/api/v1/deployments.apps/${ns}/web`);
  t.equal(current.status, 200, '<plural>.<group> works for built-in kinds too');
  current.body.spec.template.metadata.annotations['kite.kubernetes.io/restartedAt'] = new Date().toISOString();
  const put = await api('PUT', `/api/v1/deployments/${ns}/web`, { body: current.body });
  t.equal(put.status, 200, put.text);
  await eventually('a third ReplicaSet', async () => replicaSets('web').length === 3, 60_000, 200);
  t.pass("Kite's restart rolled out too");
});

t.test('DELETE: foreground waits for dependents, orphan keeps them', async (t) => {
  t.equal((await api('POST', `/api/v1/deployments/${ns}`, { body: deploymentBody('fg') })).status, 201);
  t.equal((await api('POST', `/api/v1/deployments/${ns}`, { body: deploymentBody('orphan') })).status, 201);
  await eventually(
    'ReplicaSets of both',
    async () => replicaSets('fg').length === 1 && replicaSets('orphan').length === 1,
    60_000,
    200,
  );

  // The controller manager's garbage collector deletes the dependents first; on a busy machine
  // that has taken more than the default minute, so this delete may wait longer.
  const foreground = await api('DELETE', `/api/v1/deployments/${ns}/fg?timeoutSeconds=300`);
  t.equal(foreground.status, 200, foreground.text);
  t.same(foreground.body, { message: `deployments ${ns}/fg deleted` });
  t.equal(replicaSets('fg').length, 0, 'foreground: the ReplicaSet was gone before the Deployment');
  t.notOk(exists('deployment', 'fg'));

  const orphan = await api('DELETE', `/api/v1/deployments/${ns}/orphan?cascade=false`);
  t.equal(orphan.status, 200, orphan.text);
  t.notOk(exists('deployment', 'orphan'));
  const left = replicaSets('orphan');
  t.equal(left.length, 1, 'orphan: the ReplicaSet stays');
  t.notOk(left[0].metadata.ownerReferences?.length, 'and no longer has an owner');
});

t.test('DELETE: force, wait=false and the 504 when waiting runs out', async (t) => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'stuck' },
    spec: { nodeName: 'no-such-node', containers: [{ name: 'c', image: 'registry.invalid/c:1' }] },
  };
  t.equal((await api('POST', `/api/v1/pods/${ns}`, { body: pod })).status, 201);
  const graceful = await api('DELETE', `/api/v1/pods/${ns}/stuck?wait=false`);
  t.equal(graceful.status, 200, graceful.text);
  t.ok(graceful.body.metadata.deletionTimestamp, "wait=false answers with the cluster's answer: the terminating pod");
  t.ok(exists('pod', 'stuck'), 'a bound pod waits for its kubelet');
  const forced = await api('DELETE', `/api/v1/pods/${ns}/stuck?force=true`);
  t.equal(forced.status, 200, forced.text);
  t.notOk(exists('pod', 'stuck'), 'force: grace period 0, gone at once');

  t.equal(
    kubectl(
      target,
      ['create', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'held', namespace: ns, finalizers: ['kiteline.io/test-hold'] },
      }),
    ).status,
    0,
  );
  const timedOut = await api('DELETE', `/api/v1/configmaps/${ns}/held?timeoutSeconds=1`);
  t.equal(timedOut.status, 504);
  t.match(timedOut.body, { reason: 'Timeout', code: 504, error: /deletion of configmaps .*\/held still in progress/ });
  const held = JSON.parse(kube('get', 'configmap', 'held', '-n', ns, '-o', 'json').stdout);
  t.ok(held.metadata.deletionTimestamp, 'the deletion goes on in the cluster');
  const release = await api('PATCH', `/api/v1/configmaps/${ns}/held?patchType=json`, {
    body: [{ op: 'remove', path: '/metadata/finalizers' }],
  });
  t.equal(release.status, 200, release.text);
  await eventually('the released ConfigMap to go', async () => !exists('configmap', 'held'), 60_000, 200);
  t.pass('gone once the finalizer is removed');
  const missing = await api('DELETE', `/api/v1/configmaps/${ns}/held`);
  t.equal(missing.status, 404, 'deleting what is gone is 404');
});

t.test('Namespaces and Nodes: cluster-scoped kinds with _all', async (t) => {
  const name = uniqueName('ns');
  const created = await api('POST', '/api/v1/namespaces/_all', {
    raw: `metadata:\n  name: ${name}\n`,
    headers: { 'content-type': 'application/yaml' },
  });
  t.equal(created.status, 201, created.text);
  t.equal((await api('GET', `/api/v1/namespaces/_all/${name}`)).body.metadata.name, name);
  const listed = await api('GET', '/api/v1/namespaces/_all');
  t.ok(listed.body.items.some((i: any) => i.metadata.name === name));
  t.ok(
    (await api('GET', '/api/v1/namespaces')).body.items.some((i: any) => i.metadata.name === ns),
    'no second segment',
  );
  const wrong = await api('GET', `/api/v1/namespaces/${name}`);
  t.equal(wrong.status, 400, 'a namespace segment on a cluster-scoped kind');
  t.match(wrong.body.error, /cluster-scoped: use \/api\/v1\/namespaces\/_all/);
  const withNs = await api('POST', '/api/v1/namespaces/_all', {
    body: { metadata: { name: 'x', namespace: 'default' } },
  });
  t.equal(withNs.status, 400);
  const gone = await api('DELETE', `/api/v1/namespaces/_all/${name}`);
  t.equal(gone.status, 200, gone.text);
  t.equal(kube('get', 'namespace', name).status === 0, false, 'the namespace controller finished before the answer');

  const node = uniqueName('node');
  const nodeCreated = await api('POST', '/api/v1/nodes/_all', {
    body: { metadata: { name: node, labels: { tier: 'test' } } },
  });
  t.equal(nodeCreated.status, 201, nodeCreated.text);
  const nodes = await api('GET', '/api/v1/nodes/_all?labelSelector=tier%3Dtest');
  t.ok(nodes.body.items.some((i: any) => i.metadata.name === node));
  const labelled = await api('PATCH', `/api/v1/nodes/_all/${node}?patchType=merge`, {
    body: { metadata: { labels: { zone: 'a' } } },
  });
  t.equal(labelled.body.metadata.labels.zone, 'a');
  t.equal((await api('GET', `/api/v1/nodes/default/${node}`)).status, 400);
  t.equal((await api('DELETE', `/api/v1/nodes/_all/${node}`)).status, 200);
  t.notOk(kube('get', 'node', node).status === 0);
});

t.test('custom resources: all six routes through <plural>.<group>', async (t) => {
  const group = `${uniqueName('g')}.kiteline-test.io`;
  installWidgetCrd(t, target, group);
  const R = `/api/v1/widgets.${group}/${ns}`;

  const created = await api('POST', R, { body: { metadata: { name: 'w1' }, spec: { size: 1, tags: ['a'] } } });
  t.equal(created.status, 201, `usable as soon as established: ${created.text}`);
  t.equal(created.body.apiVersion, `${group}/v1`, 'apiVersion and kind filled from discovery');
  t.equal(created.body.kind, 'Widget');
  const listed = await api('GET', R);
  t.same(
    listed.body.items.map((i: any) => i.metadata.name),
    ['w1'],
  );
  const got = await api('GET', `${R}/w1`);
  t.equal(got.body.spec.size, 1);
  const replaced = await api('PUT', `${R}/w1`, { body: { ...got.body, spec: { size: 2, tags: ['a'] } } });
  t.equal(replaced.status, 200, replaced.text);
  const merged = await api('PATCH', `${R}/w1?patchType=merge`, { body: { spec: { color: 'red' } } });
  t.same(merged.body.spec, { size: 2, tags: ['a'], color: 'red' });
  const jsonPatched = await api('PATCH', `${R}/w1?patchType=json`, {
    body: [{ op: 'add', path: '/spec/tags/-', value: 'b' }],
  });
  t.same(jsonPatched.body.spec.tags, ['a', 'b']);
  const applied = await api('PATCH', `${R}/w1?patchType=apply&fieldManager=kl-test&force=true`, {
    body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'w1' }, spec: { owner: 'me' } },
  });
  t.equal(applied.status, 200, applied.text);
  t.equal(applied.body.spec.owner, 'me');
  const strategic = await api('PATCH', `${R}/w1`, { body: { spec: { size: 3 } } });
  t.equal(strategic.status, 415, "strategic merge on a custom resource: the cluster's 415");
  t.equal(strategic.body.reason, 'UnsupportedMediaType');
  t.equal(
    kubectl(target, ['get', `widgets.${group}`, 'w1', '-n', ns, '-o', 'jsonpath={.spec.size}']).stdout,
    '2',
    'unchanged by the refused patch',
  );
  const invalidName = await api('GET', `/api/v1/widgets.${group}/_all/w1`);
  t.equal(invalidName.status, 400, 'a name under _all on a namespaced kind');
  const all = await api('GET', `/api/v1/widgets.${group}/_all`);
  t.equal(all.body.items.length, 1, '_all lists across namespaces');
  const deleted = await api('DELETE', `${R}/w1`);
  t.equal(deleted.status, 200, deleted.text);
  t.equal((await api('GET', `${R}/w1`)).status, 404);
});

t.test('RBAC: verbs, namespaces written, canonical resource names', async (t) => {
  const reader = uniqueName('cm-reader');
  await createRole(gw, admin, {
    name: reader,
    clusters: [CLUSTER],
    namespaces: [ns],
    resources: ['configmaps'],
    verbs: ['get', 'list', 'create'],
  });
  const alice = await apiKeyWithRoles(gw, admin, uniqueName('alice'), [reader]);
  const as = (method: string, path: string, body?: unknown) =>
    call(gw.url, method, path, { body, headers: { ...alice.headers, 'x-cluster-name': CLUSTER } });

  t.equal((await as('GET', `/api/v1/configmaps/${ns}`)).status, 200, 'list in her namespace');
  const everywhere = await as('GET', '/api/v1/configmaps/_all');
  t.equal(everywhere.status, 403, 'all namespaces are authorized as _all');
  t.match(everywhere.body.error, /may not list configmaps across all namespaces on cluster/);
  const secrets = await as('GET', `/api/v1/secrets/${ns}`);
  t.equal(secrets.status, 403);
  t.match(secrets.body, { reason: 'Forbidden', error: /may not list secrets in namespace/ });
  const watch = await as('GET', `/api/v1/configmaps/${ns}?watch=true`);
  t.equal(watch.status, 403, 'watch is its own verb');
  t.equal(
    (await as('POST', `/api/v1/configmaps/${ns}`, { metadata: { name: 'by-alice' } })).status,
    201,
    'create in her namespace',
  );
  const elsewhere = await as('POST', '/api/v1/configmaps/_all', { metadata: { name: 'sneaky', namespace: 'default' } });
  t.equal(elsewhere.status, 403, 'the namespace written is the one checked');
  t.match(elsewhere.body.error, /may not create configmaps in namespace default/);
  t.notOk(kube('get', 'configmap', 'sneaky', '-n', 'default').status === 0, 'nothing written');
  t.equal(
    (await as('PATCH', `/api/v1/configmaps/${ns}/by-alice?patchType=merge`, { data: { a: 'b' } })).status,
    403,
    'no patch verb',
  );
  t.equal((await as('DELETE', `/api/v1/configmaps/${ns}/by-alice`)).status, 403, 'no delete verb');
  t.ok(exists('configmap', 'by-alice'), 'denied delete deleted nothing');
  t.equal(
    (await as('GET', '/api/v1/overview')).status,
    403,
    'the overview needs list on nodes, pods, namespaces, services',
  );

  const noDeploy = uniqueName('no-deploy');
  await createRole(gw, admin, {
    name: noDeploy,
    clusters: ['*'],
    namespaces: ['*'],
    resources: ['*', '!deployments'],
    verbs: ['*'],
  });
  const bob = await apiKeyWithRoles(gw, admin, uniqueName('bob'), [noDeploy]);
  const asBob = (path: string) => call(gw.url, 'GET', path, { headers: { ...bob.headers, 'x-cluster-name': CLUSTER } });
  t.equal((await asBob(`/api/v1/configmaps/${ns}`)).status, 200);
  t.equal((await asBob(`/api/v1/deployments/${ns}`)).status, 403);
  t.equal(
    (await asBob(`/api/v1/deployments.apps/${ns}`)).status,
    403,
    'spelling the group out does not escape !deployments',
  );
});

t.test("impersonation: the target cluster's RBAC sees the caller", async (t) => {
  const impersonating = uniqueName('alpha-imp');
  await addReadyCluster(gw, admin, { name: impersonating, config: targetConfig, impersonate: true });
  const botName = uniqueName('bot');
  const bot = await apiKeyWithRoles(gw, admin, botName, ['admin']);
  const asBot = (cluster: string, extra: Record<string, string> = {}) =>
    call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, {
      headers: { ...bot.headers, 'x-cluster-name': cluster, ...extra },
    });

  const denied = await asBot(impersonating);
  t.equal(denied.status, 403, 'kiteline allows, the cluster does not know the bot');
  t.equal(denied.body.reason, 'Forbidden');
  // API keys are impersonated as "kiteline:apikey:<name>", users as "kiteline:<username>".
  t.match(
    denied.body.error,
    new RegExp(`User "kiteline:apikey:${botName}" cannot list resource "configmaps"`),
    'the cluster saw the caller, not kiteline',
  );
  t.equal(
    kube(
      'create',
      'rolebinding',
      `${botName}-view`,
      '--clusterrole=view',
      `--user=kiteline:apikey:${botName}`,
      '-n',
      ns,
    ).status,
    0,
  );
  await eventually(
    'the RoleBinding to take effect',
    async () => (await asBot(impersonating)).status === 200,
    30_000,
    200,
  );
  t.pass('allowed once the target grants the user');
  const groupBound = await call(gw.url, 'GET', `/api/v1/secrets/${ns}`, {
    headers: { ...bot.headers, 'x-cluster-name': impersonating },
  });
  t.equal(groupBound.status, 403, 'view does not include secrets');
  t.equal(
    kube('create', 'rolebinding', `${botName}-group`, '--clusterrole=edit', '--group=kiteline:role:admin', '-n', ns)
      .status,
    0,
  );
  await eventually(
    'the group binding to take effect',
    async () =>
      (
        await call(gw.url, 'GET', `/api/v1/secrets/${ns}`, {
          headers: { ...bot.headers, 'x-cluster-name': impersonating },
        })
      ).status === 200,
    30_000,
    200,
  );
  t.pass('Impersonate-Group carries kiteline:role:<role>');

  const smuggled = await asBot(CLUSTER, {
    'impersonate-user': 'nobody-at-all',
    'impersonate-group': 'system:unauthenticated',
  });
  t.equal(smuggled.status, 200, 'client Impersonate-* headers are never forwarded');
});

t.test('cluster selection by header, query and cookie', async (t) => {
  const viaQuery = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}?x-cluster-name=${CLUSTER}`, {
    headers: admin.headers,
  });
  t.equal(viaQuery.status, 200);
  const viaCookie = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, {
    headers: { ...admin.headers, cookie: `x-cluster-name=${CLUSTER}` },
  });
  t.equal(viaCookie.status, 200);
  const viaDefault = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, { headers: admin.headers });
  t.equal(viaDefault.status, 200, 'the default cluster');
  const unknown = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, {
    headers: { ...admin.headers, 'x-cluster-name': 'nope' },
  });
  t.equal(unknown.status, 404);
  t.same(unknown.body, { error: 'cluster not found: nope', reason: 'NotFound', code: 404 });
  const headerWins = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}?x-cluster-name=nope`, {
    headers: { ...admin.headers, 'x-cluster-name': CLUSTER },
  });
  t.equal(headerWins.status, 200, 'the header wins over the query');
});

t.test('overview counts from the selected cluster', async (t) => {
  const node = uniqueName('ready-node');
  const now = new Date().toISOString();
  const body = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: node },
    status: {
      allocatable: { cpu: '2', memory: '1Gi' },
      capacity: { cpu: '2', memory: '1Gi' },
      conditions: [{ type: 'Ready', status: 'True', reason: 'Test', lastHeartbeatTime: now, lastTransitionTime: now }],
    },
  };
  t.equal(kubectl(target, ['create', '-f', '-'], JSON.stringify(body)).status, 0);
  t.teardown(() => {
    kubectl(target, ['delete', 'node', node]);
  });
  const res = await api('GET', '/api/v1/overview');
  t.equal(res.status, 200, res.text);
  t.match(res.headers.get('content-type'), /application\/json/);
  const o = res.body;
  t.equal(o.prometheusEnabled, false);
  t.ok(o.totalNodes >= 1 && o.readyNodes >= 1, 'the ready node counts');
  t.ok(o.resource.cpu.allocatable >= 2000, 'cpu in millicores');
  t.ok(o.resource.memory.allocatable >= 1024 ** 3 * 1000, 'memory in milli-bytes, as Kite reports it');
  t.ok(o.totalNamespaces >= 4, 'default, kube-system, kube-public, kube-node-lease and more');
  t.ok(o.totalPods >= 1, 'the Deployment pods of this file (Pending: no kubelet)');
  t.ok(o.runningPods <= o.totalPods);
  t.ok(o.totalServices >= 1, 'the kubernetes Service');
  t.same(Object.keys(o.resource.cpu).sort(), ['allocatable', 'limited', 'requested']);
});
