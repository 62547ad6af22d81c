// Events of a running pod, and the node actions, on target-a's real node. The node is shared with
// other test files running at the same time, so: cordon windows are kept to seconds and the node is
// always uncordoned afterwards (teardown too); taints use PreferNoSchedule (never keeps anyone's
// pod off the node) and a key of our own, removed afterwards; drain is scoped with podSelector
// (kubectl drain --pod-selector) to this file's own pods, so no other test's pod is ever evicted.
// PodDisruptionBudgets and Evictions are policy/v1 (Kubernetes 1.21 and later).
import t from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const BUSYBOX = 'kiteline.local/busybox:1';
const gw = await startGateway(t, { logName: 'tools-nodes' });
const admin = await bootstrapAdmin(gw);
const cp = await testControlPlane('target-a');
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
const kc = cp.kubeconfigPath;
const node = cp.node!.name;
const ns = uniqueName('nodes');
const drainId = uniqueName('d');
const taintKey = `kiteline.test/${uniqueName('t')}`;
t.equal(kubectl(kc, ['create', 'namespace', ns]).status, 0);
t.teardown(() => kubectl(kc, ['delete', 'namespace', ns, '--wait=false']));
// Whatever happens: the shared node is schedulable again and carries none of our taints.
t.teardown(() => {
  kubectl(kc, ['uncordon', node]);
  kubectl(kc, ['taint', 'node', node, `${taintKey}-`]);
});

function k(args: string[], input?: string): string {
  const res = kubectl(kc, ['-n', ns, ...args], input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}
const nodeObject = () => JSON.parse(kubectl(kc, ['get', 'node', node, '-o', 'json']).stdout);
const post = (caller: Caller | undefined, action: string, body?: unknown, target = node) =>
  call(gw.url, 'POST', `/api/v1/nodes/_all/${target}/${action}`, {
    headers: caller?.headers ?? {},
    ...(body === undefined ? {} : { body }),
  });

const podTemplate = (app: string) => ({
  metadata: { labels: { app, drain: drainId } },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [{ name: app, image: BUSYBOX, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
  },
});
const deployment = (name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: podTemplate(name) },
});
k(
  ['apply', '-f', '-'],
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      deployment('free'),
      deployment('guarded'),
      {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'everywhere' },
        spec: { selector: { matchLabels: { app: 'everywhere' } }, template: podTemplate('everywhere') },
      },
      {
        apiVersion: 'policy/v1',
        kind: 'PodDisruptionBudget',
        metadata: { name: 'guarded' },
        spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } },
      },
    ],
  }),
);

let viewer: Caller;
let limited: Caller;

t.test('the events of a running pod, newest first', async (t) => {
  viewer = await apiKeyWithRoles(gw, admin, 'nodes-viewer', ['viewer']);
  await createRole(gw, admin, {
    name: 'nodes-elsewhere',
    clusters: ['*'],
    namespaces: ['kube-public'],
    resources: ['*'],
    verbs: ['*'],
  });
  limited = await apiKeyWithRoles(gw, admin, 'nodes-limited', ['nodes-elsewhere']);
  t.equal(kubectl(kc, ['-n', ns, 'rollout', 'status', 'deployment/free', '--timeout=120s']).status, 0);
  const pod = JSON.parse(k(['get', 'pods', '-l', 'app=free', '-o', 'json'])).items[0].metadata.name as string;
  const path = `/api/v1/events/resources?resource=pods&name=${pod}&namespace=${ns}`;
  const res = await eventually(
    'the pod to have its events',
    async () => {
      const r = await call(gw.url, 'GET', path, { headers: viewer.headers });
      const reasons = (r.body?.items ?? []).map((e: { reason: string }) => e.reason);
      return r.status === 200 && reasons.includes('Scheduled') && reasons.includes('Started') ? r : undefined;
    },
    60_000,
    500,
  );
  t.match(res.body, { apiVersion: 'v1', kind: 'EventList' });
  for (const e of res.body.items) t.match(e.involvedObject, { kind: 'Pod', name: pod, namespace: ns });
  const times = res.body.items.map((e: { lastTimestamp?: string; eventTime?: string }) =>
    Date.parse(e.lastTimestamp || e.eventTime || ''),
  );
  t.same(
    times,
    [...times].sort((a: number, b: number) => b - a),
    'newest first',
  );
  t.equal(
    new Set(res.body.items.map((e: { metadata: { uid: string } }) => e.metadata.uid)).size,
    res.body.items.length,
    'each event once (both APIs, merged by UID)',
  );

  t.equal((await call(gw.url, 'GET', path, { headers: limited.headers })).status, 403, 'a role for another namespace');
  t.equal((await call(gw.url, 'GET', path)).status, 401);
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/events/resources?resource=pods&namespace=${ns}`, { headers: admin.headers }))
      .status,
    400,
    'no name',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/events/resources?resource=pods&name=${pod}`, { headers: admin.headers }))
      .status,
    400,
    'a namespaced kind without namespace',
  );
  t.equal(
    (
      await call(gw.url, 'GET', `/api/v1/events/resources?resource=pods&name=gone&namespace=${ns}`, {
        headers: admin.headers,
      })
    ).status,
    404,
  );
  const nodeEvents = await call(gw.url, 'GET', `/api/v1/events/resources?resource=nodes&name=${node}&namespace=`, {
    headers: viewer.headers,
  });
  t.equal(nodeEvents.status, 200, "a cluster-scoped object's events, listed across namespaces");
  for (const e of nodeEvents.body.items) t.match(e.involvedObject, { kind: 'Node', name: node });
});

