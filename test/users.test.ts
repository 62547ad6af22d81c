// User administration against a real host cluster (CONTRACT section 4): bootstrap, list with its
// query, create/update/delete/reset/enable, the 4xx rules, and the race rules (parallel super
// users, parallel creates of one username, ids from two replicas).
import t from 'tap';
import { kubectl } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';
import { ADMIN, bootstrapAdmin, login, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';

const USERS = '/api/v1/admin/users';

t.test('create_super_user: public once, exactly one winner under concurrent calls', async (t) => {
  const gw = await startGateway(t);
  const init = await call(gw.url, 'GET', '/api/v1/init_check');
  t.same(init.body, { initialized: false, step: 0 });

  const bad = await call(gw.url, 'POST', `${USERS}/create_super_user`, {
    body: { username: 'a b', password: 'longenough' },
  });
  t.equal(bad.status, 400, 'invalid username');
  t.match(bad.body, { reason: 'BadRequest', code: 400, error: /username/ });
  const short = await call(gw.url, 'POST', `${USERS}/create_super_user`, {
    body: { username: 'ab', password: 'short' },
  });
  t.equal(short.status, 400, 'password too short');
  t.match(short.body.error, /8 to 128/);

  const attempts = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      call(gw.url, 'POST', `${USERS}/create_super_user`, {
        body: { username: `root${i}`, password: 'password-123', name: `Root ${i}` },
      }),
    ),
  );
  const winners = attempts.filter((r) => r.status === 201);
  t.equal(winners.length, 1, 'exactly one super user');
  t.ok(
    attempts.filter((r) => r.status !== 201).every((r) => r.status === 403),
    'the others get 403',
  );
  const winner = winners[0].body;
  t.match(winner, {
    id: Number,
    username: /^root\d$/,
    provider: 'password',
    enabled: true,
    lastLoginAt: null,
    avatar_url: '',
  });
  t.same(
    winner.roles.map((r: { name: string }) => r.name),
    ['admin'],
    'the super user is admin',
  );
  t.notOk('password' in winner);
  const users = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'users.kiteline.io', '-o', 'name']);
  t.equal(users.stdout.trim().split('\n').length, 1, 'one User CR in the host cluster');

  const again = await call(gw.url, 'POST', `${USERS}/create_super_user`, { body: ADMIN });
  t.equal(again.status, 403);
  t.same(again.body, { error: 'super user already exists', reason: 'Forbidden', code: 403 });
  t.same((await call(gw.url, 'GET', '/api/v1/init_check')).body, { initialized: false, step: 1 });
});

t.test('admin routes need an admin', async (t) => {
  const gw = await startGateway(t);
  const anonymous = await call(gw.url, 'GET', `${USERS}/`);
  t.equal(anonymous.status, 401);
  t.equal(anonymous.body.reason, 'Unauthorized');
  const cookie = await bootstrapAdmin(gw.url);
  const created = await call(gw.url, 'POST', `${USERS}/`, {
    ...withCookie(cookie),
    body: { username: 'plain', password: 'plain-password' },
  });
  t.equal(created.status, 201);
  t.same(created.body.roles, [], 'a created user holds no role');
  const plainCookie = await login(gw.url, 'plain', 'plain-password');
  const forbidden = await call(gw.url, 'GET', `${USERS}/`, withCookie(plainCookie));
  t.equal(forbidden.status, 403);
  t.equal(forbidden.body.error, 'admin role required');
  const bad = await call(gw.url, 'GET', `${USERS}/`, { headers: { cookie: 'auth_token=v1.forged.sig' } });
  t.equal(bad.status, 401);
  t.match(bad.headers.get('set-cookie') ?? '', /auth_token=;.*Max-Age=0/, 'a bad session cookie is cleared');
});

