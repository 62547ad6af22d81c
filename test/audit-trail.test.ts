// The durable audit trail (issue 24) on the real host and target planes: Kite's audit-log route
// lists a record for each kind of action (admin write, resource write, login, failed login, a
// write through /k8s/clusters), with Kite's filters and paging, newest first, admins only; no
// secret sent in any request is in any stored chunk or webhook body; the webhook receives
// audit.k8s.io/v1 EventLists; records survive a graceful restart (the shutdown flush) and a leader
// change; the leader prunes by count and by age; a killed replica loses at most what it had not
// flushed yet.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { kubectl, TEST_DIR, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, testKubeconfig, type Caller } from './helpers/fixtures.js';
import { call, spawnGatewayProcess, startGateway, type TestGateway } from './helpers/gateway.js';

const ROUTE = '/api/v1/admin/audit-logs';
const FAST = { KITELINE_AUDIT_FLUSH_INTERVAL_MS: '200', KITELINE_PROBE_INTERVAL_MS: '1000' };

interface AuditLog {
  id: number;
  createdAt: string;
  clusterName: string;
  resourceType: string;
  resourceName: string;
  namespace: string;
  operationType: string;
  success: boolean;
  status: number;
  requestId: string;
  clientAddress: string;
  operatorId: number;
  operator: { id: number; username: string; provider: string; kind: string };
  [key: string]: unknown;
}
interface AuditPage {
  data: AuditLog[];
  total: number;
  page: number;
  size: number;
}

/** One page of the audit logs (200 expected). */
async function auditLogs(gw: { url: string }, caller: Caller, query = ''): Promise<AuditPage> {
  const res = await call<AuditPage>(gw.url, 'GET', `${ROUTE}${query ? `?${query}` : ''}`, { headers: caller.headers });
  if (res.status !== 200) throw new Error(`audit logs: ${res.status} ${res.text}`);
  return res.body;
}

/** Waits until the record of a request is listed (it comes with the next flush). */
async function recordOf(gw: { url: string }, caller: Caller, requestId: string, query = 'size=100'): Promise<AuditLog> {
  return eventually(
    `the audit record of ${requestId}`,
    async () => (await auditLogs(gw, caller, query)).data.find((r) => r.requestId === requestId),
    30_000,
    100,
  );
}

/** Every stored AuditChunk of a namespace, as JSON text. */
function storedChunks(gw: TestGateway, namespace = gw.namespace): { text: string; items: any[] } {
  const res = kubectl(gw.kubeconfig, ['-n', namespace, 'get', 'auditchunks.kiteline.io', '-o', 'json']);
  if (res.status !== 0) throw new Error(res.stderr);
  return { text: res.stdout, items: JSON.parse(res.stdout).items };
}

