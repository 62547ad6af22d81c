// API keys against a real host cluster: create (shown once), list (no secrets), use as the raw
// Authorization value or Bearer, roles, expiry, revocation by API and by kubectl, last use.
import t from 'tap';
import { parseApiKey } from '../src/credentials/apikey-token.js';
import { kubectl } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';
import { bootstrapAdmin, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { ForbiddenError } from '../src/errors.js';
import { resourceId } from '../src/host/resources.js';

const KEYS = '/api/v1/admin/apikeys';

t.test('create, list, use, delete', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const created = await call(gw.url, 'POST', `${KEYS}/`, { ...as, body: { name: 'ci-bot', roles: ['admin'] } });
  t.equal(created.status, 201);
  t.match(created.body, {
    id: Number,
    name: 'ci-bot',
    roles: ['admin'],
    expiresAt: null,
    createdAt: String,
    key: /^kl_\d+_[A-Za-z0-9_-]{43}$/,
  });
  const key: string = created.body.key;

  const raw = await call(gw.url, 'GET', '/api/v1/admin/users/', { headers: { authorization: key } });
  t.equal(raw.status, 200, 'the key alone, as the spec says');
  const bearer = await call(gw.url, 'GET', '/api/v1/admin/users/', { headers: { authorization: `Bearer ${key}` } });
  t.equal(bearer.status, 200, 'Bearer accepted too');
  const me = await call(gw.url, 'GET', '/api/auth/user', { headers: { authorization: key } });
  t.match(me.body.user, { id: created.body.id, username: 'apikey:ci-bot', provider: 'api_key' });

  const list = await call(gw.url, 'GET', `${KEYS}/`, as);
  t.equal(list.status, 200);
  t.match(list.body.apiKeys, [{ id: created.body.id, name: 'ci-bot', roles: ['admin'], createdBy: 'admin' }]);
  t.notOk(list.text.includes(parseApiKey(key)!.secret), 'the list never shows the secret');
  t.notOk('key' in list.body.apiKeys[0]);

  // Only a hash is stored.
  const secrets = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secrets', '-o', 'json']);
  t.notOk(
    secrets.stdout.includes(Buffer.from(parseApiKey(key)!.secret).toString('base64')),
    'the secret is not stored',
  );
  t.notOk(secrets.stdout.includes(parseApiKey(key)!.secret));

  const tampered = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
  const bad = await call(gw.url, 'GET', '/api/v1/admin/users/', { headers: { authorization: tampered } });
  t.equal(bad.status, 401);
  t.equal(bad.body.error, 'invalid API key');
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/users/', { headers: { authorization: 'kite1-' } })).status,
    401,
    "Kite's empty-secret bypass fails",
  );

  // lastUsedAt is recorded (throttled, asynchronously).
  await eventually('lastUsedAt', async () => (await call(gw.url, 'GET', KEYS, as)).body.apiKeys[0].lastUsedAt, 10_000);

  const dup = await call(gw.url, 'POST', KEYS, { ...as, body: { name: 'ci-bot' } });
  t.equal(dup.status, 409);
  for (const body of [
    {},
    { name: 'x', roles: ['nope'] },
    { name: 'x', expiresAt: 'tomorrow' },
    { name: 'x', expiresAt: '2001-01-01T00:00:00Z' },
    { name: 'bad name' },
    { name: 'x', extra: 1 },
  ]) {
    t.equal((await call(gw.url, 'POST', KEYS, { ...as, body })).status, 400, JSON.stringify(body));
  }

  const del = await call(gw.url, 'DELETE', `${KEYS}/${created.body.id}`, as);
  t.equal(del.status, 200);
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/users/', { headers: { authorization: key } })).status,
    401,
    'revoked at once',
  );
  t.equal((await call(gw.url, 'DELETE', `${KEYS}/${created.body.id}`, as)).status, 404);
  t.equal((await call(gw.url, 'DELETE', `${KEYS}/abc`, as)).status, 400);
});

t.test('keys act with their own roles', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const viewer = (await call(gw.url, 'POST', KEYS, { ...as, body: { name: 'reader', roles: ['viewer'] } })).body;
  const none = (await call(gw.url, 'POST', KEYS, { ...as, body: { name: 'nothing' } })).body;
  t.same(none.roles, [], 'no roles unless given');
  const forbidden = await call(gw.url, 'GET', KEYS, { headers: { authorization: viewer.key } });
  t.equal(forbidden.status, 403, 'a viewer key is not admin');
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: { authorization: none.key } })).status,
    200,
    'a role-less key still authenticates',
  );
  const principal = { kind: 'apikey' as const, id: viewer.id, name: 'apikey:reader', roles: ['viewer'], groups: [] };
  t.ok(gw.services.auth.authorize(principal, { cluster: 'any', namespace: 'default', resource: 'pods', verb: 'list' }));
  t.notOk(
    gw.services.auth.authorize(principal, { cluster: 'any', namespace: 'default', resource: 'pods', verb: 'delete' }),
  );
});