t.test('create, list, update, reset_password, enable, delete', async (t) => {
  const gw = await startGateway(t);
  const cookie = await bootstrapAdmin(gw.url);
  const as = withCookie(cookie);

  const names = ['carol', 'Alice', 'bob.smith@example.com', 'dave_x'];
  const ids: Record<string, number> = {};
  for (const username of names) {
    const res = await call(gw.url, 'POST', USERS, {
      ...as,
      body: { username, password: 'password-' + username, name: `Name of ${username}` },
    });
    t.equal(res.status, 201, `created ${username}`);
    t.match(res.body, {
      id: Number,
      username,
      name: `Name of ${username}`,
      provider: 'password',
      enabled: true,
      createdAt: String,
    });
    ids[username] = res.body.id;
  }
  const allIds = Object.values(ids);
  t.equal(new Set(allIds).size, allIds.length, 'ids are unique');

  const dup = await call(gw.url, 'POST', `${USERS}/`, { ...as, body: { username: 'carol', password: 'password-xyz' } });
  t.equal(dup.status, 409);
  t.equal(dup.body.reason, 'AlreadyExists');
  const caseDiffers = await call(gw.url, 'POST', `${USERS}/`, {
    ...as,
    body: { username: 'CAROL', password: 'password-xyz' },
  });
  t.equal(caseDiffers.status, 201, 'usernames are case-sensitive');
  ids.CAROL = caseDiffers.body.id;
  for (const body of [
    { username: 'x' },
    { password: 'password-1' },
    { username: 'a/b', password: 'password-1' },
    { username: 'okname', password: 'x'.repeat(129) },
  ]) {
    const res = await call(gw.url, 'POST', `${USERS}/`, { ...as, body });
    t.equal(res.status, 400, `400 for ${JSON.stringify(body).slice(0, 60)}`);
  }
  const badJson = await call(gw.url, 'POST', `${USERS}/`, {
    ...as,
    raw: '{"username":',
    headers: { cookie, 'content-type': 'application/json' },
  });
  t.equal(badJson.status, 400, 'bad JSON is 400');

  // list: default page, total, sort, search, role
  const list = await call(gw.url, 'GET', `${USERS}/`, as);
  t.equal(list.status, 200);
  t.match(list.body, { total: 6, page: 1, size: 20 });
  const listedIds = list.body.users.map((u: { id: number }) => u.id);
  t.same(
    listedIds,
    [...listedIds].sort((a: number, b: number) => b - a),
    'default order: id descending',
  );
  const asc = await call(gw.url, 'GET', `${USERS}/?sortBy=username&sortOrder=asc`, as);
  t.same(
    asc.body.users.map((u: { username: string }) => u.username),
    ['Alice', 'CAROL', 'admin', 'bob.smith@example.com', 'carol', 'dave_x'],
  );
  const paged = await call(gw.url, 'GET', `${USERS}/?page=2&size=4&sortBy=id&sortOrder=asc`, as);
  t.match(paged.body, { total: 6, page: 2, size: 4 });
  t.equal(paged.body.users.length, 2);
  const search = await call(gw.url, 'GET', `${USERS}/?search=CAROL`, as);
  t.same(
    search.body.users.map((u: { username: string }) => u.username).sort(),
    ['CAROL', 'carol'],
    'search is case-insensitive',
  );
  const byName = await call(gw.url, 'GET', `${USERS}/?search=name%20of%20ali`, as);
  t.same(
    byName.body.users.map((u: { username: string }) => u.username),
    ['Alice'],
    'search looks at the name too',
  );
  const admins = await call(gw.url, 'GET', `${USERS}/?role=admin`, as);
  t.same(
    admins.body.users.map((u: { username: string }) => u.username),
    ['admin'],
  );
  const slashless = await call(gw.url, 'GET', USERS, as);
  t.equal(slashless.body.total, 6, 'the slash-less path works too');
  const kiteAuditFilter = await call(gw.url, 'GET', `${USERS}/?page=1&size=200`, as);
  t.match(
    kiteAuditFilter,
    { status: 200, body: { total: 6, size: 200 } },
    "Kite's audit-log page asks for 200 users at once",
  );
  for (const query of ['page=0', 'page=abc', 'size=1001', 'size=0', 'sortBy=password', 'sortOrder=up']) {
    const res = await call(gw.url, 'GET', `${USERS}/?${query}`, as);
    t.equal(res.status, 400, `400 for ${query}`);
  }
  // lastLoginAt sort: logged-in users first
  await login(gw.url, 'dave_x', 'password-dave_x');
  await eventually(
    'the lastLoginAt order',
    async () => {
      const res = await call(gw.url, 'GET', `${USERS}/?sortBy=lastLoginAt`, as);
      return res.body.users[0]?.username === 'dave_x' || res.body.users[0]?.username === 'admin' ? res : undefined;
    },
    10_000,
  );

  // update
  const upd = await call(gw.url, 'PUT', `${USERS}/${ids.carol}`, {
    ...as,
    body: { name: 'Carol C', avatar_url: 'https://example.com/c.png' },
  });
  t.equal(upd.status, 200);
  t.match(upd.body, { id: ids.carol, username: 'carol', name: 'Carol C', avatar_url: 'https://example.com/c.png' });
  const partial = await call(gw.url, 'PUT', `${USERS}/${ids.carol}`, { ...as, body: { name: 'Carol D' } });
  t.match(partial.body, { name: 'Carol D', avatar_url: 'https://example.com/c.png' }, 'an omitted member is kept');
  t.equal((await call(gw.url, 'PUT', `${USERS}/abc`, { ...as, body: {} })).body.error, 'invalid id');
  t.equal((await call(gw.url, 'PUT', `${USERS}/0`, { ...as, body: {} })).status, 400);
  t.equal((await call(gw.url, 'PUT', `${USERS}/99999`, { ...as, body: { name: 'x' } })).status, 404);
  t.equal(
    (await call(gw.url, 'PUT', `${USERS}/${ids.carol}`, { ...as, body: { name: 5 } })).status,
    200,
    'a number is coerced to a string name',
  );
  t.equal((await call(gw.url, 'PUT', `${USERS}/${ids.carol}`, { ...as, body: { name: { a: 1 } } })).status, 400);

  // reset_password
  const oldCookie = await login(gw.url, 'carol', 'password-carol');
  t.equal((await call(gw.url, 'GET', '/api/auth/user', withCookie(oldCookie))).status, 200);
  const reset = await call(gw.url, 'POST', `${USERS}/${ids.carol}/reset_password`, {
    ...as,
    body: { password: 'a-new-password' },
  });
  t.equal(reset.status, 200);
  t.match(reset.body, { id: ids.carol, username: 'carol' });
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', withCookie(oldCookie))).status,
    401,
    'reset ends sessions at once',
  );
  t.equal(
    (
      await call(gw.url, 'POST', '/api/auth/login/password', {
        body: { username: 'carol', password: 'password-carol' },
      })
    ).status,
    401,
  );
  await login(gw.url, 'carol', 'a-new-password');
  t.equal(
    (await call(gw.url, 'POST', `${USERS}/${ids.carol}/reset_password`, { ...as, body: { password: 'short' } })).status,
    400,
  );
  t.equal(
    (await call(gw.url, 'POST', `${USERS}/99999/reset_password`, { ...as, body: { password: 'long-enough' } })).status,
    404,
  );

  // enable
  const daveCookie = await login(gw.url, 'dave_x', 'password-dave_x');
  const disable = await call(gw.url, 'POST', `${USERS}/${ids.dave_x}/enable`, { ...as, body: { enabled: false } });
  t.same(disable.body, { success: true });
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', withCookie(daveCookie))).status,
    401,
    'disabling ends sessions at once',
  );
  const disabledLogin = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'dave_x', password: 'password-dave_x' },
  });
  t.equal(disabledLogin.status, 401, 'a disabled user cannot log in (the 401 of a wrong password)');
  const listed = await call(gw.url, 'GET', `${USERS}/?search=dave`, as);
  t.equal(listed.body.users[0].enabled, false);
  t.same((await call(gw.url, 'POST', `${USERS}/${ids.dave_x}/enable`, { ...as, body: { enabled: true } })).body, {
    success: true,
  });
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', withCookie(daveCookie))).status,
    401,
    're-enabling does not revive old sessions',
  );
  await login(gw.url, 'dave_x', 'password-dave_x');
  t.equal(
    (await call(gw.url, 'POST', `${USERS}/${ids.dave_x}/enable`, { ...as, body: { enabled: 'maybe' } })).status,
    400,
  );
  t.equal((await call(gw.url, 'POST', `${USERS}/${ids.dave_x}/enable`, { ...as, body: {} })).status, 400);
  t.equal((await call(gw.url, 'POST', `${USERS}/99999/enable`, { ...as, body: { enabled: true } })).status, 404);

  // self and last admin
  const adminId = list.body.users.find((u: { username: string }) => u.username === 'admin').id;
  const selfDisable = await call(gw.url, 'POST', `${USERS}/${adminId}/enable`, { ...as, body: { enabled: false } });
  t.equal(selfDisable.status, 409);
  t.match(selfDisable.body.error, /yourself/);
  t.equal((await call(gw.url, 'DELETE', `${USERS}/${adminId}`, as)).status, 409, 'cannot delete yourself');

  // delete
  const aliceCookie = await login(gw.url, 'Alice', 'password-Alice');
  const del = await call(gw.url, 'DELETE', `${USERS}/${ids.Alice}`, as);
  t.same(del.body, { success: true });
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', withCookie(aliceCookie))).status,
    401,
    'deleting ends sessions at once',
  );
  t.equal((await call(gw.url, 'DELETE', `${USERS}/${ids.Alice}`, as)).status, 404, 'unknown id: 404');
  t.equal((await call(gw.url, 'DELETE', `${USERS}/x1`, as)).status, 400);
  await eventually(
    'password Secret removed',
    () =>
      kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secrets', '-o', 'name']).stdout.includes('user-x-alice') ===
      false,
    10_000,
  );
  const recreated = await call(gw.url, 'POST', USERS, {
    ...as,
    body: { username: 'Alice', password: 'password-again' },
  });
  t.equal(recreated.status, 201);
  t.ok(recreated.body.id > Math.max(...allIds, ids.CAROL), 'a re-created username gets a new id, never a reused one');
  t.equal((await call(gw.url, 'GET', '/api/auth/user', withCookie(aliceCookie))).status, 401, 'old sessions stay dead');
});

