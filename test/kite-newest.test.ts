// Kite's newest contract beside the old (issue 34, CONTRACT §13), against the shared host and both
// targets: GET /api/v1/bootstrap (set-up state, providers, the caller and what is offered, in one
// answer; anonymous callers learn only what the login page needs), POST
// /api/auth/setup/create_super_user (the same lock as the old path: exactly one first user), and
// every cluster route also under /api/v1/_clusters/<cluster>/... (the path chooses the cluster over
// any header, reads and writes alike, audited on that cluster; other routes under the prefix, bad
// segments and unknown clusters are 404s). Role by role: viewer, a role limited to one namespace,
// a role limited to one cluster, anonymous.
import t from 'tap';
import { kubectl, kubectlInBackground, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, createRole, testKubeconfig, type Caller } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { openSse, type SseEvent } from './helpers/workload-streams.js';

const target = (await testControlPlane('target-a')).kubeconfigPath;
await testControlPlane('target-b');
const gw = await startGateway(t, { logName: 'kite-newest', env: { KITELINE_AUDIT_FLUSH_INTERVAL_MS: '200' } });
const anonymous: Caller = { key: '', headers: {} };
const SETUP = '/api/auth/setup/create_super_user';
const PASSWORD = 'correct-horse-battery';

t.test('before any user: bootstrap tells the login page to set up, and nothing about anyone', async (t) => {
  const res = await call(gw.url, 'GET', '/api/v1/bootstrap');
  t.equal(res.status, 200, res.text);
  t.same(
    {
      initialized: res.body.initialized,
      step: res.body.step,
      user: res.body.user,
      capabilities: res.body.capabilities,
    },
    { initialized: false, step: 0, user: null, capabilities: null },
  );
  t.same(res.body.providers, { providers: ['password'], credentialProviders: ['password'], oauthProviders: [] });
  const old = await call(gw.url, 'GET', '/api/v1/init_check');
  t.same(old.body, { initialized: false, step: 0 }, 'init_check agrees');
});

let admin: Caller;
let adminSession: Record<string, string>;

t.test("create_super_user at Kite's newest path: one first user, the same lock as the old path", async (t) => {
  const bad = await call(gw.url, 'POST', SETUP, { body: { username: 'Not Valid!', password: PASSWORD } });
  t.equal(bad.status, 400, `a bad username: 400 (${bad.text})`);
  const [first, second] = await Promise.all([
    call(gw.url, 'POST', SETUP, { body: { username: 'root', password: PASSWORD, name: 'Root' } }),
    call(gw.url, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'rival', password: PASSWORD },
    }),
  ]);
  const statuses = [first.status, second.status].sort();
  t.same(statuses, [201, 403], `one of two concurrent set-ups wins, on either path: ${statuses.join(', ')}`);
  const winner = first.status === 201 ? first : second;
  const cookie = (winner.headers.get('set-cookie') ?? '').split(';')[0];
  t.match(cookie, /^auth_token=./, 'the winner is signed in');
  adminSession = { cookie };
  const again = await call(gw.url, 'POST', SETUP, { body: { username: 'late', password: PASSWORD } });
  t.equal(again.status, 403, 'closed for good');
  const key = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    headers: adminSession,
    body: { name: 'newest-admin', roles: ['admin'] },
  });
  t.equal(key.status, 201, key.text);
  admin = { key: key.body.key, headers: { authorization: key.body.key } };
  const audit = await eventually('the set-up in the audit trail', async () => {
    const res = await call(gw.url, 'GET', '/api/v1/admin/audit-logs?operation=create_super_user', {
      headers: admin.headers,
    });
    // Both set-ups are audited, in whichever order their writes land: wait for the winner's.
    const rows: { success: boolean }[] = res.status === 200 ? res.body.data : [];
    return rows.some((r) => r.success) ? rows : undefined;
  });
  t.ok(
    audit.some((r: { success: boolean }) => r.success),
    'the winning set-up is audited',
  );
});

