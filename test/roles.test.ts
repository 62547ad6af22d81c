// Roles against a real host cluster: built-ins, CRUD, assign/unassign, the authorization function
// the resource gateway calls, and what admin routes require.
import t from 'tap';
import { kubectl } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';
import { bootstrapAdmin, login, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';

const ROLES = '/api/v1/admin/roles';

t.test('built-in roles exist and cannot be changed or deleted', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const list = await call(gw.url, 'GET', `${ROLES}/`, as);
  t.equal(list.status, 200);
  const admin = list.body.roles.find((r: { name: string }) => r.name === 'admin');
  const viewer = list.body.roles.find((r: { name: string }) => r.name === 'viewer');
  t.match(admin, { id: Number, isSystem: true, clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['*'] });
  t.match(viewer, { id: Number, isSystem: true, resources: ['*', '!secrets'], verbs: ['get', 'list', 'watch'] });
  t.match(admin.assignments, [{ roleId: admin.id, subjectType: 'user', subject: 'admin' }]);
  const put = await call(gw.url, 'PUT', `${ROLES}/${viewer.id}`, { ...as, body: { verbs: ['*'] } });
  t.equal(put.status, 403);
  t.match(put.body.error, /built-in role viewer cannot be changed/);
  t.equal((await call(gw.url, 'DELETE', `${ROLES}/${admin.id}`, as)).status, 403);
  // Deleted by hand: recreated.
  kubectl(gw.kubeconfig, ['-n', gw.namespace, 'delete', 'role.kiteline.io', 'role-viewer']);
  await eventually(
    'viewer recreated',
    async () => {
      const res = await call(gw.url, 'GET', `${ROLES}/`, as);
      return res.body.roles.some((r: { name: string }) => r.name === 'viewer');
    },
    10_000,
  );
});