t.test('the last enabled admin cannot be deleted or disabled', async (t) => {
  const gw = await startGateway(t);
  const cookie = await bootstrapAdmin(gw.url);
  // An API key with role admin acts without being a user: the guard is about the last admin user.
  const key = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    ...withCookie(cookie),
    body: { name: 'ops', roles: ['admin'] },
  });
  t.equal(key.status, 201);
  const headers = { headers: { authorization: key.body.key } };
  const me = (await call(gw.url, 'GET', '/api/v1/admin/users/', headers)).body.users[0];
  const disable = await call(gw.url, 'POST', `${USERS}/${me.id}/enable`, { ...headers, body: { enabled: false } });
  t.equal(disable.status, 409);
  t.match(disable.body.error, /last enabled admin/);
  t.equal((await call(gw.url, 'DELETE', `${USERS}/${me.id}`, headers)).status, 409);
});

t.test('parallel creates of one username: one 201, the rest 409', async (t) => {
  const gw = await startGateway(t);
  const second = await startGateway(t, { namespace: gw.namespace });
  const cookie = await bootstrapAdmin(gw.url);
  const attempts = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      call(i % 2 ? second.url : gw.url, 'POST', USERS, {
        ...withCookie(cookie),
        body: { username: 'racer', password: `password-${i}` },
      }),
    ),
  );
  t.equal(attempts.filter((r) => r.status === 201).length, 1);
  t.equal(attempts.filter((r) => r.status === 409).length, 7);
});