t.test('bootstrap for a signed-in caller: the caller as /api/auth/user shows it, and what is offered', async (t) => {
  const signedIn = await call(gw.url, 'GET', '/api/v1/bootstrap', { headers: adminSession });
  t.equal(signedIn.status, 200);
  t.equal(signedIn.body.step, 1, 'a user, no cluster yet');
  const me = await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession });
  t.same(signedIn.body.user, me.body, 'the caller exactly as GET /api/auth/user answers');
  t.same(signedIn.body.capabilities, { ai: false, kubeconfigTokens: true, kubectlConsole: false });
  const withKey = await call(gw.url, 'GET', '/api/v1/bootstrap', { headers: admin.headers });
  t.equal(withKey.body.user.user.provider, 'api_key', 'an API key caller, as /api/auth/user shows it');
  const stale = await call(gw.url, 'GET', '/api/v1/bootstrap', { headers: { cookie: 'auth_token=forged.token.here' } });
  t.equal(stale.status, 200, 'a stale cookie does not make bootstrap fail');
  t.same([stale.body.user, stale.body.capabilities], [null, null], 'and shows no one');
  const badKey = await call(gw.url, 'GET', '/api/v1/bootstrap', { headers: { authorization: 'kl_not-a-key' } });
  t.same([badKey.status, badKey.body.user], [200, null], 'a bad key: anonymous');

  await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a') });
  await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b') });
  const ready = await call(gw.url, 'GET', '/api/v1/bootstrap');
  t.same([ready.body.initialized, ready.body.step], [true, 2], 'set up: a user and a cluster');
});

const ns = uniqueName('newest');
t.equal(kubectl(target, ['create', 'namespace', ns]).status, 0);
t.teardown(() => kubectl(target, ['delete', 'namespace', ns, '--wait=false']));

