// Issue 13, points 3 and 10, on real host clusters with two replicas:
//   point 3: the public set-up routes close for good once a super user exists: the anonymous
//            import stays closed when every cluster is gone, create_super_user when every user
//            is gone; create_super_user signs the new admin in, and the set-up goes on with that;
//   point 10: "there is an enabled admin" and "the default cluster is not deleted" hold under
//            parallel calls on two replicas (compare-and-swap, not check-then-write).
import t, { type Test } from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { bootstrapAdmin, registerCluster, testKubeconfig, type Caller } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';

const USERS = '/api/v1/admin/users';
const IMPORT = '/api/v1/admin/clusters/import';
const SUPER_USER = { username: 'root', password: 'correct-horse-battery', name: 'Root' };

/** The User objects in the host (a consistent read, not a replica's cache). */
function liveUsers(gw: TestGateway): Array<{ spec: { username: string; enabled?: boolean; roles?: string[] } }> {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'users.kiteline.io', '-o', 'json']);
  if (res.status !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout).items;
}

await testControlPlane('target-b');

const enabledAdmins = (gw: TestGateway) =>
  liveUsers(gw).filter((u) => u.spec.enabled !== false && (u.spec.roles ?? []).includes('admin'));

t.test('point 3: create_super_user signs in, and the set-up goes on with that session', async (t) => {
  const gw = await startGateway(t, { logName: 'security-setup' });
  const su = await call(gw.url, 'POST', `${USERS}/create_super_user`, { body: SUPER_USER });
  t.equal(su.status, 201);
  const cookie = /auth_token=[^;]+/.exec(su.headers.get('set-cookie') ?? '')?.[0];
  t.ok(cookie, 'the answer carries the session cookie, as a login does');
  const me = await call(gw.url, 'GET', '/api/auth/user', { headers: { cookie: cookie! } });
  t.equal(me.status, 200, 'the cookie is a working session');
  t.equal(me.body?.user?.username ?? me.body?.username, SUPER_USER.username);
  const config = testKubeconfig('target-b');
  const anonymous = await call(gw.url, 'POST', IMPORT, { body: { config } });
  t.equal(anonymous.status, 401, 'the import is no longer public once a user exists, though no cluster does');
  const imported = await call(gw.url, 'POST', IMPORT, { body: { config }, headers: { cookie: cookie! } });
  t.equal(imported.status, 201, imported.text);
});

t.test('point 3: no path re-opens a public route once set-up is done', async (t) => {
  const gw = await startGateway(t, { logName: 'security-setup' });
  const admin = await bootstrapAdmin(gw);
  const id = await registerCluster(gw, admin, { name: 'only', config: testKubeconfig('target-b') });
  t.ok(id > 0);
  // Every cluster gone (by kubectl: the API keeps the default): the anonymous import stays shut.
  t.equal(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'delete', 'clusters.kiteline.io', '--all']).status, 0);
  await eventually('no cluster in the cache', () => gw.services.host.clusters.list().length === 0);
  const anonymous = await call(gw.url, 'POST', IMPORT, { body: { config: testKubeconfig('target-b') } });
  t.equal(anonymous.status, 401, 'zero clusters does not re-open the anonymous import');
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/clusters/', { headers: admin.headers })).body.length,
    0,
    'nothing was imported',
  );
  const viewerKey = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    body: { name: 'v', roles: ['viewer'] },
    headers: admin.headers,
  });
  const asViewer = await eventually('the viewer key to work', async () => {
    const res = await call(gw.url, 'POST', IMPORT, {
      body: { config: testKubeconfig('target-b') },
      headers: { authorization: viewerKey.body.key },
    });
    return res.status === 401 ? undefined : res;
  });
  t.equal(asViewer.status, 403, 'a viewer may not import either');
  t.equal(
    (await call(gw.url, 'POST', IMPORT, { body: { config: testKubeconfig('target-b') }, headers: admin.headers }))
      .status,
    201,
    'an admin may',
  );

  // Every user gone, deleted by hand: create_super_user stays closed for good.
  t.equal(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'delete', 'users.kiteline.io', '--all']).status, 0);
  await eventually('no user in the cache', () => gw.services.host.users.list().length === 0);
  // Give the garbage collector time to remove anything the deleted users owned.
  await new Promise((r) => setTimeout(r, 3000));
  const again = await call(gw.url, 'POST', `${USERS}/create_super_user`, {
    body: { ...SUPER_USER, username: 'intruder' },
  });
  t.equal(again.status, 403, 'create_super_user does not re-open when the users are gone');
  t.equal(liveUsers(gw).length, 0, 'no user was created');
});

