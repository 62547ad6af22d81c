// Issue 13, points 1, 2 and 7, tried as an attacker with a low-privilege key would, against a real
// host cluster registered as a target of itself (the `in-cluster` situation):
//   point 1: kiteline's install namespace and the kiteline.io group are unreachable through the
//            resource routes for everyone, admins included; lists and watches across all
//            namespaces come back without the install namespace; a role with patch on
//            users.kiteline.io cannot make itself admin;
//   point 2: the built-in viewer reads no Secrets, and an older viewer Role is upgraded at start;
//   point 7: a cluster the caller may not use answers exactly as a missing one (no readiness, no
//            last error).
import t from 'tap';
import { objectNameFor } from '../src/host/names.js';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  registerCluster,
  testKubeconfig,
} from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

await testControlPlane('target-b');
const gw = await startGateway(t, { logName: 'security-host' });
const ns = gw.namespace; // kiteline's install namespace on the host
const admin = await bootstrapAdmin(gw);
const SELF = uniqueName('self'); // the host cluster, registered by its kubeconfig
const OTHER = uniqueName('other'); // a different cluster
await addReadyCluster(gw, admin, { name: SELF, config: testKubeconfig('host'), isDefault: true });
await addReadyCluster(gw, admin, { name: OTHER, config: testKubeconfig('target-b') });

// Something of an ordinary tenant on the host, next to kiteline's own objects.
const TENANT = uniqueName('tenant');
for (const args of [
  ['create', 'namespace', TENANT],
  ['-n', TENANT, 'create', 'configmap', 'app-settings', '--from-literal=a=b'],
  ['-n', TENANT, 'create', 'secret', 'generic', 'app-secret', '--from-literal=a=b'],
]) {
  const res = kubectl(gw.kubeconfig, args);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
}
t.teardown(() => kubectl(gw.kubeconfig, ['delete', 'namespace', TENANT, '--wait=false']));

const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
const ESCALATOR_ROLE = uniqueName('crd-editor');
await createRole(gw, admin, {
  name: ESCALATOR_ROLE,
  clusters: ['*'],
  namespaces: ['*'],
  resources: ['users.kiteline.io', 'secrets', 'configmaps'],
  verbs: ['*'],
});
const escalator = await apiKeyWithRoles(gw, admin, uniqueName('escalator'), [ESCALATOR_ROLE]);

const on =
  (cluster: string, caller: { headers: Record<string, string> }) => (method: string, path: string, body?: unknown) =>
    call(gw.url, method, path, {
      headers: { 'x-cluster-name': cluster, ...caller.headers },
      ...(body !== undefined ? { body } : {}),
    });

/** The name of one of kiteline's own Secrets in the install namespace (a password hash). */
function kitelineSecret(): string {
  const res = kubectl(gw.kubeconfig, ['-n', ns, 'get', 'secrets', '-o', 'jsonpath={.items[*].metadata.name}']);
  const name = res.stdout.split(' ').find((n) => n.endsWith('-password'));
  if (!name) throw new Error(`no password Secret in ${ns}: ${res.stdout}`);
  return name;
}

