// Cluster registration through the REST API (CONTRACT section 5) against real control planes:
// the bootstrap import (multi-context, bad input, closed once clusters exist, one winner under a
// race), create/update/delete with every rule, the stored Secret, GET /api/v1/clusters filtered
// by roles, and the warm connections (requests, discovery of a fresh CRD).
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse, stringify } from 'yaml';
import { KUBECONFIG_KEY } from '../src/host/clusters.js';
import { ID_LABEL, type ClusterResource } from '../src/host/resources.js';
import { installWidgetCrd, kubectl, testControlPlane, testPlaneVersion, uniqueName } from './helpers/clusters.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { eventually } from './helpers/eventually.js';

const PREFIX = '/api/v1/admin/clusters';

async function adminKey(gw: TestGateway): Promise<Record<string, string>> {
  const su = await call(gw.url, 'POST', '/api/v1/admin/users/create_super_user', {
    body: { username: 'admin', password: 'correct-horse-1', name: 'Admin' },
  });
  if (su.status !== 201 && su.status !== 200) throw new Error(`create_super_user: ${su.status} ${su.text}`);
  const login = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'admin', password: 'correct-horse-1' },
  });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const key = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    body: { name: uniqueName('admin-key'), roles: ['admin'] },
    headers: { cookie },
  });
  if (key.status !== 201) throw new Error(`apikey: ${key.status} ${key.text}`);
  return { authorization: key.body.key };
}

/** A kubeconfig with both shared targets as contexts (current: a), plus an exec context. */
async function multiContextKubeconfig(): Promise<string> {
  const docs = await Promise.all(
    ['target-a', 'target-b'].map(async (n) =>
      parse(readFileSync((await testControlPlane(n as 'target-a')).kubeconfigPath, 'utf8')),
    ),
  );
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [...docs.flatMap((d) => d.clusters), { name: 'eks', cluster: { server: 'https://eks.example:443' } }],
    users: [
      ...docs.flatMap((d) => d.users),
      { name: 'eks-user', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: 'aws' } } },
    ],
    contexts: [
      { name: 'a', context: { cluster: 'target-a', user: 'target-a-admin' } },
      { name: 'b', context: { cluster: 'target-b', user: 'target-b-admin' } },
      { name: 'eks', context: { cluster: 'eks', user: 'eks-user' } },
    ],
    'current-context': 'b',
  });
}

function clusterObjects(gw: TestGateway): ClusterResource[] {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', '-o', 'json']);
  if (res.status !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout).items;
}

t.test('bootstrap import: validation, multi-context, closed afterwards', async (t) => {
  const gw = await startGateway(t);
  const bad = await call(gw.url, 'POST', `${PREFIX}/import`, { body: { config: 'clusters: [unclosed' } });
  t.equal(bad.status, 400, 'bad YAML');
  t.match(bad.body, { reason: 'BadRequest', code: 400, error: /not valid YAML/ });
  const empty = await call(gw.url, 'POST', `${PREFIX}/import`, { body: {} });
  t.equal(empty.status, 400, 'neither config nor inCluster');
  const onlyExec = stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'x', cluster: { server: 'https://x:6443' } }],
    users: [{ name: 'x', user: { exec: { command: 'gke-gcloud-auth-plugin' } } }],
    contexts: [{ name: 'x', context: { cluster: 'x', user: 'x' } }],
    'current-context': 'x',
  });
  const exec = await call(gw.url, 'POST', `${PREFIX}/import`, { body: { config: onlyExec } });
  t.equal(exec.status, 400, 'no usable context');
  t.match(exec.body.error, /exec credential plugins are not allowed/);
  t.same(clusterObjects(gw), [], 'failed imports change nothing');

  const res = await call(gw.url, 'POST', `${PREFIX}/import`, { body: { config: await multiContextKubeconfig() } });
  t.equal(res.status, 201, res.text);
  t.same(res.body.clusters, ['a', 'b']);
  t.equal(res.body.skipped.length, 1);
  t.match(res.body.skipped[0], { context: 'eks', reason: /exec/ });
  t.match(res.body.message, /imported 2 clusters/);

  const again = await call(gw.url, 'POST', `${PREFIX}/import`, { body: { inCluster: true } });
  t.equal(again.status, 403, 'closed once clusters exist');
  t.match(again.body, { reason: 'Forbidden', error: 'import not allowed when clusters exist' });

  const headers = await adminKey(gw);
  const list = await eventually('both clusters ready', async () => {
    const r = await call(gw.url, 'GET', `${PREFIX}/`, { headers });
    return r.body.length === 2 && r.body.every((c: { ready: boolean }) => c.ready) ? r : undefined;
  });
  const byName = Object.fromEntries(list.body.map((c: { name: string }) => [c.name, c]));
  t.match(
    byName.b,
    {
      name: 'b',
      isDefault: true,
      enabled: true,
      inCluster: false,
      config: '',
      error: '',
      ready: true,
      version: testPlaneVersion('target-b'),
    },
    'current context is the default',
  );
  t.match(byName.a, { isDefault: false });
  t.same(Object.keys(byName.a).sort(), [
    'config',
    'description',
    'enabled',
    'error',
    'id',
    'impersonate',
    'inCluster',
    'isDefault',
    'name',
    'production',
    'prometheusURL',
    'ready',
    'version',
  ]);
  t.ok(Number.isInteger(byName.a.id) && byName.a.id > 0 && byName.a.id !== byName.b.id, 'distinct integer ids');
  t.equal(gw.services.clusters.defaultCluster()?.name, 'b');
});

