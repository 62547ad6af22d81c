// Issue 34: Kite's monitoring on a real Prometheus (Debian's), scraping the target-a node's kubelet
// and cAdvisor. A cluster's prometheusURL (checked, shown to admins) turns the overview's
// prometheusEnabled on; the node and pod charts' routes answer Kite's shapes with the node's and a
// running pod's series; the PromQL passthrough answers Prometheus' own JSON. Then as an attacker:
// the viewer, a role limited to namespace A, a role granting only prometheus/query in A, and
// anonymous callers, each route by role; PromQL written into pod, container, instance and label
// selector values is a 400; a limited caller's query never reads another namespace's series
// (selectors rewritten), nor series without a namespace; kiteline's install namespace on its own
// host stays closed.
import t from 'tap';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  type Caller,
  testKubeconfig,
} from './helpers/fixtures.js';
import { call, startGateway, type HttpResponse } from './helpers/gateway.js';
import { startPrometheus } from './helpers/prometheus.js';
import { busyboxPod, namespacedKubectl } from './helpers/workload-streams.js';
import { freePort } from '../src/controlplane/ports.js';

const target = await testControlPlane('target-a');
await testControlPlane('target-b');
const NODE = target.node!.name;
const gw = await startGateway(t, { logName: 'prometheus' });
const admin = await bootstrapAdmin(gw);
const clusterId = await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
const downId = await addReadyCluster(gw, admin, { name: 'down', config: testKubeconfig('target-b') });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

// Two namespaces with a pod each: a little CPU work, so the series move.
const A = uniqueName('prom-a');
const B = uniqueName('prom-b');
const work = ['sh', '-c', 'while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done'];
for (const [ns, pod] of [
  [A, 'web-1'],
  [B, 'other-1'],
] as const) {
  const k = namespacedKubectl(target.kubeconfigPath, ns);
  await k(['create', 'namespace', ns]);
  t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
  await k(['apply', '-f', '-'], JSON.stringify(busyboxPod(pod, { app: pod }, work)));
  await k(['wait', '--for=condition=Ready', `pod/${pod}`, '--timeout=120s']);
}

const prom = await startPrometheus(t, target);
for (const [ns, pod] of [
  [A, 'web-1'],
  [B, 'other-1'],
])
  await eventually(
    `cAdvisor's series of ${ns}/${pod} in Prometheus`,
    async () =>
      (await prom.query(`rate(container_cpu_usage_seconds_total{namespace="${ns}",pod="${pod}",container="main"}[1m])`))
        .length > 0,
    120_000,
    1000,
  );

const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
const LIMITED_ROLE = uniqueName('only-a');
await createRole(gw, admin, { name: LIMITED_ROLE, clusters: ['*'], namespaces: [A], resources: ['*'], verbs: ['*'] });
const limited = await apiKeyWithRoles(gw, admin, uniqueName('limited'), [LIMITED_ROLE]);
const QUERY_ROLE = uniqueName('query-a');
await createRole(gw, admin, {
  name: QUERY_ROLE,
  clusters: ['*'],
  namespaces: [A],
  resources: ['prometheus/query'],
  verbs: ['create'],
});
const querier = await apiKeyWithRoles(gw, admin, uniqueName('querier'), [QUERY_ROLE]);
const NOWHERE_ROLE = uniqueName('nowhere');
await createRole(gw, admin, {
  name: NOWHERE_ROLE,
  clusters: ['*'],
  namespaces: [uniqueName('no-such-namespace')],
  resources: ['*'],
  verbs: ['*'],
});
const nowhere = await apiKeyWithRoles(gw, admin, uniqueName('nowhere'), [NOWHERE_ROLE]);
const anonymous: Caller = { key: '', headers: {} };

function get(caller: Caller, path: string, cluster = 'a'): Promise<HttpResponse> {
  return call(gw.url, 'GET', path, { headers: { 'x-cluster-name': cluster, ...caller.headers } });
}

const usage = (query: Record<string, string>) =>
  `/api/v1/prometheus/resource-usage-history?${new URLSearchParams(query).toString()}`;
const podMetrics = (ns: string, pod: string, query: Record<string, string> = {}) =>
  `/api/v1/prometheus/pods/${encodeURIComponent(ns)}/${encodeURIComponent(pod)}/metrics?${new URLSearchParams({
    duration: '30m',
    ...query,
  }).toString()}`;
const instant = (query: string) => `/api/v1/prometheus/query?${new URLSearchParams({ query }).toString()}`;
const range = (query: string) => {
  const end = Math.floor(Date.now() / 1000);
  return `/api/v1/prometheus/query_range?${new URLSearchParams({
    query,
    start: String(end - 300),
    end: String(end),
    step: '15s',
  }).toString()}`;
};

