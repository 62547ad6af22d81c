// GET /metrics against a real gateway and target cluster: who may read it, request counters by
// route/method/status/cluster, the upstream latency histogram, cluster readiness, cache sizes and
// login failures (issue 6 point 2, CONTRACT section 8).
import t from 'tap';
import { testPlaneVersion, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  registerCluster,
  testKubeconfig,
} from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const MAX_FAILURES = 3;
const gw = await startGateway(t, { logName: 'metrics', env: { KITELINE_LOGIN_MAX_FAILURES: String(MAX_FAILURES) } });
const admin = await bootstrapAdmin(gw);
const viewer = await apiKeyWithRoles(gw, admin, 'metrics-viewer', ['viewer']);
const CLUSTER = uniqueName('metrics');
await addReadyCluster(gw, admin, { name: CLUSTER, config: testKubeconfig('target-a'), isDefault: true });

/** The value of one sample (labels matched as a set), or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const open = line.indexOf('{');
    const close = line.lastIndexOf('}');
    const found: Record<string, string> = {};
    if (open === name.length) {
      for (const m of line.slice(open + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) found[m[1]] = m[2]!;
    }
    if (
      Object.entries(labels).every(([k, v]) => found[k] === v) &&
      Object.keys(found).length === Object.keys(labels).length
    ) {
      return Number(line.slice(open === name.length ? close + 1 : name.length).trim());
    }
  }
  return undefined;
}

const scrape = async () => {
  const res = await call(gw.url, 'GET', '/metrics', { headers: admin.headers });
  if (res.status !== 200) throw new Error(`scrape: ${res.status} ${res.text}`);
  return res.text;
};

t.test('only admin principals read /metrics by default', async (t) => {
  const anonymous = await call(gw.url, 'GET', '/metrics');
  t.equal(anonymous.status, 401);
  t.same(Object.keys(anonymous.body).sort(), ['code', 'error', 'reason'], 'the usual error body');
  const notAdmin = await call(gw.url, 'GET', '/metrics', { headers: viewer.headers });
  t.equal(notAdmin.status, 403, 'a viewer is not enough');
  const bearer = await call(gw.url, 'GET', '/metrics', { headers: { authorization: `Bearer ${admin.key}` } });
  t.equal(bearer.status, 200, 'an admin API key works as a bearer token');
  t.match(bearer.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  t.match(bearer.text, /^process_cpu_user_seconds_total \d/m, 'default process metrics are included');
  t.match(bearer.text, /^# TYPE kiteline_http_requests_total counter$/m);
  t.notOk(bearer.text.startsWith('"'), 'the exposition is not serialized as a JSON string');
});

t.test('KITELINE_METRICS_PUBLIC=true serves /metrics without credentials', async (t) => {
  const open = await startGateway(t, { logName: 'metrics-public', env: { KITELINE_METRICS_PUBLIC: 'true' } });
  const res = await call(open.url, 'GET', '/metrics');
  t.equal(res.status, 200);
  t.match(res.text, /kiteline_http_requests_total/);
  t.notOk(/kiteline_cluster_ready\{/.test(res.text), 'its own registry: no cluster of the other gateway');
});

t.test('requests are counted by route pattern, method, status and cluster', async (t) => {
  const labels = { route: '/api/v1/:resource/:namespace', method: 'GET', status: '200', cluster: CLUSTER };
  const before = sample(await scrape(), 'kiteline_http_requests_total', labels) ?? 0;
  const listed = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
    headers: { ...admin.headers, 'x-cluster-name': CLUSTER },
  });
  t.equal(listed.status, 200, 'listed');
  const after = await scrape();
  t.equal(sample(after, 'kiteline_http_requests_total', labels), before + 1, 'the counter went up by one');
  t.ok(
    (sample(after, 'kiteline_http_request_duration_seconds_count', { route: labels.route, method: 'GET' }) ?? 0) >= 1,
    'the duration histogram has the request',
  );

  const missing = await call(gw.url, 'GET', '/api/v1/configmaps/default/no-such-map', {
    headers: { ...admin.headers, 'x-cluster-name': CLUSTER },
  });
  t.equal(missing.status, 404);
  t.equal(
    sample(await scrape(), 'kiteline_http_requests_total', {
      route: '/api/v1/:resource/:namespace/:name',
      method: 'GET',
      status: '404',
      cluster: CLUSTER,
    }),
    1,
    'a 404 from the cluster counts under its route',
  );
});

t.test('unknown paths count as route "unmatched" and never become labels', async (t) => {
  const labels = { route: 'unmatched', method: 'GET', status: '404', cluster: '' };
  const before = sample(await scrape(), 'kiteline_http_requests_total', labels) ?? 0;
  const random = uniqueName('nowhere');
  t.equal((await call(gw.url, 'GET', `/${random}/x/y/z/w`)).status, 404);
  const after = await scrape();
  t.equal(sample(after, 'kiteline_http_requests_total', labels), before + 1);
  t.notOk(after.includes(random), 'the path itself is nowhere in the metrics');
});

t.test('upstream latency histogram per cluster', async (t) => {
  const labels = { cluster: CLUSTER, method: 'GET', code: '200' };
  const before = sample(await scrape(), 'kiteline_upstream_request_duration_seconds_count', labels) ?? 0;
  const res = await call(gw.url, 'GET', '/api/v1/namespaces/_all/default', {
    headers: { ...admin.headers, 'x-cluster-name': CLUSTER },
  });
  t.equal(res.status, 200, 'got the namespace');
  const after = await scrape();
  const count = sample(after, 'kiteline_upstream_request_duration_seconds_count', labels) ?? 0;
  t.ok(count >= before + 1, `the request was observed (${before} -> ${count})`);
  t.ok((sample(after, 'kiteline_upstream_request_duration_seconds_sum', labels) ?? 0) > 0, 'with a positive duration');
  t.equal(
    sample(after, 'kiteline_upstream_request_duration_seconds_bucket', { ...labels, le: '+Inf' }),
    count,
    'buckets add up',
  );
});

t.test('cluster readiness and cache sizes are read at scrape time', async (t) => {
  const text = await scrape();
  t.equal(sample(text, 'kiteline_cluster_ready', { cluster: CLUSTER }), 1, 'the ready cluster shows 1');
  const info = `kiteline_cluster_info{cluster="${CLUSTER}",version="${testPlaneVersion('target-a')}",enabled="true"} 1`;
  t.ok(text.split('\n').includes(info), info);
  t.equal(sample(text, 'kiteline_cache_objects', { cache: 'users' }), 1, 'one user');
  t.equal(sample(text, 'kiteline_cache_objects', { cache: 'apikeys' }), 2, 'two API keys');
  t.equal(sample(text, 'kiteline_cache_objects', { cache: 'clusters' }), 1, 'one cluster');
  t.ok((sample(text, 'kiteline_cache_objects', { cache: 'secrets' }) ?? 0) >= 1, 'the secrets cache');
  t.ok(sample(text, 'kiteline_cache_objects', { cache: 'roles' })! >= 2, 'built-in roles');

  const disabled = uniqueName('off');
  await registerCluster(gw, admin, { name: disabled, config: testKubeconfig('target-b'), enabled: false });
  const later = await eventually('the disabled cluster in the metrics', async () => {
    const next = await scrape();
    return sample(next, 'kiteline_cluster_ready', { cluster: disabled }) !== undefined ? next : undefined;
  });
  t.equal(sample(later, 'kiteline_cluster_ready', { cluster: disabled }), 0, 'a disabled cluster shows 0');
  t.equal(sample(later, 'kiteline_cache_objects', { cache: 'clusters' }), 2);
});

// Last: the throttle also holds this test's address for a while.
t.test('failed logins are counted by reason, never by username', async (t) => {
  const username = uniqueName('nobody');
  const failures = () =>
    scrape().then((text) => ({
      bad: sample(text, 'kiteline_login_failures_total', { reason: 'bad_credentials' }) ?? 0,
      throttled: sample(text, 'kiteline_login_failures_total', { reason: 'throttled' }) ?? 0,
      text,
    }));
  const before = await failures();
  const login = () =>
    call(gw.url, 'POST', '/api/auth/login/password', { body: { username, password: 'not-the-password' } });
  for (let i = 0; i < MAX_FAILURES; i++) t.equal((await login()).status, 401);
  const wrong = await failures();
  t.equal(wrong.bad, before.bad + MAX_FAILURES, 'each wrong password counted');
  t.equal((await login()).status, 429, 'then the limiter answers');
  const throttled = await failures();
  t.equal(throttled.throttled, before.throttled + 1, 'a throttled login counted as such');
  t.equal(throttled.bad, wrong.bad);
  t.notOk(throttled.text.includes(username), 'no username in any label');
  t.equal(
    sample(throttled.text, 'kiteline_http_requests_total', {
      route: '/api/auth/login/password',
      method: 'POST',
      status: '429',
      cluster: '',
    }),
    1,
  );
});