t.test('concurrent imports: exactly one winner', async (t) => {
  const gw = await startGateway(t);
  const second = await startGateway(t, { namespace: gw.namespace });
  const config = readFileSync((await testControlPlane('target-a')).kubeconfigPath, 'utf8');
  const results = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      call(i % 2 ? second.url : gw.url, 'POST', `${PREFIX}/import`, { body: { config } }),
    ),
  );
  const statuses = results.map((r) => r.status).sort();
  t.same(statuses, [201, 403, 403, 403, 403, 403], 'one 201, the rest 403');
  t.equal(clusterObjects(gw).length, 1, 'one cluster registered');
  await eventually(
    "the import is in the other replica's cache too",
    () => [gw, second].every((g) => g.services.host.clusters.list().length === 1) || undefined,
  );
});

t.test('create, update, delete and their rules', async (t) => {
  const gw = await startGateway(t);
  const headers = await adminKey(gw);
  const a = await testControlPlane('target-a');
  const b = await testControlPlane('target-b');
  const configA = readFileSync(a.kubeconfigPath, 'utf8');
  const configB = readFileSync(b.kubeconfigPath, 'utf8');

  t.equal((await call(gw.url, 'GET', `${PREFIX}/`)).status, 401, 'admin routes need credentials');
  t.equal((await call(gw.url, 'POST', `${PREFIX}/`, { body: { name: 'x', config: configA } })).status, 401);

  const withExec = configA.replace(/token: .*/, 'exec: {command: /bin/sh, args: [-c, "touch /tmp/pwned"]}');
  const rejected = await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'evil', config: withExec } });
  t.equal(rejected.status, 400);
  t.match(rejected.body.error, /exec credential plugins are not allowed/);
  const pathy = configA.replace(/certificate-authority-data: .*/, 'certificate-authority: /etc/ssl/ca.pem');
  t.equal(
    (await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'pathy', config: pathy } })).status,
    400,
    'file paths',
  );
  t.equal(
    (await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'yaml', config: '{{{' } })).status,
    400,
    'bad YAML',
  );
  t.equal((await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'noconf' } })).status, 400, 'no config');
  t.equal(
    (await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'bad name!', config: configA } })).status,
    400,
    'bad name',
  );
  t.equal(
    (
      await call(gw.url, 'POST', `${PREFIX}/`, {
        headers,
        body: { name: 'p', config: configA, prometheusURL: 'ftp://x' },
      })
    ).status,
    400,
    'bad prometheusURL',
  );
  t.equal(
    (await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { config: configA } })).status,
    400,
    'name required',
  );
  t.same(clusterObjects(gw), [], 'rejected creates change nothing');

  const created = await call(gw.url, 'POST', `${PREFIX}/`, {
    headers,
    body: { name: 'alpha', description: 'first', config: configA, prometheusURL: 'http://prom:9090' },
  });
  t.equal(created.status, 201, created.text);
  t.match(created.body, { id: Number, message: 'cluster created successfully' });
  const alphaId = created.body.id;
  const dup = await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'alpha', config: configB } });
  t.equal(dup.status, 409);
  t.equal(dup.body.reason, 'AlreadyExists');

  // The stored Secret: sanitized, labelled, owned by the Cluster object.
  const [alphaObj] = clusterObjects(gw);
  t.equal(alphaObj.metadata.labels?.[ID_LABEL], String(alphaId));
  t.equal(alphaObj.spec.isDefault, true, 'the first cluster becomes the default');
  const secretName = alphaObj.spec.kubeconfigSecretRef!.name;
  const secret = JSON.parse(
    kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', secretName, '-o', 'json']).stdout,
  );
  t.equal(secret.metadata.labels['app.kubernetes.io/managed-by'], 'kiteline');
  t.match(secret.metadata.ownerReferences, [
    { kind: 'Cluster', name: alphaObj.metadata.name, uid: alphaObj.metadata.uid },
  ]);
  const stored = parse(Buffer.from(secret.data[KUBECONFIG_KEY], 'base64').toString('utf8'));
  t.equal(stored.contexts.length, 1);
  t.equal(stored.clusters[0].cluster.server, a.server);

  const beta = await call(gw.url, 'POST', `${PREFIX}/`, {
    headers,
    body: { name: 'beta', config: configB, isDefault: true },
  });
  t.equal(beta.status, 201);
  // The create answers once the other default was cleared and this replica's cache shows both.
  const objs = gw.services.host.clusters.list();
  t.same(
    objs.filter((o) => o.spec.isDefault).map((o) => o.spec.name),
    ['beta'],
    'beta is the only default when the create answers',
  );
  t.same(
    clusterObjects(gw)
      .filter((o) => o.spec.isDefault)
      .map((o) => o.spec.name),
    ['beta'],
    'also in the host cluster',
  );

  // Update: absent members untouched; rename keeps the id.
  t.equal((await call(gw.url, 'PUT', `${PREFIX}/abc`, { headers, body: {} })).status, 400, 'bad id');
  t.equal((await call(gw.url, 'PUT', `${PREFIX}/999999`, { headers, body: {} })).status, 404, 'unknown id');
  const upd = await call(gw.url, 'PUT', `${PREFIX}/${alphaId}`, { headers, body: { description: 'changed' } });
  t.same(upd.body, { message: 'cluster updated successfully' });
  // Read-your-writes: the next read on this replica shows the change, no polling.
  let view = ((await call(gw.url, 'GET', `${PREFIX}/`, { headers })).body as any[]).find((c) => c.id === alphaId);
  t.equal(view?.description, 'changed', 'update visible at once');
  t.match(
    view,
    { name: 'alpha', enabled: true, prometheusURL: 'http://prom:9090', isDefault: false },
    'omitted members kept (Kite would disable)',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${PREFIX}/${alphaId}`, { headers, body: { name: 'beta' } })).status,
    409,
    'rename onto a taken name',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${PREFIX}/${alphaId}`, { headers, body: { config: 'nope: [' } })).status,
    400,
    'bad config on update',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${PREFIX}/${alphaId}`, { headers, body: { name: '' } })).status,
    200,
    'empty name is ignored',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${PREFIX}/${alphaId}`, { headers, body: { name: 'alpha-renamed' } })).status,
    200,
  );
  view = ((await call(gw.url, 'GET', `${PREFIX}/`, { headers })).body as any[]).find((c) => c.name === 'alpha-renamed');
  t.ok(view, 'rename visible at once');
  t.equal(view.id, alphaId, 'renames keep the id');
  await eventually('the directory serves the new name', () => gw.services.clusters.get('alpha-renamed') ?? undefined);
  t.notOk(gw.services.clusters.get('alpha'), 'the old name is gone');
  const reuse = await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name: 'alpha', config: configA } });
  t.equal(reuse.status, 201, 'the old name can be registered again');

  // Default rules.
  const betaId = beta.body.id;
  const unset = await call(gw.url, 'PUT', `${PREFIX}/${betaId}`, { headers, body: { isDefault: false } });
  t.equal(unset.status, 400, 'cannot unset the only default');
  const del = await call(gw.url, 'DELETE', `${PREFIX}/${betaId}`, { headers });
  t.equal(del.status, 400);
  t.match(del.body.error, /cannot delete default cluster/);
  t.equal((await call(gw.url, 'PUT', `${PREFIX}/${alphaId}`, { headers, body: { isDefault: true } })).status, 200);
  t.equal(gw.services.clusters.defaultCluster()?.id, alphaId, 'the default moved when the update answers');
  t.notOk(
    gw.services.host.clusters.list().find((o) => o.spec.name === 'beta')?.spec.isDefault,
    'the old default was cleared',
  );

  // Disable and enable: the warm connection goes and comes back.
  t.equal((await call(gw.url, 'PUT', `${PREFIX}/${betaId}`, { headers, body: { enabled: false } })).status, 200);
  await eventually('beta disabled in the directory', () => (gw.services.clusters.get('beta') ? undefined : true));
  t.equal((await call(gw.url, 'PUT', `${PREFIX}/${betaId}`, { headers, body: { enabled: true } })).status, 200);
  await eventually('beta back', () => gw.services.clusters.get('beta')?.ready || undefined);

  // Config update: a new kubeconfig replaces the connection (beta now points at target-a).
  t.equal((await call(gw.url, 'PUT', `${PREFIX}/${betaId}`, { headers, body: { config: configA } })).status, 200);
  const secretB = gw.services.host.clusters.list().find((o) => o.spec.name === 'beta')!.spec.kubeconfigSecretRef!.name;
  await eventually('secret rewritten', () => {
    const s = gw.services.host.secrets.get(secretB, gw.namespace);
    return s && Buffer.from(s.data![KUBECONFIG_KEY], 'base64').toString().includes(a.server) ? true : undefined;
  });

  // Delete: the object and its Secret go.
  const gone = await call(gw.url, 'DELETE', `${PREFIX}/${betaId}`, { headers });
  t.same(gone.body, { message: 'cluster deleted successfully' });
  t.notOk(
    gw.services.host.clusters.list().find((o) => o.spec.name === 'beta'),
    'gone from the cache when the delete answers',
  );
  await eventually('beta gone', () => (gw.services.clusters.get('beta') ? undefined : true));
  t.not(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', secretB]).status, 0, 'its Secret is deleted');
  t.equal((await call(gw.url, 'DELETE', `${PREFIX}/${betaId}`, { headers })).status, 404);
});