t.test('cluster routes under /api/v1/_clusters/<cluster>/: reads and writes on that cluster', async (t) => {
  const created = await call(gw.url, 'POST', `/api/v1/_clusters/a/configmaps/${ns}`, {
    headers: admin.headers,
    body: { metadata: { name: 'via-path' }, data: { where: 'a' } },
  });
  t.equal(created.status, 201, created.text);
  t.equal(
    kubectl(target, ['get', 'configmap', 'via-path', '-n', ns, '-o', 'jsonpath={.data.where}']).stdout,
    'a',
    'written to cluster a',
  );
  const viaHeader = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}/via-path`, {
    headers: { ...admin.headers, 'x-cluster-name': 'a' },
  });
  const viaPath = await call(gw.url, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/via-path`, {
    headers: admin.headers,
  });
  t.equal(viaPath.status, 200, viaPath.text);
  t.same(viaPath.body, viaHeader.body, 'the same answer as the header spelling');
  const pathWins = await call(gw.url, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/via-path?x-cluster-name=b`, {
    headers: { ...admin.headers, 'x-cluster-name': 'b', cookie: 'x-cluster-name=b' },
  });
  t.equal(pathWins.status, 200, "the path's cluster wins over header, query and cookie");
  const onB = await call(gw.url, 'GET', `/api/v1/_clusters/b/configmaps/${ns}/via-path`, { headers: admin.headers });
  t.equal(onB.status, 404, 'cluster b has no such object');
  const namespaces = await call(gw.url, 'GET', '/api/v1/_clusters/a/namespaces', { headers: admin.headers });
  t.ok(
    namespaces.body.items?.some((n: { metadata: { name: string } }) => n.metadata.name === ns),
    'a list under the prefix',
  );
  const tool = await call(
    gw.url,
    'GET',
    `/api/v1/_clusters/a/events/resources?resource=configmaps&namespace=${ns}&name=via-path`,
    { headers: admin.headers },
  );
  t.equal(tool.status, 200, `a tool route under the prefix (${tool.text.slice(0, 120)})`);
  t.equal(tool.body.kind, 'EventList');
  const encoded = await call(gw.url, 'GET', `/api/v1/_clusters/%61/configmaps/${ns}/via-path`, {
    headers: admin.headers,
  });
  t.equal(encoded.status, 200, 'a percent-encoded cluster segment is decoded');

  const audit = await eventually('the write audited on cluster a', async () => {
    const res = await call(gw.url, 'GET', '/api/v1/admin/audit-logs?resourceName=via-path&cluster=a', {
      headers: admin.headers,
    });
    return res.body?.data?.find((r: { operationType: string }) => r.operationType === 'create');
  });
  t.equal(audit.clusterName, 'a', 'the audit line names the cluster of the path');
  const removed = await call(gw.url, 'DELETE', `/api/v1/_clusters/a/configmaps/${ns}/via-path`, {
    headers: admin.headers,
  });
  t.equal(removed.status, 200, removed.text);
});

t.test('only cluster routes live under the prefix; malformed and unknown clusters are 404s', async (t) => {
  for (const path of [
    '/api/v1/_clusters/a/admin/users/',
    '/api/v1/_clusters/a/admin/general-setting/',
    '/api/v1/_clusters/a/init_check',
    '/api/v1/_clusters/a/bootstrap',
    '/api/v1/_clusters/a/clusters',
    '/api/v1/_clusters/a/version',
    '/api/v1/_clusters/a/ai/status',
  ]) {
    const res = await call(gw.url, 'GET', path, { headers: admin.headers });
    t.equal(res.status, 404, `${path}: 404 (${res.text.slice(0, 120)})`);
    t.match(res.body, { error: /./ }, 'a JSON error');
  }
  const put = await call(gw.url, 'PUT', '/api/v1/_clusters/a/admin/general-setting/', {
    headers: admin.headers,
    body: { kubectlEnabled: true, kubectlImage: 'x' },
  });
  t.equal(put.status, 404, 'an admin write under the prefix: 404');
  const setting = await call(gw.url, 'GET', '/api/v1/admin/general-setting/', { headers: admin.headers });
  t.equal(setting.body.kubectlEnabled, false, 'and nothing changed');
  for (const path of [
    '/api/v1/_clusters/',
    '/api/v1/_clusters/a',
    '/api/v1/_clusters/%E0%A4%A/namespaces',
    '/api/v1/_clusters/no-such-cluster/namespaces',
    '/api/v1/_clusters/a/_clusters/b/namespaces',
  ]) {
    const res = await call(gw.url, 'GET', path, { headers: admin.headers });
    t.ok(res.status === 404 || res.status === 400, `${path}: a 4xx (${res.status} ${res.text.slice(0, 120)})`);
    t.match(res.body, { error: /./, reason: /^(NotFound|BadRequest)$/, code: res.status }, 'the one error shape');
  }
});

t.test('role by role under the prefix: the same answers as the header spelling', async (t) => {
  await createRole(gw, admin, {
    name: 'newest-ns',
    clusters: ['*'],
    namespaces: [ns],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  await createRole(gw, admin, {
    name: 'newest-b-only',
    clusters: ['b'],
    namespaces: ['*'],
    resources: ['*'],
    verbs: ['*'],
  });
  const viewer = await apiKeyWithRoles(gw, admin, 'newest-viewer', ['viewer']);
  const limited = await apiKeyWithRoles(gw, admin, 'newest-limited', ['newest-ns']);
  const bOnly = await apiKeyWithRoles(gw, admin, 'newest-b', ['newest-b-only']);
  kubectl(target, ['-n', ns, 'create', 'configmap', 'seen', '--from-literal=k=v']);
  const cases: Array<[string, Caller, string, string, number]> = [
    ['viewer reads', viewer, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/seen`, 200],
    ['viewer cannot write', viewer, 'DELETE', `/api/v1/_clusters/a/configmaps/${ns}/seen`, 403],
    ['namespace-limited reads its namespace', limited, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/seen`, 200],
    ['namespace-limited elsewhere', limited, 'GET', '/api/v1/_clusters/a/configmaps/default', 403],
    ['cluster-b-only on a: not found', bOnly, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/seen`, 404],
    ['cluster-b-only with header b but path a', bOnly, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/seen`, 404],
    ['anonymous', anonymous, 'GET', `/api/v1/_clusters/a/configmaps/${ns}/seen`, 401],
  ];
  for (const [what, caller, method, path, status] of cases) {
    const headers = what.includes('header b') ? { ...caller.headers, 'x-cluster-name': 'b' } : caller.headers;
    const res = await call(gw.url, method, path, { headers });
    t.equal(res.status, status, `${what}: ${status} (${res.text.slice(0, 160)})`);
  }
  t.equal(kubectl(target, ['-n', ns, 'get', 'configmap', 'seen']).status, 0, 'the refused delete changed nothing');
});

t.test("a live list of any resource: server-sent events, as Kite's pod list, role by role", async (t) => {
  const liveNs = uniqueName('live');
  t.equal(kubectl(target, ['create', 'namespace', liveNs]).status, 0);
  t.teardown(() => kubectl(target, ['delete', 'namespace', liveNs, '--wait=false']));
  const kube = (...args: string[]) => t.equal(kubectl(target, ['-n', liveNs, ...args]).status, 0, args.join(' '));
  kube('create', 'configmap', 'first', '--from-literal=k=v');
  kube('label', 'configmap', 'first', 'app=live');
  kube('create', 'configmap', 'outsider', '--from-literal=k=v');
  // An object named "watch": a GET that does not ask for events still reads it.
  kube('create', 'configmap', 'watch', '--from-literal=named=watch');
  const about = (name: string, event: string) => (e: SseEvent) =>
    e.event === event && JSON.parse(e.data)?.metadata?.name === name;

  const sse = await openSse(
    `${gw.url}/api/v1/_clusters/a/configmaps/${liveNs}/watch?labelSelector=app%3Dlive&reduce=true`,
    admin.headers,
  );
  t.teardown(() => sse.close());
  t.equal(sse.status, 200);
  t.match(sse.headers.get('content-type'), /^text\/event-stream/);
  const first = JSON.parse((await sse.waitFor('the object already there', about('first', 'added'))).data);
  t.equal(first.data.k, 'v', 'the whole object');
  t.notOk('managedFields' in first.metadata, 'reduce=true: no managedFields');
  await kubectlInBackground(
    target,
    ['-n', liveNs, 'apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'second', labels: { app: 'live' } },
      data: { k: 'w' },
    }),
  );
  const second = JSON.parse((await sse.waitFor('a new object', about('second', 'added'))).data);
  t.notOk(
    second.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration'],
    'reduce=true: no kubectl last-applied annotation',
  );
  await kubectlInBackground(target, ['-n', liveNs, 'delete', 'configmap', 'second']);
  await sse.waitFor('the deletion', about('second', 'deleted'));
  t.notOk(
    sse.events.some((e) => e.data.includes('"outsider"')),
    'the label selector applies',
  );

  const full = await openSse(`${gw.url}/api/v1/configmaps/${liveNs}/watch`, {
    ...admin.headers,
    'x-cluster-name': 'a',
  });
  t.teardown(() => full.close());
  const untrimmed = JSON.parse((await full.waitFor('the object, whole', about('first', 'added'))).data);
  t.ok(untrimmed.metadata.managedFields, 'without reduce: managedFields kept');

  const object = await call(gw.url, 'GET', `/api/v1/_clusters/a/configmaps/${liveNs}/watch`, {
    headers: { ...admin.headers, accept: 'application/json' },
  });
  t.equal(object.status, 200, object.text.slice(0, 200));
  t.equal(object.body.data?.named, 'watch', 'a plain GET reads the ConfigMap named "watch"');

  await createRole(gw, admin, {
    name: 'live-elsewhere',
    clusters: ['*'],
    namespaces: ['elsewhere'],
    resources: ['*'],
    verbs: ['*'],
  });
  const viewer = await apiKeyWithRoles(gw, admin, 'live-viewer', ['viewer']);
  const elsewhere = await apiKeyWithRoles(gw, admin, 'live-elsewhere', ['live-elsewhere']);
  const viewed = await openSse(`${gw.url}/api/v1/_clusters/a/configmaps/${liveNs}/watch`, viewer.headers);
  t.teardown(() => viewed.close());
  t.equal(viewed.status, 200, 'a viewer watches');
  await viewed.waitFor('the viewer sees the object', about('first', 'added'));
  for (const [who, headers, path, status] of [
    ['a role of another namespace', elsewhere.headers, `configmaps/${liveNs}/watch`, 403],
    ['a role of another namespace, all namespaces', elsewhere.headers, 'configmaps/_all/watch', 403],
    ['anonymous', {}, `configmaps/${liveNs}/watch`, 401],
    ['an unknown resource', admin.headers, `nothings/${liveNs}/watch`, 404],
  ] as const) {
    const res = await openSse(`${gw.url}/api/v1/_clusters/a/${path}`, headers);
    res.close();
    t.equal(res.status, status, `${who}: ${status}`);
  }
  const badSelector = await openSse(
    `${gw.url}/api/v1/_clusters/a/configmaps/${liveNs}/watch?labelSelector=%3D%3D%3D`,
    admin.headers,
  );
  badSelector.close();
  t.equal(badSelector.status, 400, 'a selector the cluster refuses: its 400, before any event');
});

t.test("kiteline's own namespace stays out of live lists on the host", async (t) => {
  await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });
  const own = await openSse(`${gw.url}/api/v1/_clusters/h/secrets/${gw.namespace}/watch`, admin.headers);
  own.close();
  t.equal(own.status, 403, "the install namespace's Secrets: 403, even for an admin");
  const all = await openSse(`${gw.url}/api/v1/_clusters/h/configmaps/_all/watch`, admin.headers);
  t.teardown(() => all.close());
  t.equal(all.status, 200);
  await all.waitFor('some ConfigMap of the host', (e) => e.event === 'added');
  await new Promise((r) => setTimeout(r, 1000));
  t.notOk(
    all.events.some((e) => e.event === 'added' && JSON.parse(e.data).metadata.namespace === gw.namespace),
    'no object of the install namespace in the all-namespaces list',
  );
});