t.test('expiry and revocation by kubectl', async (t) => {
  const gw = await startGateway(t);
  const as = withCookie(await bootstrapAdmin(gw.url));
  const future = new Date(Date.now() + 3600_000).toISOString();
  const created = await call(gw.url, 'POST', KEYS, {
    ...as,
    body: { name: 'temp', roles: ['admin'], expiresAt: future },
  });
  t.equal(created.status, 201);
  t.equal(Date.parse(created.body.expiresAt), Date.parse(future), 'expiresAt as given');
  const use = () => call(gw.url, 'GET', KEYS, { headers: { authorization: created.body.key } });
  t.equal((await use()).status, 200);
  // Move the expiry into the past with kubectl: the key stops working.
  const crName = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'apikeys.kiteline.io', '-o', 'name']).stdout.trim();
  const justNow = new Date(Date.now() - 60_000).toISOString();
  const patched = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'patch',
    crName,
    '--type=merge',
    '-p',
    JSON.stringify({ spec: { expiresAt: justNow } }),
  ]);
  t.equal(patched.status, 0, patched.stderr);
  const expired = await eventually(
    'expired',
    async () => {
      const res = await use();
      return res.status === 401 ? res : undefined;
    },
    5000,
  );
  t.equal(expired.body.error, 'API key expired');
  t.match(
    (await call(gw.url, 'GET', KEYS, as)).body.apiKeys,
    [{ name: 'temp' }],
    'an expired key stays listed for a while (KITELINE_EXPIRED_KEY_RETENTION)',
  );

  // Past the retention (a day by default) an expired key is deleted, its Secret with it.
  const old = await call(gw.url, 'POST', KEYS, {
    ...as,
    body: { name: 'long-expired', roles: ['admin'], expiresAt: future },
  });
  t.equal(old.status, 201);
  const oldSecret = `apikey-long-expired-key`;
  t.equal(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', oldSecret]).status, 0, 'its Secret exists');
  t.equal(
    kubectl(gw.kubeconfig, [
      '-n',
      gw.namespace,
      'patch',
      'apikeys.kiteline.io',
      'apikey-long-expired',
      '--type=merge',
      '-p',
      '{"spec":{"expiresAt":"2020-01-01T00:00:00Z"}}',
    ]).status,
    0,
  );
  await eventually(
    'the long-expired key deleted',
    async () =>
      !(await call(gw.url, 'GET', KEYS, as)).body.apiKeys.some((k: { name: string }) => k.name === 'long-expired'),
    10_000,
  );
  await eventually(
    'its Secret deleted',
    () => kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', oldSecret]).status !== 0,
    10_000,
  );
  t.match(
    (await call(gw.url, 'GET', KEYS, as)).body.apiKeys,
    [{ name: 'temp' }],
    'the recently expired key is still listed',
  );

  const second = await call(gw.url, 'POST', KEYS, { ...as, body: { name: 'gone-soon', roles: ['admin'] } });
  t.equal((await call(gw.url, 'GET', KEYS, { headers: { authorization: second.body.key } })).status, 200);
  const deleted = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'delete', 'apikeys.kiteline.io', 'apikey-gone-soon']);
  t.equal(deleted.status, 0, deleted.stderr);
  await eventually(
    'revoked by kubectl',
    async () => (await call(gw.url, 'GET', KEYS, { headers: { authorization: second.body.key } })).status === 401,
    5000,
  );
});

t.test(
  'only a signed-in user mints kubeconfig tokens; a user keeps at most the cap, the oldest go (the API key store)',
  async (t) => {
    const gw = await startGateway(t);
    await bootstrapAdmin(gw.url);
    const { apiKeys, users } = gw.services;
    const admin = users.byUsername('admin')!;
    const caller = { kind: 'user' as const, id: resourceId(admin)!, name: 'admin', roles: ['admin'] };
    const first = await apiKeys.createUserToken(caller, 'kubernetes', 600, 2);
    t.equal(first.user.spec.username, 'admin');
    t.ok(apiKeys.byId(resourceId(first.resource)!), 'in the cache when the call returns');
    t.same(first.resource.spec.owner, { username: 'admin', id: resourceId(admin) }, 'owned by the user');
    const second = await apiKeys.createUserToken(caller, 'kubernetes', 600, 2);
    const third = await apiKeys.createUserToken(caller, 'kubernetes', 600, 2);
    t.same(
      apiKeys.tokensOf(resourceId(admin)!).map((key) => resourceId(key)),
      [resourceId(second.resource), resourceId(third.resource)],
      'the third revoked the oldest',
    );
    t.throws(
      () => apiKeys.tokenOwner({ kind: 'apikey', id: resourceId(third.resource)! }),
      new ForbiddenError('kubeconfig tokens are minted for a signed-in user: sign in'),
      'a kubeconfig token cannot renew itself',
    );
  },
);