t.test("GET /api/v1/clusters lists what the caller's roles reach", async (t) => {
  const gw = await startGateway(t);
  const headers = await adminKey(gw);
  const configA = readFileSync((await testControlPlane('target-a')).kubeconfigPath, 'utf8');
  for (const name of ['prod-eu', 'prod-us', 'dev']) {
    t.equal((await call(gw.url, 'POST', `${PREFIX}/`, { headers, body: { name, config: configA } })).status, 201);
  }
  const role = await call(gw.url, 'POST', '/api/v1/admin/roles/', {
    headers,
    body: { name: 'prod-reader', clusters: ['prod-*'], namespaces: ['*'], resources: ['*'], verbs: ['get', 'list'] },
  });
  t.equal(role.status, 201, role.text);
  const key = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    headers,
    body: { name: 'reader', roles: ['prod-reader'] },
  });
  const reader = { authorization: key.body.key };
  t.equal((await call(gw.url, 'GET', '/api/v1/clusters')).status, 401);
  t.equal((await call(gw.url, 'GET', `${PREFIX}/`, { headers: reader })).status, 403, 'not an admin');
  const list = await eventually('all ready', async () => {
    const r = await call(gw.url, 'GET', '/api/v1/clusters', { headers: reader });
    return r.body.length === 2 && r.body.every((c: { ready: boolean }) => c.ready) ? r : undefined;
  });
  t.same(
    list.body.map((c: { name: string }) => c.name),
    ['prod-eu', 'prod-us'],
  );
  t.match(list.body[0], {
    name: 'prod-eu',
    version: testPlaneVersion('target-a'),
    isDefault: true,
    ready: true,
    error: '',
  });
  const all = await call(gw.url, 'GET', '/api/v1/clusters', { headers });
  t.same(
    all.body.map((c: { name: string }) => c.name),
    ['dev', 'prod-eu', 'prod-us'],
    'admin sees all, sorted by name',
  );
});