t.test('point 1: the install namespace is refused for every verb and every caller, admins included', async (t) => {
  const secret = kitelineSecret();
  for (const [who, caller] of [
    ['admin', admin],
    ['viewer', viewer],
    ['escalator', escalator],
  ] as const) {
    const as = on(SELF, caller);
    for (const [method, path] of [
      ['GET', `/api/v1/secrets/${ns}`],
      ['GET', `/api/v1/secrets/${ns}/${secret}`],
      ['GET', `/api/v1/secrets/${ns}/${secret}?watch=true&timeoutSeconds=1`],
      ['GET', `/api/v1/configmaps/${ns}`],
      ['GET', `/api/v1/leases.coordination.k8s.io/${ns}`],
      ['GET', `/api/v1/events/${ns}`],
      ['GET', `/api/v1/pods/${ns}`],
      ['DELETE', `/api/v1/secrets/${ns}/${secret}`],
      ['GET', `/api/v1/users.kiteline.io/${ns}`],
      ['GET', '/api/v1/users.kiteline.io'],
      ['GET', '/api/v1/clusters.kiteline.io/_all'],
    ] as const) {
      const res = await as(method, path);
      t.equal(res.status, 403, `${who}: ${method} ${path}`);
      // The viewer's and escalator's own roles refuse some of these already; the admin's never do.
      if (who === 'admin')
        t.match(
          res.body?.error,
          /not reachable through kiteline's resource routes/,
          `admin: ${method} ${path}: the reason`,
        );
    }
  }
  const writes = on(SELF, admin);
  t.equal(
    (await writes('POST', `/api/v1/configmaps/${ns}`, { metadata: { name: 'planted' } })).status,
    403,
    'admin cannot create in it',
  );
  t.equal(
    (await writes('DELETE', `/api/v1/namespaces/_all/${ns}`)).status,
    403,
    'admin cannot delete the install namespace',
  );
  t.equal(
    (await writes('PATCH', `/api/v1/namespaces/_all/${ns}`, { metadata: { labels: { x: 'y' } } })).status,
    403,
    'nor patch it',
  );
  t.equal(
    (await writes('DELETE', '/api/v1/customresourcedefinitions/_all/users.kiteline.io')).status,
    403,
    "nor delete kiteline's CRDs",
  );
  t.equal(
    (await writes('GET', `/api/v1/namespaces/_all/${ns}`)).status,
    200,
    'reading the namespace object itself is harmless and allowed',
  );
  t.equal(kubectl(gw.kubeconfig, ['-n', ns, 'get', 'configmap', 'planted']).status, 1, 'nothing was created');
  t.equal(kubectl(gw.kubeconfig, ['get', 'namespace', ns]).status, 0, 'the namespace is still there');
});

t.test('point 1: a role with patch on users.kiteline.io cannot grant itself admin', async (t) => {
  const as = on(SELF, escalator);
  const user = objectNameFor('user', 'admin'); // the super user's object
  const res = await as('PATCH', `/api/v1/users.kiteline.io/${ns}/${user}?patchType=merge`, {
    spec: { roles: ['admin'] },
  });
  t.equal(res.status, 403);
  const created = await as('POST', `/api/v1/users.kiteline.io/${ns}`, {
    apiVersion: 'kiteline.io/v1alpha1',
    kind: 'User',
    metadata: { name: 'mallory' },
    spec: { username: 'mallory', roles: ['admin'] },
  });
  t.equal(created.status, 403, 'nor create an admin user');
  t.equal(kubectl(gw.kubeconfig, ['-n', ns, 'get', 'users.kiteline.io', 'mallory']).status, 1, 'no such user exists');
});

t.test('point 1: lists and watches across all namespaces leave the install namespace out', async (t) => {
  const as = on(SELF, admin);
  const secrets = await as('GET', '/api/v1/secrets/_all');
  t.equal(secrets.status, 200);
  const namespaces = new Set<string>(secrets.body.items.map((i: any) => i.metadata.namespace));
  t.notOk(namespaces.has(ns), 'no Secret of the install namespace');
  t.ok(namespaces.has(TENANT), "a tenant's Secret is listed");
  const filtered = await as(
    'GET',
    `/api/v1/configmaps/_all?fieldSelector=${encodeURIComponent(`metadata.namespace=${ns}`)}`,
  );
  t.same(filtered.body.items, [], "the caller's own field selector cannot bring it back");
  // A watch from no resourceVersion starts with an ADDED event per existing object.
  const watch = await as('GET', '/api/v1/configmaps/_all?watch=true&timeoutSeconds=2');
  t.equal(watch.status, 200);
  const events = watch.text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  const watched = new Set(events.map((e: any) => e.object.metadata.namespace));
  t.notOk(watched.has(ns), 'the watch shows nothing of the install namespace');
  t.ok(watched.has(TENANT), "and shows the tenant's ConfigMap");
});

