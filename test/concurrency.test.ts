// Races at the numbers of issue 8 against a real host cluster, always with two replicas sharing one
// install namespace: 50 parallel create_super_user and 50 parallel imports have exactly one winner,
// ids handed out by two replicas at once (users, roles, API keys) are unique, and parallel isDefault
// flips leave exactly one default cluster. (Parallel creates of one username: test/users.test.ts.)
import t from 'tap';
import { ID_LABEL } from '../src/host/resources.js';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { bootstrapAdmin, registerCluster, testKubeconfig, type Caller } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';

const PARALLEL = 50;

/** Two replicas on one fresh install namespace. */
async function replicaPair(t: Parameters<typeof startGateway>[0]): Promise<[TestGateway, TestGateway]> {
  const first = await startGateway(t, { logName: 'concurrency' });
  const second = await startGateway(t, { namespace: first.namespace, logName: 'concurrency' });
  return [first, second];
}

/** The objects of one kiteline kind in the install namespace, read from the host cluster. */
function hostObjects(
  gw: TestGateway,
  kind: string,
): Array<{ metadata: { name: string; labels?: Record<string, string> }; spec?: Record<string, unknown> }> {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', `${kind}.kiteline.io`, '-o', 'json']);
  if (res.status !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout).items;
}

/** Waits until a caller's API key authenticates on a replica (its caches have seen the key). */
async function usableOn(gw: TestGateway, caller: Caller): Promise<void> {
  await eventually(
    'the admin key on the second replica',
    async () => (await call(gw.url, 'GET', '/api/v1/clusters', { headers: caller.headers })).status === 200,
    30_000,
    100,
  );
}

t.test(`${PARALLEL} parallel create_super_user on two replicas: exactly one winner`, async (t) => {
  const [a, b] = await replicaPair(t);
  const attempts = await Promise.all(
    Array.from({ length: PARALLEL }, (_, i) =>
      call(i % 2 ? b.url : a.url, 'POST', '/api/v1/admin/users/create_super_user', {
        body: { username: `boss${i}`, password: 'password-boss', name: `Boss ${i}` },
      }),
    ),
  );
  t.equal(attempts.filter((r) => r.status === 201).length, 1, 'one 201');
  const losers = attempts.filter((r) => r.status !== 201);
  t.equal(losers.length, PARALLEL - 1);
  t.ok(
    losers.every((r) => r.status === 403 && r.body?.reason === 'Forbidden'),
    'every other call gets 403 Forbidden',
  );
  t.equal(hostObjects(a, 'users').length, 1, 'one User object in the host cluster');
});

t.test(`${PARALLEL} parallel imports on two replicas: exactly one winner`, async (t) => {
  const [a, b] = await replicaPair(t);
  const config = testKubeconfig('target-a');
  const attempts = await Promise.all(
    Array.from({ length: PARALLEL }, (_, i) =>
      call(i % 2 ? b.url : a.url, 'POST', '/api/v1/admin/clusters/import', { body: { config } }),
    ),
  );
  t.equal(attempts.filter((r) => r.status === 201).length, 1, 'one 201');
  t.ok(
    attempts.filter((r) => r.status !== 201).every((r) => r.status === 403),
    'every other call gets 403',
  );
  const clusters = hostObjects(a, 'clusters');
  t.equal(clusters.length, 1, 'one Cluster object in the host cluster');
  t.equal(clusters[0].spec?.isDefault, true, 'and it is the default');
});