t.test('warm connections: requests, errors, discovery of a fresh CRD', async (t) => {
  const gw = await startGateway(t);
  const headers = await adminKey(gw);
  const a = await testControlPlane('target-a');
  t.equal(
    (
      await call(gw.url, 'POST', `${PREFIX}/`, {
        headers,
        body: { name: 'a', config: readFileSync(a.kubeconfigPath, 'utf8') },
      })
    ).status,
    201,
  );
  const conn = await eventually('a ready', () => {
    const c = gw.services.clusters.get('a');
    return c?.ready ? c : undefined;
  });
  const res = await conn.request({
    method: 'GET',
    path: '/api/v1/namespaces/default',
    headers: { authorization: 'Bearer forged', accept: 'application/json' },
  });
  t.equal(res.statusCode, 200, 'the cluster credentials are used (a caller-provided Authorization is dropped)');
  res.resume();
  t.match(await conn.resolveResource('deployments'), { group: 'apps', version: 'v1', namespaced: true });
  t.match(await conn.resolveResource('nodes'), { group: '', namespaced: false });
  t.equal(await conn.resolveResource('nosuchthings'), undefined);

  const group = `${uniqueName('g')}.example.com`;
  installWidgetCrd(t, a.kubeconfigPath, group);
  t.match(
    await conn.resolveResource(`widgets.${group}`),
    { group, version: 'v1', kind: 'Widget', namespaced: true },
    'resolved on the first try after it is established',
  );

  const aborted = new AbortController();
  const watch = await conn.request({ method: 'GET', path: '/api/v1/namespaces?watch=true', signal: aborted.signal });
  t.equal(watch.statusCode, 200, 'a watch streams');
  aborted.abort();
});