/** A local webhook receiver: every EventList it was sent. */
async function webhookReceiver(t: Test) {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/audit?token=webhook-query-token`, bodies };
}

const traced = (requestId: string, headers: Record<string, string> = {}) => ({ ...headers, 'x-request-id': requestId });

t.test('each kind of action is recorded, filterable, and no secret is ever stored', async (t) => {
  const hook = await webhookReceiver(t);
  const gw = await startGateway(t, { env: { ...FAST, KITELINE_AUDIT_WEBHOOK_URL: hook.url } });
  const admin = await bootstrapAdmin(gw);
  const viewer = await apiKeyWithRoles(gw, admin, 'audit-viewer', ['viewer']);
  await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
  const targetKubeconfig = gw.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
  const ns = uniqueName('audit-trail');
  t.equal(kubectl(targetKubeconfig, ['create', 'namespace', ns]).status, 0);
  t.teardown(() => void kubectl(targetKubeconfig, ['delete', 'namespace', ns, '--wait=false']));

  // The values that must never reach a chunk or the webhook.
  const password = `pw-${uniqueName('secret')}`;
  const secretValue = `sv-${uniqueName('secret')}`;
  const kubeconfigToken = /token: (\S+)/.exec(testKubeconfig('target-a'))![1];
  const id = (what: string) => uniqueName(`at-${what}`);

  // An admin write: a user, with a password.
  const username = uniqueName('erin');
  const rUser = id('user');
  const user = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    body: { username, password, name: 'Erin' },
    headers: traced(rUser, admin.headers),
  });
  t.equal(user.status, 201);
  // A resource write: a Secret, with a value.
  const rSecret = id('secret');
  const secret = await call(gw.url, 'POST', `/api/v1/secrets/${ns}`, {
    body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'db' }, stringData: { password: secretValue } },
    headers: traced(rSecret, admin.headers),
  });
  t.equal(secret.status, 201, secret.text);
  // A login, and a failed one.
  const rLogin = id('login');
  const login = await eventually('the user can log in', async () => {
    const res = await call(gw.url, 'POST', '/api/auth/login/password', {
      body: { username, password },
      headers: traced(rLogin),
    });
    return res.status === 204 ? res : undefined;
  });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const rFailed = id('failed');
  t.equal(
    (
      await call(gw.url, 'POST', '/api/auth/login/password', {
        body: { username, password: `${password}-wrong` },
        headers: traced(rFailed),
      })
    ).status,
    401,
  );
  // A write through the Kubernetes API proxy, kubectl's path.
  t.equal(kubectl(targetKubeconfig, ['-n', ns, 'create', 'configmap', 'via-proxy']).status, 0);
  const rProxy = id('proxy');
  const proxied = await call(gw.url, 'PATCH', `/k8s/clusters/a/api/v1/namespaces/${ns}/configmaps/via-proxy`, {
    raw: JSON.stringify({ data: { k: secretValue } }),
    headers: traced(rProxy, { authorization: `Bearer ${admin.key}`, 'content-type': 'application/merge-patch+json' }),
  });
  t.equal(proxied.status, 200, proxied.text);
  // A refused write: the viewer may not delete.
  const rDenied = id('denied');
  t.equal(
    (await call(gw.url, 'DELETE', `/api/v1/secrets/${ns}/db`, { headers: traced(rDenied, viewer.headers) })).status,
    403,
  );
  // Kite's YAML dialog: the request's record, and one per document it applied.
  const rApply = id('apply');
  const yaml =
    `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied, namespace: ${ns}}\n` + `data: {k: ${secretValue}}\n`;
  const applied = await call(gw.url, 'POST', '/api/v1/resources/apply', {
    body: { yaml },
    headers: traced(rApply, admin.headers),
  });
  t.equal(applied.status, 200, applied.text);

  const userId = user.body.id as number;
  t.match(await recordOf(gw, admin, rUser), {
    operationType: 'create',
    resourceType: 'users',
    resourceName: username,
    clusterName: '',
    success: true,
    status: 201,
    operator: { username: 'apikey:admin-key', provider: 'api_key', kind: 'apikey' },
    clientAddress: '127.0.0.1',
    resourceYaml: '',
    previousYaml: '',
  });
  t.match(await recordOf(gw, admin, rSecret), {
    operationType: 'create',
    resourceType: 'secrets',
    namespace: ns,
    resourceName: 'db',
    clusterName: 'a',
    success: true,
    status: 201,
  });
  t.match(await recordOf(gw, admin, rLogin), {
    operationType: 'login',
    resourceType: 'sessions',
    resourceName: username,
    success: true,
    operatorId: userId,
    operator: { id: userId, username, provider: 'password', kind: 'user' },
  });
  t.match(await recordOf(gw, admin, rFailed), {
    operationType: 'login',
    resourceName: username,
    success: false,
    status: 401,
    errorMessage: 'HTTP 401 Unauthorized',
    operatorId: 0,
    operator: { kind: 'anonymous' },
  });
  t.match(await recordOf(gw, admin, rProxy), {
    operationType: 'patch',
    resourceType: 'configmaps',
    namespace: ns,
    resourceName: 'via-proxy',
    clusterName: 'a',
    success: true,
    path: `/k8s/clusters/a/api/v1/namespaces/${ns}/configmaps/via-proxy`,
  });
  t.match(await recordOf(gw, admin, rDenied), {
    operationType: 'delete',
    resourceType: 'secrets',
    resourceName: 'db',
    success: false,
    status: 403,
    operator: { username: 'apikey:audit-viewer' },
  });
  t.match(await recordOf(gw, admin, rApply, 'size=100&resourceName=applied'), {
    operationType: 'apply',
    resourceType: 'configmaps',
    namespace: ns,
    resourceName: 'applied',
    clusterName: 'a',
    success: true,
    status: 201,
  });
  t.match(await recordOf(gw, admin, rApply, 'size=100&resourceType=documents'), {
    operationType: 'apply',
    resourceType: 'documents',
    success: true,
    status: 200,
  });

  // Kite's filters and paging, newest first.
  const all = await auditLogs(gw, admin, 'size=100');
  t.ok(all.total >= 9, 'set-up and actions are all there');
  const times = all.data.map((r) => r.createdAt);
  t.same(times, [...times].sort().reverse(), 'newest first');
  t.same([all.page, all.size], [1, 100]);
  const defaults = await auditLogs(gw, admin);
  t.same([defaults.page, defaults.size], [1, 20], "Kite's defaults");
  const page2 = await auditLogs(gw, admin, 'size=2&page=2');
  t.same(
    page2.data.map((r) => r.id),
    all.data.slice(2, 4).map((r) => r.id),
    'page 2 of size 2 is the 3rd and 4th newest',
  );
  t.equal(page2.total, all.total);
  const only = async (query: string) => (await auditLogs(gw, admin, `size=100&${query}`)).data.map((r) => r.requestId);
  t.same(await only(`operatorId=${userId}`), [rLogin], 'operatorId: what the user did');
  t.same(
    (await only('operation=login')).filter((r) => [rLogin, rFailed].includes(r)),
    [rFailed, rLogin],
    'operation',
  );
  t.ok((await auditLogs(gw, admin, 'size=100&operation=login')).data.every((r) => r.operationType === 'login'));
  t.same(await only(`namespace=${ns}`), [rApply, rDenied, rProxy, rSecret], 'namespace');
  t.same(await only(`namespace=${ns}&resourceType=secrets`), [rDenied, rSecret], 'resourceType');
  t.same(await only(`resourceName=via-proxy`), [rProxy], 'resourceName');
  t.same(await only(`search=VIA-PRO`), [rProxy], 'search: a part of the name, any case');
  t.same(await only(`cluster=a&namespace=${ns}&operation=create`), [rSecret], 'cluster, combined');
  t.same(await only('cluster=nope'), [], 'no match: empty');

  // Who may read it, and bad queries.
  t.equal((await call(gw.url, 'GET', ROUTE, { headers: viewer.headers })).status, 403, 'a non-admin gets 403');
  t.equal(
    (await call(gw.url, 'GET', ROUTE, { headers: { cookie } })).status,
    403,
    'a signed-in non-admin user gets 403',
  );
  t.equal((await call(gw.url, 'GET', ROUTE)).status, 401, 'anonymous gets 401');
  for (const bad of [
    'page=0',
    'page=x',
    'size=0',
    'size=101',
    'size=-5',
    'operatorId=abc',
    'page=1&page=2',
    `search=${'x'.repeat(300)}`,
  ]) {
    const res = await call(gw.url, 'GET', `${ROUTE}?${bad}`, { headers: admin.headers });
    t.equal(res.status, 400, `${bad}: 400 (${res.text})`);
    t.equal(res.body?.code, 400);
  }
  t.equal(
    (await call(gw.url, 'GET', `${ROUTE}/?size=1`, { headers: admin.headers })).status,
    200,
    'with a trailing slash too',
  );

  // The webhook got EventLists with these records.
  const events = await eventually('the webhook to get the proxy write', () => {
    const items = hook.bodies.flatMap((b) => JSON.parse(b).items as any[]);
    return items.some((e) => e.auditID === rProxy) ? items : undefined;
  });
  t.ok(
    hook.bodies.every((b) => JSON.parse(b).kind === 'EventList' && JSON.parse(b).apiVersion === 'audit.k8s.io/v1'),
    'EventLists of audit.k8s.io/v1',
  );
  t.match(
    events.find((e) => e.auditID === rSecret),
    {
      kind: 'Event',
      level: 'Metadata',
      stage: 'ResponseComplete',
      verb: 'create',
      user: { username: 'apikey:admin-key' },
      objectRef: { resource: 'secrets', namespace: ns, name: 'db' },
      responseStatus: { code: 201 },
      sourceIPs: ['127.0.0.1'],
      annotations: { 'kiteline.io/cluster': 'a' },
    },
  );
  t.match(
    events.find((e) => e.auditID === rFailed),
    { verb: 'login', responseStatus: { code: 401 }, user: { username: 'anonymous' } },
  );

  // The hidden-value check: no secret in any stored chunk or webhook body.
  const stored = await eventually('every record stored', () => {
    const chunks = storedChunks(gw);
    return chunks.text.includes(rDenied) ? chunks : undefined;
  });
  t.ok(stored.items.length >= 1, 'chunks are AuditChunk objects in the install namespace');
  const everything = stored.text + hook.bodies.join('\n');
  for (const [what, value] of [
    ['the password', password],
    ['the Secret value', secretValue],
    ['the Secret value in base64', Buffer.from(secretValue).toString('base64')],
    ['the admin API key', admin.key],
    ['the viewer API key', viewer.key],
    ["the target's kubeconfig token", kubeconfigToken],
    ['the session cookie', cookie.split('=')[1]],
  ] as const) {
    t.notOk(everything.includes(value), `${what} is in no chunk and no webhook body`);
  }
});

t.test('a write whose client leaves before the answer is still recorded (499), and logged', async (t) => {
  const logName = uniqueName('audit-gone');
  const gw = await startGateway(t, { logName, env: FAST });
  const admin = await bootstrapAdmin(gw);
  await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
  const targetKubeconfig = gw.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
  const ns = uniqueName('audit-gone');
  t.equal(kubectl(targetKubeconfig, ['create', 'namespace', ns]).status, 0);
  t.teardown(() => void kubectl(targetKubeconfig, ['delete', 'namespace', ns, '--wait=false']));
  // A finalizer holds the ConfigMap: kiteline's delete waits for it to go, the client does not.
  const held = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'held', namespace: ns, finalizers: ['example.com/hold'] },
  };
  t.equal(kubectl(targetKubeconfig, ['apply', '-f', '-'], JSON.stringify(held)).status, 0);
  t.teardown(
    () =>
      void kubectl(targetKubeconfig, [
        '-n',
        ns,
        'patch',
        'configmap',
        'held',
        '--type=merge',
        '-p',
        '{"metadata":{"finalizers":null}}',
      ]),
  );
  const requestId = uniqueName('gone');
  const res = await call(gw.url, 'DELETE', `/api/v1/configmaps/${ns}/held`, {
    headers: traced(requestId, admin.headers),
    signal: AbortSignal.timeout(1500),
  }).catch((err: Error) => err);
  t.ok(res instanceof Error, 'the client gave up before the answer');
  const record = await recordOf(gw, admin, requestId);
  t.match(record, {
    operationType: 'delete',
    resourceType: 'configmaps',
    namespace: ns,
    resourceName: 'held',
    clusterName: 'a',
    success: false,
    status: 499,
  });
  const line = await eventually(
    'the request line',
    () =>
      readFileSync(join(TEST_DIR, 'logs', `${logName}.log`), 'utf8')
        .split('\n')
        .filter((l) => l.includes('"request"') && l.includes(requestId))
        .map((l) => JSON.parse(l))[0],
  );
  t.match(line, { method: 'DELETE', status: 499 });
  t.match(
    kubectl(targetKubeconfig, ['-n', ns, 'get', 'configmap', 'held', '-o', 'jsonpath={.metadata.deletionTimestamp}'])
      .stdout,
    /^\d{4}-/,
    'the delete did reach the cluster',
  );
});

t.test('records survive a graceful restart: the shutdown flush writes what is buffered', async (t) => {
  // A flush interval far longer than the test: only the shutdown flush can write the records.
  const slow = { KITELINE_AUDIT_FLUSH_INTERVAL_MS: '60000' };
  const first = await startGateway(t, { env: slow });
  const admin = await bootstrapAdmin(first);
  const requestId = uniqueName('restart');
  t.equal(
    (
      await call(first.url, 'POST', '/api/v1/admin/roles/', {
        body: { name: 'before-restart', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] },
        headers: traced(requestId, admin.headers),
      })
    ).status,
    201,
  );
  t.equal(storedChunks(first).items.length, 0, 'nothing written yet (the interval has not passed)');
  await first.close();
  t.ok(storedChunks(first).text.includes(requestId), 'closing flushed the buffer');

  const second = await startGateway(t, { namespace: first.namespace, env: slow });
  const record = await recordOf(second, admin, requestId);
  t.match(record, { operationType: 'create', resourceType: 'roles', resourceName: 'before-restart', success: true });
});

t.test('two replicas: each sees all records; the leader prunes; after a leader change the new one does', async (t) => {
  const limits = {
    ...FAST,
    KITELINE_AUDIT_CHUNK_SIZE: '2',
    KITELINE_AUDIT_MAX_RECORDS: '6',
    // No unauthenticated records kept (create_super_user is one): the count below is the whole trail.
    KITELINE_AUDIT_UNAUTHENTICATED_MAX_RECORDS: '0',
    KITELINE_AUDIT_PRUNE_INTERVAL_MS: '300',
  };
  const one = await startGateway(t, { env: limits });
  const two = await startGateway(t, { namespace: one.namespace, env: limits });
  const admin = await bootstrapAdmin(one);
  await eventually(
    'the key on the second replica',
    async () => (await call(two.url, 'GET', ROUTE, { headers: admin.headers })).status === 200,
  );
  const leader = await eventually(
    'a leader',
    () =>
      one.services.clusterManager.lease.isLeader ? one : two.services.clusterManager.lease.isLeader ? two : undefined,
    40_000,
  );
  const follower = leader === one ? two : one;

  // Refused role creations by the admin on both replicas (any write is audited; these are cheap, and
  // authenticated: unauthenticated records are counted apart, docs/operations.md).
  const attempt = async (gw: TestGateway, n: number) => {
    const requestId = uniqueName(`lc-${n}`);
    const res = await call(gw.url, 'POST', '/api/v1/admin/roles/', {
      body: { name: `Not A Role Name ${n}` },
      headers: { ...admin.headers, ...traced(requestId) },
    });
    if (res.status !== 400) throw new Error(`expected a refusal: ${res.status} ${res.text}`);
    return requestId;
  };
  const viaLeader = await attempt(leader, 1);
  const viaFollower = await attempt(follower, 2);
  await recordOf(follower, admin, viaLeader);
  await recordOf(leader, admin, viaFollower);
  t.pass("each replica lists the other's records");

  for (let n = 3; n <= 14; n++) await attempt(n % 2 ? leader : follower, n);
  const newest = await attempt(follower, 15);
  await recordOf(leader, admin, newest);
  const kept = await auditLogs(leader, admin, 'size=100');
  t.equal(kept.total, 6, 'queries show exactly the newest KITELINE_AUDIT_MAX_RECORDS');
  await eventually('the leader to prune the storage to the count', () => {
    const count = storedChunks(one).items.reduce((sum, c) => sum + c.spec.count, 0);
    return count <= 6 + 2 * 2 ? true : undefined; // whole chunks: at most a chunk more per replica
  });
  t.ok(
    storedChunks(one).items.every((c) => c.spec.count <= 2),
    'chunks hold at most KITELINE_AUDIT_CHUNK_SIZE records',
  );

  // The leader goes away; the records stay, the other replica leads and prunes by age too.
  await leader.close();
  await eventually('the follower to lead', () => follower.services.clusterManager.lease.isLeader || undefined, 40_000);
  t.ok(
    (await auditLogs(follower, admin, 'size=100')).data.some((r) => r.requestId === newest),
    "the old leader's records are still listed",
  );
  const old = {
    apiVersion: 'kiteline.io/v1alpha1',
    kind: 'AuditChunk',
    metadata: { name: 'audit-from-2020' },
    spec: {
      replica: 'gone',
      count: 1,
      oldest: '2020-01-01T00:00:00.000Z',
      newest: '2020-01-01T00:00:00.000Z',
      records: [
        {
          time: '2020-01-01T00:00:00.000Z',
          operator: { id: 0, name: 'anonymous', kind: 'anonymous' },
          operation: 'login',
          result: 'failure',
          status: 401,
          requestId: 'ancient',
        },
      ],
    },
  };
  t.equal(
    kubectl(one.kubeconfig, ['-n', one.namespace, 'apply', '-f', '-'], JSON.stringify(old)).status,
    0,
    'an expired chunk applied',
  );
  t.notOk(
    (await auditLogs(follower, admin, 'size=100')).data.some((r) => r.requestId === 'ancient'),
    'an expired record is never listed',
  );
  await eventually(
    'the new leader to delete the expired chunk',
    () => !storedChunks(one).text.includes('audit-from-2020') || undefined,
    30_000,
    200,
  );
});

t.test('a killed replica loses at most the records it had not flushed', async (t) => {
  const namespace = uniqueName('kl-audit-crash');
  const kubeconfig = join(TEST_DIR, 'host', 'kubeconfig');
  // Chunks of 5, and an interval far longer than the test: only a full chunk is written.
  const { url, pid, exited } = await spawnGatewayProcess(t, {
    kubeconfig,
    namespace,
    logName: namespace,
    env: { POD_NAME: 'audit-crash', KITELINE_AUDIT_CHUNK_SIZE: '5', KITELINE_AUDIT_FLUSH_INTERVAL_MS: '60000' },
  });

  const victim = uniqueName('victim');
  const failedLogin = async (n: number) => {
    const requestId = uniqueName(`crash-${n}`);
    t.equal(
      (
        await call(url, 'POST', '/api/auth/login/password', {
          body: { username: victim, password: 'not-the-password' },
          headers: traced(requestId),
        })
      ).status,
      401,
    );
    return requestId;
  };
  const flushed: string[] = [];
  for (let n = 1; n <= 5; n++) flushed.push(await failedLogin(n));
  const gw = { kubeconfig, namespace } as TestGateway;
  await eventually(
    'the full chunk to be written',
    () => storedChunks(gw).items.some((c) => c.spec.count === 5) || undefined,
    30_000,
    100,
  );
  const buffered = [await failedLogin(6), await failedLogin(7)];
  process.kill(pid, 'SIGKILL');
  await exited;

  const survivor = await startGateway(t, { namespace });
  const admin = await bootstrapAdmin(survivor);
  const listed = await auditLogs(survivor, admin, `size=100&resourceName=${victim}`);
  t.same(listed.data.map((r) => r.requestId).sort(), [...flushed].sort(), 'every flushed record is there');
  t.notOk(
    listed.data.some((r) => buffered.includes(r.requestId)),
    'the unflushed ones (less than one interval) are lost, as documented',
  );
});

t.test('with the trail off the route says so and writes still work', async (t) => {
  const gw = await startGateway(t, { env: { KITELINE_AUDIT_TRAIL: 'false' } });
  const admin = await bootstrapAdmin(gw);
  const res = await call(gw.url, 'GET', ROUTE, { headers: admin.headers });
  t.equal(res.status, 404);
  t.match(res.body.error, /KITELINE_AUDIT_TRAIL=false/);
  t.equal(storedChunks(gw).items.length, 0, 'no chunk written');
});