type Point = { timestamp: string; value: number };
type Result = Array<{ metric: Record<string, string> }>;

t.test('prometheusURL: checked, shown to admins only, and it turns the overview charts on', async (t) => {
  const before = await get(admin, '/api/v1/overview');
  t.equal(before.status, 200, before.text);
  t.equal(before.body.prometheusEnabled, false, 'no prometheusURL: prometheusEnabled false');
  const none = await get(admin, usage({ duration: '30m' }));
  t.equal(none.status, 503, 'no Prometheus configured: 503');
  t.match(none.body.error, /Prometheus is not configured for cluster a/);

  for (const bad of ['ftp://x', 'not a url', 'http://user:secret@127.0.0.1:9090', 'http://169.254.169.254/']) {
    const res = await call(gw.url, 'PUT', `/api/v1/admin/clusters/${clusterId}`, {
      headers: admin.headers,
      body: { prometheusURL: bad },
    });
    t.equal(res.status, 400, `prometheusURL ${bad}: 400 (${res.body?.error})`);
  }
  const set = await call(gw.url, 'PUT', `/api/v1/admin/clusters/${clusterId}`, {
    headers: admin.headers,
    body: { prometheusURL: `${prom.url}/` }, // a trailing slash, as people write it
  });
  t.equal(set.status, 200, set.text);
  const listed = await get(admin, '/api/v1/admin/clusters/');
  t.equal(listed.body.find((c: { id: number }) => c.id === clusterId).prometheusURL, `${prom.url}/`, 'admins see it');
  const summary = await get(viewer, '/api/v1/clusters');
  t.notOk(JSON.stringify(summary.body).includes(prom.url), 'the cluster list of a viewer does not show it');
  const after = await eventually('prometheusEnabled', async () => {
    const res = await get(admin, '/api/v1/overview');
    return res.body?.prometheusEnabled === true ? res : undefined;
  });
  t.equal(after.status, 200);
});

t.test("resource-usage-history: the node's and the cluster's series, Kite's shape", async (t) => {
  const queries: Array<Record<string, string>> = [{ duration: '30m', instance: NODE }, { duration: '1h' }];
  for (const query of [...queries, { duration: '24h', instance: NODE }]) {
    const res = await eventually(`usage ${JSON.stringify(query)}`, async () => {
      const r = await get(admin, usage(query));
      return r.status === 200 && r.body.cpu.length > 0 && r.body.networkIn.length > 0 ? r : undefined;
    });
    t.same(Object.keys(res.body).sort(), ['cpu', 'diskRead', 'diskWrite', 'memory', 'networkIn', 'networkOut']);
    t.equal(res.body.diskRead, null, "diskRead is null, as Kite's");
    for (const series of ['cpu', 'memory', 'networkIn', 'networkOut'] as const) {
      const points = res.body[series] as Point[];
      t.ok(points.length > 0, `${JSON.stringify(query)} ${series}: ${points.length} points`);
      t.ok(
        points.every((p) => !Number.isNaN(Date.parse(p.timestamp)) && Number.isFinite(p.value) && p.value >= 0),
        `${series}: timestamps and finite values`,
      );
    }
    const last = (s: 'cpu' | 'memory') => (res.body[s] as Point[]).at(-1)!.value;
    t.ok(last('cpu') > 0 && last('cpu') < 100, `cpu percent of the machine: ${last('cpu')}`);
    t.ok(last('memory') > 0 && last('memory') < 100, `memory percent of the machine: ${last('memory')}`);
  }
  const unknown = await get(admin, usage({ duration: '30m', instance: 'no-such-node' }));
  t.equal(unknown.status, 200, unknown.text);
  t.same([unknown.body.cpu, unknown.body.memory], [[], []], 'an unknown node: empty series');
  const bad = await get(admin, usage({ duration: '2h' }));
  t.equal(bad.status, 400, 'a duration Kite does not offer: 400');
});