t.test('point 1: on a cluster that is not the host, a namespace of the same name is ordinary', async (t) => {
  const as = on(OTHER, admin);
  t.equal((await as('GET', `/api/v1/secrets/${ns}`)).status, 200);
  t.equal(
    (await as('GET', '/api/v1/users.kiteline.io')).status,
    404,
    'no kiteline.io CRDs there: not found, not forbidden',
  );
});

t.test('point 2: the built-in viewer reads everything but Secrets', async (t) => {
  const as = on(OTHER, viewer);
  t.equal((await as('GET', '/api/v1/configmaps/_all')).status, 200);
  t.equal((await as('GET', '/api/v1/secrets/_all')).status, 403);
  t.equal((await as('GET', `/api/v1/secrets/${TENANT}`)).status, 403);
  t.equal((await on(SELF, viewer)('GET', `/api/v1/secrets/${TENANT}/app-secret`)).status, 403);
});

t.test('point 2: a viewer Role of an older release is upgraded when a replica starts', async (t) => {
  const old = kubectl(gw.kubeconfig, [
    '-n',
    ns,
    'patch',
    'roles.kiteline.io',
    'role-viewer',
    '--type=merge',
    '-p',
    '{"spec":{"resources":["*"]}}',
  ]);
  t.equal(old.status, 0, old.stderr);
  await startGateway(t, { namespace: ns, logName: 'security-host' });
  await eventually('the viewer role upgraded', () => {
    const res = kubectl(gw.kubeconfig, [
      '-n',
      ns,
      'get',
      'roles.kiteline.io',
      'role-viewer',
      '-o',
      'jsonpath={.spec.resources}',
    ]);
    return JSON.stringify(JSON.parse(res.stdout || '[]')) === JSON.stringify(['*', '!secrets']);
  });
  await eventually(
    'the running replica refuses Secrets to the viewer again',
    async () => (await on(OTHER, viewer)('GET', '/api/v1/secrets/_all')).status === 403,
  );
});

t.test('point 7: a cluster the caller may not use looks exactly like a missing one', async (t) => {
  const BROKEN = uniqueName('broken');
  // A registered cluster that cannot be reached: today a caller learns its readiness and error.
  const unreachable = testKubeconfig('target-b').replace(
    /server: https:\/\/127\.0\.0\.1:\d+/,
    'server: https://127.0.0.1:1',
  );
  await registerCluster(gw, admin, { name: BROKEN, config: unreachable });
  const ONLY_OTHER = uniqueName('only-other');
  await createRole(gw, admin, {
    name: ONLY_OTHER,
    clusters: [OTHER],
    namespaces: ['*'],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const limited = await apiKeyWithRoles(gw, admin, uniqueName('limited'), [ONLY_OTHER]);
  const missing = await on('no-such-cluster', limited)('GET', '/api/v1/configmaps/default');
  t.equal(missing.status, 404);
  for (const cluster of [BROKEN, SELF]) {
    const res = await on(cluster, limited)('GET', '/api/v1/configmaps/default');
    t.equal(res.status, 404, `${cluster}: 404`);
    t.equal(
      res.body?.error,
      `cluster not found: ${cluster}`,
      `${cluster}: the message of a missing cluster, nothing more`,
    );
    t.same(
      Object.keys(res.body ?? {}).sort(),
      Object.keys(missing.body).sort(),
      `${cluster}: the same shape of answer`,
    );
  }
  const overview = await on(BROKEN, limited)('GET', '/api/v1/overview');
  t.equal(overview.status, 404, 'the overview too');
  t.equal((await on(OTHER, limited)('GET', '/api/v1/configmaps/default')).status, 200, 'its own cluster works');
  const asAdmin = await on(BROKEN, admin)('GET', '/api/v1/configmaps/default');
  t.equal(asAdmin.status, 503, 'an admin, who may use it, learns that it is down');
});