t.test('ids from two replicas writing at once are unique', async (t) => {
  const gw = await startGateway(t);
  const second = await startGateway(t, { namespace: gw.namespace });
  const cookie = await bootstrapAdmin(gw.url);
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      call(i % 2 ? second.url : gw.url, 'POST', USERS, {
        ...withCookie(cookie),
        body: { username: `u${i}`, password: 'password-123' },
      }),
    ),
  );
  t.ok(
    results.every((r) => r.status === 201),
    'all created',
  );
  const ids = results.map((r) => r.body.id);
  t.equal(new Set(ids).size, ids.length, 'no id handed out twice');
  // The second replica sees the first one's users (watch-backed cache).
  const seen = await eventually(
    'the second replica to see all users',
    async () => {
      const res = await call(second.url, 'GET', `${USERS}/?size=100`, withCookie(cookie));
      return res.body.total === 13 ? res : undefined;
    },
    10_000,
  );
  t.equal(seen.body.total, 13);
});

t.test('a User applied with kubectl (plain password Secret) can log in; the Secret ends up hashed', async (t) => {
  const gw = await startGateway(t);
  const cookie = await bootstrapAdmin(gw.url);
  const manifest = `
apiVersion: v1
kind: Secret
metadata: {name: gitops-jane-password, namespace: ${gw.namespace}}
stringData: {password: jane-secret-pw}
---
apiVersion: kiteline.io/v1alpha1
kind: User
metadata: {name: jane, namespace: ${gw.namespace}}
spec:
  username: Jane
  name: Jane from Git
  roles: [viewer]
  passwordSecretRef: {name: gitops-jane-password}
`;
  const applied = kubectl(gw.kubeconfig, ['apply', '-f', '-'], manifest);
  t.equal(applied.status, 0, applied.stderr);
  const janeCookie = await eventually(
    'Jane to log in',
    async () => {
      const res = await call(gw.url, 'POST', '/api/auth/login/password', {
        body: { username: 'Jane', password: 'jane-secret-pw' },
      });
      return res.status === 204 ? /auth_token=[^;]*/.exec(res.headers.get('set-cookie') ?? '')![0] : undefined;
    },
    10_000,
  );
  const me = await call(gw.url, 'GET', '/api/auth/user', withCookie(janeCookie));
  t.equal(me.status, 200);
  t.match(me.body.user, { id: Number, username: 'Jane', name: 'Jane from Git', roles: [{ name: 'viewer' }] });
  const label = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'get',
    'user.kiteline.io',
    'jane',
    '-o',
    'jsonpath={.metadata.labels.kiteline\\.io/id}',
  ]);
  t.equal(Number(label.stdout), me.body.user.id, 'the applied user got an id label');
  const secret = await eventually(
    'the password Secret to be hashed',
    () => {
      const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', 'gitops-jane-password', '-o', 'json']);
      const obj = JSON.parse(res.stdout);
      return obj.data.password === undefined ? obj : undefined;
    },
    10_000,
  );
  t.same(Object.keys(secret.data), ['passwordHash'], 'only the hash is left');
  t.match(Buffer.from(secret.data.passwordHash, 'base64').toString(), /^scrypt\$/);
  t.notOk(
    JSON.stringify(secret.metadata.annotations ?? {}).includes('jane-secret-pw'),
    'no plain copy in the last-applied annotation',
  );
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', withCookie(janeCookie))).status,
    200,
    'the session survives the hashing',
  );
  const listed = await call(gw.url, 'GET', `${USERS}/?search=jane`, withCookie(cookie));
  t.equal(listed.body.total, 1);

  // kubectl edits show up within a second or so: disabling via kubectl ends access.
  const patched = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'patch',
    'user.kiteline.io',
    'jane',
    '--type=merge',
    '-p',
    '{"spec":{"enabled":false}}',
  ]);
  t.equal(patched.status, 0, patched.stderr);
  await eventually(
    'disabled by kubectl',
    async () => (await call(gw.url, 'GET', '/api/auth/user', withCookie(janeCookie))).status === 401,
    5000,
  );
});