t.test('node actions: who may, and bad bodies', async (t) => {
  for (const [action, body] of [
    ['cordon', undefined],
    ['taint', { key: taintKey, effect: 'PreferNoSchedule' }],
    ['drain', { podSelector: `drain=${drainId}` }],
  ] as const) {
    t.equal((await post(undefined, action, body)).status, 401, `${action}: anonymous`);
    t.equal((await post(viewer, action, body)).status, 403, `${action}: the viewer`);
    t.equal((await post(limited, action, body)).status, 403, `${action}: a namespace-limited role`);
  }
  t.notOk(nodeObject().spec.unschedulable, 'nothing was cordoned');
  for (const [action, body] of [
    ['taint', { key: taintKey }],
    ['taint', { key: taintKey, effect: 'Sometimes' }],
    ['taint', { key: 'not a key!', effect: 'NoSchedule' }],
    ['taint', { key: taintKey, value: 'x'.repeat(64), effect: 'NoSchedule' }],
    ['untaint', {}],
    ['drain', { timeoutSeconds: 0 }],
    ['drain', { podSelector: `drain=${drainId}`, surprise: true }],
    ['drain', { force: 'yes please' }],
  ] as const) {
    const res = await post(admin, action, body);
    t.equal(res.status, 400, `${action} ${JSON.stringify(body)}: ${res.text.slice(0, 100)}`);
  }
  t.equal((await post(admin, 'cordon', undefined, 'no-such-node')).status, 404);
  t.notOk(nodeObject().spec.unschedulable);
  t.notOk(
    (nodeObject().spec.taints ?? []).some((x: { key: string }) => x.key === taintKey),
    'no taint of ours',
  );
});

t.test('cordon and uncordon (Kite sends a JSON content type and no body)', async (t) => {
  const raw = (action: string) =>
    fetch(`${gw.url}/api/v1/nodes/_all/${node}/${action}`, {
      method: 'POST',
      headers: { ...admin.headers, 'content-type': 'application/json' },
    });
  try {
    const cordoned = await raw('cordon');
    t.equal(cordoned.status, 200);
    t.same(await cordoned.json(), { message: `Node ${node} cordoned successfully`, node, unschedulable: true });
    t.equal(nodeObject().spec.unschedulable, true, 'the Node is unschedulable');
  } finally {
    const uncordoned = await raw('uncordon');
    t.equal(uncordoned.status, 200);
  }
  t.notOk(nodeObject().spec.unschedulable, 'schedulable again');
});

t.test('taint and untaint', async (t) => {
  try {
    const res = await post(admin, 'taint', { key: taintKey, value: 'one', effect: 'PreferNoSchedule' });
    t.equal(res.status, 200, res.text);
    t.match(res.body, { node, taint: { key: taintKey, value: 'one', effect: 'PreferNoSchedule' } });
    const again = await post(admin, 'taint', { key: taintKey, value: 'two', effect: 'PreferNoSchedule' });
    t.equal(again.status, 200);
    const ours = () => (nodeObject().spec.taints ?? []).filter((x: { key: string }) => x.key === taintKey);
    t.same(
      ours(),
      [{ key: taintKey, value: 'two', effect: 'PreferNoSchedule' }],
      'the same key and effect is replaced, not added',
    );
  } finally {
    const removed = await post(admin, 'untaint', { key: taintKey });
    t.equal(removed.status, 200, removed.text);
    t.same(removed.body, {
      message: `Taint with key '${taintKey}' removed from node ${node} successfully`,
      node,
      removedTaintKey: taintKey,
    });
  }
  t.notOk(
    (nodeObject().spec.taints ?? []).some((x: { key: string }) => x.key === taintKey),
    'gone from the Node',
  );
  t.equal((await post(admin, 'untaint', { key: taintKey })).status, 404, 'untaint of a taint that is not there');
});