t.test('role CRUD and validation', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const created = await call(gw.url, 'POST', ROLES, {
    ...as,
    body: {
      name: 'shop-dev',
      description: 'shop developers',
      clusters: ['dev-*'],
      namespaces: ['shop', '!shop-secret'],
      resources: ['*'],
      verbs: ['get', 'list'],
    },
  });
  t.equal(created.status, 201);
  t.match(created.body.role, {
    id: Number,
    name: 'shop-dev',
    description: 'shop developers',
    isSystem: false,
    clusters: ['dev-*'],
    assignments: [],
  });
  const id = created.body.role.id;
  t.equal(
    (await call(gw.url, 'POST', `${ROLES}/`, { ...as, body: { name: 'shop-dev' } })).body.reason,
    'AlreadyExists',
  );
  const bare = await call(gw.url, 'POST', `${ROLES}/`, { ...as, body: { name: 'empty' } });
  t.match(
    bare.body.role,
    { clusters: [], namespaces: [], resources: [], verbs: [] },
    'omitted lists are empty (and match nothing)',
  );

  for (const body of [
    {},
    { name: 'has space' },
    { name: 'x', verbs: ['!'] },
    { name: 'x', clusters: ['a b'] },
    { name: 'x', verbs: [{}] },
    { name: 'x', typo: 1 },
  ]) {
    t.equal((await call(gw.url, 'POST', `${ROLES}/`, { ...as, body })).status, 400, JSON.stringify(body));
  }
  const got = await call(gw.url, 'GET', `${ROLES}/${id}`, as);
  t.equal(got.body.role.name, 'shop-dev');
  t.equal((await call(gw.url, 'GET', `${ROLES}/9999`, as)).status, 404);
  t.equal((await call(gw.url, 'GET', `${ROLES}/-1`, as)).body.error, 'invalid id');

  const updated = await call(gw.url, 'PUT', `${ROLES}/${id}`, { ...as, body: { verbs: ['*'], description: '' } });
  t.equal(updated.status, 200);
  t.match(updated.body.role, { verbs: ['*'], clusters: ['dev-*'], description: '' }, 'omitted members are kept');
  t.equal(
    (await call(gw.url, 'PUT', `${ROLES}/${id}`, { ...as, body: { name: 'renamed' } })).status,
    400,
    'no renames',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${ROLES}/${id}`, { ...as, body: { ...updated.body.role } })).status,
    200,
    'sending back the fetched role works',
  );

  const del = await call(gw.url, 'DELETE', `${ROLES}/${id}`, as);
  t.same(del.body, { success: true });
  t.equal((await call(gw.url, 'DELETE', `${ROLES}/${id}`, as)).status, 404);
});

t.test('assign, unassign, and the authorization function', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const auth = gw.services.auth;
  await call(gw.url, 'POST', '/api/v1/admin/users/', { ...as, body: { username: 'dev1', password: 'dev1-password' } });
  const role = (
    await call(gw.url, 'POST', ROLES, {
      ...as,
      body: {
        name: 'deployers',
        clusters: ['prod-*'],
        namespaces: ['*', '!kube-system'],
        resources: ['deployments'],
        verbs: ['get', 'list', 'patch'],
      },
    })
  ).body.role;

  const assign = await call(gw.url, 'POST', `${ROLES}/${role.id}/assign`, {
    ...as,
    body: { subjectType: 'user', subject: 'dev1' },
  });
  t.equal(assign.status, 201);
  t.same(assign.body, { assignment: { roleId: role.id, subjectType: 'user', subject: 'dev1' } });
  t.equal(
    (
      await call(gw.url, 'POST', `${ROLES}/${role.id}/assign`, {
        ...as,
        body: { subjectType: 'user', subject: 'dev1' },
      })
    ).status,
    200,
    'again: 200',
  );
  t.equal(
    (
      await call(gw.url, 'POST', `${ROLES}/${role.id}/assign`, {
        ...as,
        body: { subjectType: 'team', subject: 'devs' },
      })
    ).status,
    400,
    'an unknown subject type: 400 (user and group exist: test/sso-oidc.test.ts assigns groups)',
  );
  t.equal(
    (
      await call(gw.url, 'POST', `${ROLES}/${role.id}/assign`, {
        ...as,
        body: { subjectType: 'user', subject: 'nobody' },
      })
    ).status,
    404,
  );
  t.equal(
    (await call(gw.url, 'POST', `${ROLES}/9999/assign`, { ...as, body: { subjectType: 'user', subject: 'dev1' } }))
      .status,
    404,
  );

  const cookie = await login(gw.url, 'dev1', 'dev1-password');
  const me = (await call(gw.url, 'GET', '/api/auth/user', withCookie(cookie))).body.user;
  t.same(me.roles, [{ id: role.id, name: 'deployers' }]);
  const listed = await call(gw.url, 'GET', `${ROLES}/${role.id}`, as);
  t.same(listed.body.role.assignments, [{ roleId: role.id, subjectType: 'user', subject: 'dev1' }]);

  const principal = { kind: 'user' as const, id: me.id, name: 'dev1', roles: ['deployers'], groups: [] };
  const may = (cluster: string, namespace: string, resource: string, verb: 'get' | 'list' | 'patch' | 'delete') =>
    auth.authorize(principal, { cluster, namespace, resource, verb });
  t.ok(may('prod-eu', 'shop', 'deployments', 'patch'));
  t.notOk(may('prod-eu', 'kube-system', 'deployments', 'get'), 'excluded namespace');
  t.notOk(may('prod-eu', '_all', 'deployments', 'list'), 'all namespaces needs a role without exclusions');
  t.notOk(may('dev', 'shop', 'deployments', 'get'), 'other cluster');
  t.notOk(may('prod-eu', 'shop', 'secrets', 'get'), 'other resource');
  t.notOk(may('prod-eu', 'shop', 'deployments', 'delete'), 'other verb');
  t.ok(auth.canAccessCluster(principal, 'prod-us'));
  t.notOk(auth.canAccessCluster(principal, 'staging'));
  t.notOk(auth.isAdmin(principal));
  t.ok(auth.isAdmin({ ...principal, roles: ['admin'] }));
  t.notOk(
    auth.authorize(
      { ...principal, roles: ['no-such-role'] },
      { cluster: 'prod-eu', namespace: 'shop', resource: 'deployments', verb: 'get' },
    ),
  );

  // A role edit applies at once to the holder.
  await call(gw.url, 'PUT', `${ROLES}/${role.id}`, { ...as, body: { verbs: ['*'] } });
  t.ok(may('prod-eu', 'shop', 'deployments', 'delete'), 'edited role applies');

  const unassign = await call(gw.url, 'DELETE', `${ROLES}/${role.id}/assign?subjectType=user&subject=dev1`, as);
  t.same(unassign.body, { success: true });
  t.same((await call(gw.url, 'GET', '/api/auth/user', withCookie(cookie))).body.user.roles, []);
  t.equal(
    (await call(gw.url, 'DELETE', `${ROLES}/${role.id}/assign?subjectType=user`, as)).status,
    400,
    'subject is required',
  );

  // The last admin keeps the admin role; deleting a role removes its assignments.
  const adminRole = (await call(gw.url, 'GET', `${ROLES}/`, as)).body.roles.find(
    (r: { name: string }) => r.name === 'admin',
  );
  t.equal(
    (await call(gw.url, 'DELETE', `${ROLES}/${adminRole.id}/assign?subjectType=user&subject=admin`, as)).status,
    409,
  );
  await call(gw.url, 'POST', `${ROLES}/${role.id}/assign`, { ...as, body: { subjectType: 'user', subject: 'dev1' } });
  t.equal((await call(gw.url, 'DELETE', `${ROLES}/${role.id}`, as)).status, 200);
  const again = await call(gw.url, 'POST', ROLES, {
    ...as,
    body: { name: 'deployers', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['*'] },
  });
  t.equal(again.status, 201);
  t.same(again.body.role.assignments, [], 'a new role of the same name inherits nobody');

  // A non-admin cannot use the role admin routes.
  t.equal((await call(gw.url, 'GET', `${ROLES}/`, withCookie(cookie))).status, 403);
});

t.test('a Role applied with kubectl gets an id and applies', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const applied = kubectl(
    gw.kubeconfig,
    ['apply', '-f', '-'],
    `
apiVersion: kiteline.io/v1alpha1
kind: Role
metadata: {name: gitops-readers, namespace: ${gw.namespace}}
spec: {clusters: ["*"], namespaces: [default], resources: [configmaps], verbs: [get]}
`,
  );
  t.equal(applied.status, 0, applied.stderr);
  const role = await eventually(
    'the gitops-readers role',
    async () => {
      const res = await call(gw.url, 'GET', `${ROLES}/`, as);
      return res.body.roles.find((r: { name: string }) => r.name === 'gitops-readers');
    },
    10_000,
  );
  t.match(role, { id: Number, name: 'gitops-readers', isSystem: false, namespaces: ['default'] });
  t.ok(
    gw.services.auth.authorize(
      { kind: 'apikey', id: 1, name: 'x', roles: ['gitops-readers'], groups: [] },
      { cluster: 'c', namespace: 'default', resource: 'configmaps', verb: 'get' },
    ),
  );
});

t.test('deleting a role takes it from the API keys holding it (the role store, not the route)', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const role = (
    await call(gw.url, 'POST', ROLES, {
      ...as,
      body: { name: 'ci', clusters: ['*'], namespaces: ['*'], resources: ['secrets'], verbs: ['get'] },
    })
  ).body.role;
  const key = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    ...as,
    body: { name: 'ci-key', roles: ['ci', 'viewer'] },
  });
  t.equal(key.status, 201, key.text);
  t.equal((await call(gw.url, 'DELETE', `${ROLES}/${role.id}`, as)).status, 200);
  // No polling: the delete answers once every holder's write is in this replica's cache.
  const listed = (await call(gw.url, 'GET', '/api/v1/admin/apikeys/', as)).body.apiKeys.find(
    (k: { name: string }) => k.name === 'ci-key',
  );
  t.same(listed.roles, ['viewer'], 'the deleted role left the key; its other roles stay');
  t.equal(
    (
      await call(gw.url, 'POST', ROLES, {
        ...as,
        body: { name: 'ci', clusters: ['*'], namespaces: ['*'], resources: ['secrets'], verbs: ['get'] },
      })
    ).status,
    201,
  );
  const caller = (await call(gw.url, 'GET', '/api/auth/user', { headers: { authorization: `Bearer ${key.body.key}` } }))
    .body.user;
  t.same(
    caller.roles.map((r: { name: string }) => r.name),
    ['viewer'],
    'a new role of the same name grants the key nothing',
  );
});