t.test("pod metrics: a running pod's series, by container and by name prefix, Kite's shape", async (t) => {
  const res = await eventually(
    'pod metrics',
    async () => {
      const r = await get(admin, podMetrics(A, 'web-1'));
      // The network series needs two scrapes of the pod's sandbox, which can come a scrape after
      // its containers' CPU series: wait for both.
      return r.status === 200 && r.body.cpu.length > 0 && r.body.networkIn.length > 0 ? r : undefined;
    },
    90_000,
    1000,
  );
  t.same(Object.keys(res.body).sort(), [
    'cpu',
    'diskRead',
    'diskWrite',
    'fallback',
    'memory',
    'networkIn',
    'networkOut',
  ]);
  t.equal(res.body.fallback, false);
  for (const series of ['cpu', 'memory', 'networkIn', 'networkOut', 'diskRead', 'diskWrite'] as const)
    t.type(res.body[series], Array, `${series} is a list`);
  t.ok((res.body.memory as Point[]).at(-1)!.value > 0, 'memory in MiB, above zero');
  t.ok((res.body.networkIn as Point[]).length > 0, "the pod's network series");
  const points = res.body.cpu as Point[];
  t.ok(points.length >= 100, `30m at 15 s: front-filled with zeros from the start (${points.length} points)`);
  t.equal(points[0].value, 0, 'the front fill is zero');

  const main = await get(admin, podMetrics(A, 'web-1', { container: 'main' }));
  t.ok(main.body.cpu.length > 0, 'container main: its series');
  const other = await get(admin, podMetrics(A, 'web-1', { container: 'nothing' }));
  t.equal(other.status, 200);
  t.same(other.body.cpu, [], 'a container the pod does not have: no series');
  const prefix = await get(admin, podMetrics(A, 'web', { labelSelector: 'app=web-1' }));
  t.ok(prefix.body.cpu.length > 0, "a workload's name prefix (Kite's Deployment tab): the pods' series");
  const dot = await get(admin, podMetrics(A, 'web.1'));
  t.same(dot.body.cpu, [], 'a "." in the name is a dot, not any character (web.1 is not web-1)');
  const elsewhere = await get(admin, podMetrics(A, 'other-1'));
  t.same(elsewhere.body.cpu, [], "another namespace's pod of that name is not in namespace A's answer");
});

t.test("PromQL passthrough: Prometheus' own JSON for admins", async (t) => {
  const up = await get(admin, instant('up'));
  t.equal(up.status, 200, up.text);
  t.match(up.headers.get('content-type'), /^application\/json/);
  t.equal(up.body.status, 'success');
  t.equal(up.body.data.resultType, 'vector');
  t.same((up.body.data.result as Result).map((r) => r.metric.job).sort(), ['cadvisor', 'kubelet']);
  const r = await get(admin, range(`sum(container_memory_usage_bytes{namespace="${B}"})`));
  t.equal(r.status, 200, r.text);
  t.equal(r.body.data.resultType, 'matrix');
  t.ok(r.body.data.result.length > 0, "an admin reads any namespace's series");
  const at = await get(admin, `${instant('time()')}&time=1700000000`);
  t.same(at.body.data.result, [1700000000, '1700000000'], 'time is passed on');
  const badQuery = await get(admin, instant('sum(('));
  t.equal(badQuery.status, 400, `a query Prometheus refuses: 400 (${badQuery.body?.error})`);
  t.match(badQuery.body.error, /^Prometheus: /);
  const badStep = await get(admin, range('up').replace('step=15s', 'step=1h%3Bdrop'));
  t.equal(badStep.status, 400, 'a step that is not a duration: 400');
});

t.test('role by role: admin, viewer, a role limited to namespace A, a query-only role, anonymous', async (t) => {
  const routes = {
    nodeUsage: usage({ duration: '30m', instance: NODE }),
    clusterUsage: usage({ duration: '30m' }),
    podA: podMetrics(A, 'web-1'),
    podB: podMetrics(B, 'other-1'),
    query: instant('up'),
    queryRange: range('up'),
  };
  const expected: Record<string, [Caller, Record<keyof typeof routes, number>]> = {
    admin: [admin, { nodeUsage: 200, clusterUsage: 200, podA: 200, podB: 200, query: 200, queryRange: 200 }],
    // The viewer reads node and pod charts; running its own PromQL needs create on prometheus/query.
    viewer: [viewer, { nodeUsage: 200, clusterUsage: 200, podA: 200, podB: 200, query: 403, queryRange: 403 }],
    // Nodes are cluster-scoped: a namespace-limited role reads no node's usage.
    limited: [limited, { nodeUsage: 403, clusterUsage: 403, podA: 200, podB: 403, query: 200, queryRange: 200 }],
    querier: [querier, { nodeUsage: 403, clusterUsage: 403, podA: 403, podB: 403, query: 200, queryRange: 200 }],
    nowhere: [nowhere, { nodeUsage: 403, clusterUsage: 403, podA: 403, podB: 403, query: 403, queryRange: 403 }],
    anonymous: [anonymous, { nodeUsage: 401, clusterUsage: 401, podA: 401, podB: 401, query: 401, queryRange: 401 }],
  };
  for (const [who, [caller, codes]] of Object.entries(expected))
    for (const [route, path] of Object.entries(routes)) {
      const res = await get(caller, path);
      t.equal(res.status, codes[route as keyof typeof routes], `${who} ${route}: ${res.text.slice(0, 160)}`);
    }
});