t.test('drain, scoped to our pods: evicted, blocked by a PodDisruptionBudget, DaemonSet skipped', async (t) => {
  t.equal(kubectl(kc, ['-n', ns, 'rollout', 'status', 'deployment/guarded', '--timeout=120s']).status, 0);
  t.equal(kubectl(kc, ['-n', ns, 'rollout', 'status', 'daemonset/everywhere', '--timeout=120s']).status, 0);
  await eventually(
    'the budget to forbid disruptions',
    () => {
      const pdb = JSON.parse(k(['get', 'pdb', 'guarded', '-o', 'json']));
      return pdb.status?.currentHealthy === 1 && pdb.status?.disruptionsAllowed === 0;
    },
    60_000,
    250,
  );
  const podOf = (app: string) =>
    JSON.parse(k(['get', 'pods', '-l', `app=${app}`, '-o', 'json'])).items[0].metadata.name as string;
  const free = podOf('free');
  const guarded = podOf('guarded');
  const daemon = podOf('everywhere');

  // A pod without a controller: refused (without force) before anything changes.
  k([
    'run',
    'bare',
    `--image=${BUSYBOX}`,
    '--image-pull-policy=Never',
    `--labels=drain=${drainId}-bare`,
    '--',
    'sleep',
    '3600',
  ]);
  const refused = await post(admin, 'drain', { podSelector: `drain=${drainId}-bare`, timeoutSeconds: 5 });
  t.equal(refused.status, 400, refused.text);
  t.match(refused.body.error, /not managed by a controller.*set force.*nothing was changed/);
  t.notOk(nodeObject().spec.unschedulable, 'not cordoned');

  let res;
  try {
    res = await post(admin, 'drain', {
      podSelector: `drain=${drainId}`,
      timeoutSeconds: 5,
      gracePeriod: 1,
      ignoreDaemonsets: true,
      force: false,
      deleteLocalData: false,
    });
    t.equal(nodeObject().spec.unschedulable, true, 'the node was cordoned');
  } finally {
    t.equal((await post(admin, 'uncordon')).status, 200, 'uncordoned again');
  }
  t.equal(res.status, 504, `time ran out with a blocked pod: ${res.text}`);
  t.equal(res.body.reason, 'Timeout');
  const report = res.body.details;
  t.same(report.evicted, [{ namespace: ns, name: free }], 'the free pod was evicted');
  t.same(
    report.blocked.map((p: { name: string }) => p.name),
    [guarded],
    'the guarded pod was blocked',
  );
  t.match(report.blocked[0].reason, /disruption budget/i);
  t.same(report.skipped, [{ namespace: ns, name: daemon, reason: 'managed by a DaemonSet' }]);
  t.same(report.failed, []);
  t.equal(report.complete, false);
  t.match(report.options, { podSelector: `drain=${drainId}`, timeoutSeconds: 5, gracePeriod: 1 });
  t.ok(
    report.terminating.every((p: { name: string }) => p.name === free),
    'only the evicted pod may still be terminating',
  );
  await eventually(
    'the evicted pod to be gone',
    () => kubectl(kc, ['-n', ns, 'get', 'pod', free]).status === 1,
    60_000,
    500,
  );
  t.equal(kubectl(kc, ['-n', ns, 'get', 'pod', guarded]).status, 0, 'the guarded pod still runs');
  t.notOk(nodeObject().spec.unschedulable, 'the shared node is schedulable again');
});

t.test("a node of kiteline's host cluster that runs kiteline itself is never drained through it", async (t) => {
  await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });
  const host = await testControlPlane('host');
  const hostNode = host.node!.name;
  t.teardown(() => kubectl(host.kubeconfigPath, ['uncordon', hostNode]));
  // A stand-in for kiteline's pod: any pod of the install namespace on that node.
  const standIn = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'kiteline-stand-in', namespace: gw.namespace },
    spec: {
      nodeName: hostNode,
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'c', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
    },
  };
  t.equal(kubectl(host.kubeconfigPath, ['apply', '-f', '-'], JSON.stringify(standIn)).status, 0);
  t.teardown(() =>
    kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'delete', 'pod', 'kiteline-stand-in', '--wait=false']),
  );
  const res = await call(gw.url, 'POST', `/api/v1/nodes/_all/${hostNode}/drain`, {
    headers: { ...admin.headers, 'x-cluster-name': 'h' },
    body: { podSelector: 'kiteline.test/none=1', timeoutSeconds: 1 },
  });
  t.equal(res.status, 403, res.text);
  t.match(res.body.error, /runs kiteline itself/);
  t.notOk(
    JSON.parse(kubectl(host.kubeconfigPath, ['get', 'node', hostNode, '-o', 'json']).stdout).spec.unschedulable,
    'the host node was not cordoned',
  );
});