/** Two replicas of one install, an admin key usable on both, and `count` more enabled admins. */
async function replicasWithAdmins(t: Test, count: number): Promise<[TestGateway, TestGateway, Caller, number[]]> {
  const a = await startGateway(t, { logName: 'security-setup' });
  const b = await startGateway(t, { namespace: a.namespace, logName: 'security-setup' });
  const admin = await bootstrapAdmin(a);
  await eventually(
    'the admin key on the second replica',
    async () => (await call(b.url, 'GET', USERS, { headers: admin.headers })).status === 200,
  );
  const roles = await call(a.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
  const adminRole = roles.body.roles.find((r: { name: string }) => r.name === 'admin').id;
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const created = await call(a.url, 'POST', USERS, {
      body: { username: `boss-${i}`, password: 'password-boss-1' },
      headers: admin.headers,
    });
    ids.push(created.body.id);
    const assigned = await call(a.url, 'POST', `/api/v1/admin/roles/${adminRole}/assign`, {
      body: { subjectType: 'user', subject: `boss-${i}` },
      headers: admin.headers,
    });
    t.equal(assigned.status, 201);
  }
  // The super user steps aside: only the new admins hold the role, enabled.
  const root = (await call(a.url, 'GET', `${USERS}/?search=admin`, { headers: admin.headers })).body.users.find(
    (u: any) => u.username === 'admin',
  );
  t.equal(
    (await call(a.url, 'POST', `${USERS}/${root.id}/enable`, { body: { enabled: false }, headers: admin.headers }))
      .status,
    200,
  );
  await eventually('both replicas see the admins', () =>
    [a, b].every(
      (gw) =>
        gw.services.users.list().filter((u) => u.spec.enabled !== false && u.spec.roles?.includes('admin')).length ===
        count,
    ),
  );
  return [a, b, admin, ids];
}

t.test('point 10: two admins disabled, deleted or demoted at once on two replicas: one stays', async (t) => {
  const [a, b, admin, [first, second]] = await replicasWithAdmins(t, 2);
  const roles = await call(a.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
  const adminRole = roles.body.roles.find((r: { name: string }) => r.name === 'admin').id;
  const removals = {
    disable: (gw: TestGateway, id: number) =>
      call(gw.url, 'POST', `${USERS}/${id}/enable`, { body: { enabled: false }, headers: admin.headers }),
    demote: (gw: TestGateway, id: number) =>
      call(
        gw.url,
        'DELETE',
        `/api/v1/admin/roles/${adminRole}/assign?subjectType=user&subject=boss-${id === first ? 0 : 1}`,
        { headers: admin.headers },
      ),
  };
  const restore = async () => {
    for (const [i, id] of [first, second].entries()) {
      await call(a.url, 'POST', `${USERS}/${id}/enable`, { body: { enabled: true }, headers: admin.headers });
      await call(a.url, 'POST', `/api/v1/admin/roles/${adminRole}/assign`, {
        body: { subjectType: 'user', subject: `boss-${i}` },
        headers: admin.headers,
      });
    }
    await eventually('both admins back on both replicas', () =>
      [a, b].every(
        (gw) =>
          gw.services.users.list().filter((u) => u.spec.enabled !== false && u.spec.roles?.includes('admin')).length ===
          2,
      ),
    );
  };
  for (let round = 0; round < 6; round++) {
    const [how1, how2] =
      round % 3 === 0 ? ['disable', 'disable'] : round % 3 === 1 ? ['demote', 'demote'] : ['disable', 'demote'];
    const results = await Promise.all([removals[how1 as 'disable'](a, first), removals[how2 as 'disable'](b, second)]);
    const statuses = results.map((r) => r.status).sort();
    t.same(
      statuses,
      [200, 409],
      `round ${round} (${how1} on one replica, ${how2} on the other): one succeeds, one is refused`,
    );
    t.equal(enabledAdmins(a).length, 1, `round ${round}: exactly one enabled admin is left`);
    await restore();
  }
  const deletions = await Promise.all([
    call(a.url, 'DELETE', `${USERS}/${first}`, { headers: admin.headers }),
    call(b.url, 'DELETE', `${USERS}/${second}`, { headers: admin.headers }),
  ]);
  t.same(deletions.map((r) => r.status).sort(), [200, 409], 'two deletes at once: one succeeds, one is refused');
  t.equal(enabledAdmins(a).length, 1, 'an enabled admin is left');
});

t.test('point 10: a cluster made the default on one replica is not deleted on the other', async (t) => {
  const a = await startGateway(t, { logName: 'security-setup' });
  const b = await startGateway(t, { namespace: a.namespace, logName: 'security-setup' });
  const admin = await bootstrapAdmin(a);
  await eventually(
    'the admin key on the second replica',
    async () => (await call(b.url, 'GET', USERS, { headers: admin.headers })).status === 200,
  );
  await registerCluster(a, admin, { name: 'first', config: testKubeconfig('target-b'), isDefault: true });
  for (let round = 0; round < 8; round++) {
    const name = uniqueName('next');
    const id = await registerCluster(a, admin, { name, config: testKubeconfig('target-b') });
    await eventually('both replicas see the new cluster', () =>
      [a, b].every((gw) => gw.services.clusterStore.byId(id)),
    );
    const [made, deleted] = await Promise.all([
      call(a.url, 'PUT', `/api/v1/admin/clusters/${id}`, { body: { isDefault: true }, headers: admin.headers }),
      call(b.url, 'DELETE', `/api/v1/admin/clusters/${id}`, { headers: admin.headers }),
    ]);
    t.notOk(
      made.status === 200 && deleted.status === 200,
      `round ${round}: never both made the default and deleted (${made.status}, ${deleted.status})`,
    );
    const live = JSON.parse(
      kubectl(a.kubeconfig, ['-n', a.namespace, 'get', 'clusters.kiteline.io', '-o', 'json']).stdout,
    ).items;
    t.ok(
      live.some((c: any) => c.spec.isDefault),
      `round ${round}: a default cluster exists`,
    );
  }
});