t.test("a limited caller's PromQL reads its namespaces' series only", async (t) => {
  for (const [who, caller] of [
    ['limited', limited],
    ['querier', querier],
  ] as const) {
    const all = await get(caller, instant('container_memory_usage_bytes'));
    t.equal(all.status, 200, all.text);
    const series = all.body.data.result as Result;
    t.ok(series.length > 0, `${who}: the series of namespace A`);
    t.same([...new Set(series.map((s) => s.metric.namespace))], [A], `${who}: namespace A's only`);
    for (const attempt of [
      `container_memory_usage_bytes{namespace="${B}"}`,
      `{__name__="container_memory_usage_bytes",namespace=~".+"} unless {namespace="${A}"}`,
      `sum by (namespace) (rate(container_cpu_usage_seconds_total{namespace=~"${B}|${A}"}[1m]))` +
        ` and on () absent(nothing) # }{namespace="${B}"}`,
      'up',
      'machine_memory_bytes',
      `container_memory_usage_bytes offset 1m{namespace="${B}"}`,
    ]) {
      const res = await get(caller, instant(attempt));
      const result = res.status === 200 ? (res.body.data.result as Result) : [];
      t.ok(
        res.status === 400 || result.every((s) => s.metric.namespace === A || s.metric.namespace === undefined),
        `${who} ${attempt}: ${res.status}, nothing of another namespace`,
      );
      t.notOk(
        result.some((s) => s.metric.job !== undefined && s.metric.namespace === undefined),
        `${who} ${attempt}: no series without a namespace`,
      );
    }
    const b = await get(caller, range(`container_memory_usage_bytes{namespace="${B}"}`));
    t.equal(b.status, 200);
    t.same(b.body.data.result, [], `${who}: a range query for B's series finds none`);
    const upRange = await get(caller, range('up'));
    t.same(upRange.body.data.result, [], `${who}: series without a namespace are not read`);
    for (const refused of ['info(up)', 'up{', 'up # fine\n}', 'sum(']) {
      const res = await get(caller, instant(refused));
      t.equal(res.status, 400, `${who} ${JSON.stringify(refused)}: 400 (${res.body?.error})`);
    }
  }
});

t.test('PromQL in names is a 400, before any query runs', async (t) => {
  for (const [what, path] of [
    ['pod', podMetrics(A, 'x"}) or vector(1) #')],
    ['pod regex', podMetrics(A, '.*')],
    ['pod alternation', podMetrics(A, 'web|other')],
    ['namespace', podMetrics(`${A}"}`, 'web-1')],
    ['namespace regex', podMetrics(`${A}|${B}`, 'web-1')],
    ['container', podMetrics(A, 'web-1', { container: 'main"} or vector(1) #' })],
    ['container regex', podMetrics(A, 'web-1', { container: '.+' })],
    ['labelSelector', podMetrics(A, 'web-1', { labelSelector: 'app="x"} or vector(1)' })],
    ['instance', usage({ duration: '30m', instance: `${NODE}"} or vector(1) #` })],
    ['instance regex', usage({ duration: '30m', instance: '.+' })],
  ] as const) {
    const res = await get(admin, path);
    t.equal(res.status, 400, `${what}: 400 (${res.body?.error})`);
  }
});

t.test("kiteline's own namespace on its host cluster: 403 for everyone", async (t) => {
  const res = await get(admin, podMetrics(gw.namespace, 'kiteline'), 'self');
  t.equal(res.status, 403, res.text);
});

t.test('a Prometheus that does not answer: 502, quickly', async (t) => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const set = await call(gw.url, 'PUT', `/api/v1/admin/clusters/${downId}`, {
    headers: admin.headers,
    body: { prometheusURL: closed },
  });
  t.equal(set.status, 200, set.text);
  const res = await eventually('the new prometheusURL', async () => {
    const r = await get(admin, usage({ duration: '30m' }), 'down');
    return r.status !== 503 ? r : undefined;
  });
  t.equal(res.status, 502, res.text);
  t.match(res.body.error, /Prometheus of cluster down could not be reached/);
  t.notOk(res.text.includes(closed.slice('http://'.length)), 'the address itself is not in the message');
});