t.test('ids from two replicas creating users, roles and API keys at once are unique', async (t) => {
  const [a, b] = await replicaPair(t);
  const admin = await bootstrapAdmin(a);
  await usableOn(b, admin);
  const N = 16;
  const on = (i: number) => (i % 2 ? b.url : a.url);
  const post = (i: number, path: string, body: unknown) => call(on(i), 'POST', path, { body, headers: admin.headers });
  const [users, roles] = await Promise.all([
    Promise.all(
      Array.from({ length: N }, (_, i) =>
        post(i, '/api/v1/admin/users/', { username: `racer${i}`, password: 'password-racer' }),
      ),
    ),
    Promise.all(
      Array.from({ length: N }, (_, i) =>
        post(i, '/api/v1/admin/roles/', {
          name: `role${i}`,
          clusters: ['*'],
          namespaces: ['default'],
          resources: ['pods'],
          verbs: ['get'],
        }),
      ),
    ),
  ]);
  // Keys at the same time as more users (the roles they name are the built-in ones: no cache wait).
  const [keys, moreUsers] = await Promise.all([
    Promise.all(
      Array.from({ length: N }, (_, i) => post(i, '/api/v1/admin/apikeys/', { name: `key${i}`, roles: ['viewer'] })),
    ),
    Promise.all(
      Array.from({ length: N }, (_, i) =>
        post(i, '/api/v1/admin/users/', { username: `later${i}`, password: 'password-later' }),
      ),
    ),
  ]);
  for (const [what, results, idOf] of [
    ['users', [...users, ...moreUsers], (r: any) => r.body.id],
    ['roles', roles, (r: any) => r.body.role.id],
    ['API keys', keys, (r: any) => r.body.id],
  ] as const) {
    t.ok(
      results.every((r) => r.status === 201),
      `all ${what} created`,
    );
    const ids = results.map(idOf);
    t.ok(
      ids.every((id) => Number.isInteger(id) && id > 0),
      `${what}: positive integer ids`,
    );
    t.equal(new Set(ids).size, ids.length, `${what}: no id handed out twice`);
  }
  // The host cluster agrees: every object of a kind carries a distinct id label.
  for (const kind of ['users', 'roles', 'apikeys']) {
    const labels = hostObjects(a, kind)
      .map((o) => o.metadata.labels?.[ID_LABEL])
      .filter((id) => id !== undefined);
    t.equal(new Set(labels).size, labels.length, `${kind}: id labels in the host cluster are distinct`);
  }
});

t.test('parallel isDefault flips on two replicas leave exactly one default', async (t) => {
  const [a, b] = await replicaPair(t);
  const admin = await bootstrapAdmin(a);
  await usableOn(b, admin);
  const config = testKubeconfig('target-a');
  const names = Array.from({ length: 6 }, () => uniqueName('flip'));
  const ids: number[] = [];
  for (const name of names) ids.push(await registerCluster(a, admin, { name, config }));
  await eventually('both replicas to see every cluster', async () => {
    for (const gw of [a, b]) {
      const res = await call(gw.url, 'GET', '/api/v1/admin/clusters/', { headers: admin.headers });
      if (res.body?.length !== names.length) return false;
    }
    return true;
  });

  for (let round = 0; round < 3; round++) {
    const flips = await Promise.all(
      ids.map((id, i) =>
        call(i % 2 ? b.url : a.url, 'PUT', `/api/v1/admin/clusters/${id}`, {
          body: { isDefault: true },
          headers: admin.headers,
        }),
      ),
    );
    t.ok(
      flips.every((r) => r.status === 200),
      `round ${round}: every flip answered 200`,
    );
    const settled = await eventually(`round ${round}: exactly one default in the host cluster`, () => {
      const defaults = hostObjects(a, 'clusters').filter((c) => c.spec?.isDefault === true);
      return defaults.length === 1 ? defaults[0] : undefined;
    });
    t.ok(names.includes(settled.spec?.name as string), `round ${round}: the default is one of the flipped clusters`);
    const expected = settled.spec?.name as string;
    await eventually(`round ${round}: both replicas agree on the default`, async () => {
      for (const gw of [a, b]) {
        const list = await call<Array<{ name: string; isDefault: boolean }>>(gw.url, 'GET', '/api/v1/admin/clusters/', {
          headers: admin.headers,
        });
        const defaults = list.body.filter((c) => c.isDefault).map((c) => c.name);
        if (defaults.length !== 1 || defaults[0] !== expected) return false;
      }
      return true;
    });
    t.pass(`round ${round}: both replicas show ${expected} as the only default`);
  }
});
