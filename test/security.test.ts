// Security checks of issue 8 (point 4) not covered elsewhere, against a real host cluster: Secrets
// and custom resources hold only hashes (users and keys made by API and by kubectl); API keys stop
// working when they expire on their own and, on another replica, when deleted; sessions die on
// every replica when the user is disabled or the password reset; create bodies cannot assign
// themselves roles. (Same-replica revocation, expiry by kubectl, session ends and the login rate
// limit: test/apikeys.test.ts, test/users.test.ts, test/auth.test.ts.)
import t from 'tap';
import { parseApiKey } from '../src/credentials/apikey-token.js';
import { kubectl } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { bootstrapAdmin, type Caller } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { login, withCookie } from './helpers/auth-session.js';

const USERS = '/api/v1/admin/users';
const KEYS = '/api/v1/admin/apikeys';

async function replicaPair(t: Parameters<typeof startGateway>[0]): Promise<[TestGateway, TestGateway, Caller]> {
  const a = await startGateway(t, { logName: 'security' });
  const b = await startGateway(t, { namespace: a.namespace, logName: 'security' });
  const admin = await bootstrapAdmin(a);
  await eventually(
    'the admin key on the second replica',
    async () => (await call(b.url, 'GET', KEYS, { headers: admin.headers })).status === 200,
    30_000,
    100,
  );
  return [a, b, admin];
}

function hostJson(gw: TestGateway, kind: string): any[] {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', kind, '-o', 'json']);
  if (res.status !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout).items;
}

t.test('Secrets and custom resources hold only hashes', async (t) => {
  const gw = await startGateway(t, { logName: 'security' });
  const admin = await bootstrapAdmin(gw);
  const passwords = ['api-made-password-1', 'api-made-password-2'];
  for (const [i, password] of passwords.entries()) {
    t.equal(
      (await call(gw.url, 'POST', USERS, { body: { username: `api-user-${i}`, password }, headers: admin.headers }))
        .status,
      201,
    );
  }
  const reset = (await call(gw.url, 'GET', `${USERS}/?search=api-user-0`, { headers: admin.headers })).body.users[0].id;
  passwords.push('a-reset-password-3');
  t.equal(
    (
      await call(gw.url, 'POST', `${USERS}/${reset}/reset_password`, {
        body: { password: passwords[2] },
        headers: admin.headers,
      })
    ).status,
    200,
  );
  const keys: string[] = [admin.key];
  for (const name of ['ci', 'backup'])
    keys.push(
      (await call(gw.url, 'POST', KEYS, { body: { name, roles: ['viewer'] }, headers: admin.headers })).body.key,
    );
  // A user the GitOps way: a plain password in a Secret, applied with kubectl.
  passwords.push('gitops-plain-password');
  const manifest = `
apiVersion: v1
kind: Secret
metadata: {name: gitops-pw, namespace: ${gw.namespace}}
stringData: {password: ${passwords[3]}}
---
apiVersion: kiteline.io/v1alpha1
kind: User
metadata: {name: gitops, namespace: ${gw.namespace}}
spec: {username: gitops, passwordSecretRef: {name: gitops-pw}}
`;
  const applied = kubectl(gw.kubeconfig, ['apply', '-f', '-'], manifest);
  t.equal(applied.status, 0, applied.stderr);
  await eventually('the kubectl password to be hashed', () =>
    hostJson(gw, 'secrets').some((s) => s.metadata.name === 'gitops-pw' && s.data?.passwordHash && !s.data.password),
  );
  t.equal(
    (await call(gw.url, 'POST', '/api/auth/login/password', { body: { username: 'gitops', password: passwords[3] } }))
      .status,
    204,
    'the hashed password still logs in',
  );

  passwords.push('correct-horse-battery'); // the super user's, from test/helpers/fixtures.ts
  const secrets = hostJson(gw, 'secrets');
  const everything = JSON.stringify([
    secrets,
    ...['users.kiteline.io', 'apikeys.kiteline.io', 'configmaps'].map((kind) => hostJson(gw, kind)),
  ]);
  const decoded = secrets
    .flatMap((s) => Object.values<string>(s.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8')))
    .join('\n');
  for (const password of passwords) {
    t.notOk(
      everything.includes(password) || decoded.includes(password),
      'no plain password in any Secret, User, APIKey or ConfigMap',
    );
    t.notOk(everything.includes(Buffer.from(password).toString('base64')), 'not even base64-encoded');
  }
  for (const key of keys) {
    const secret = parseApiKey(key)!.secret;
    t.notOk(everything.includes(secret) || decoded.includes(secret), 'no API key secret stored');
  }
  const passwordSecrets = secrets.filter((s) => s.data?.passwordHash !== undefined);
  t.equal(passwordSecrets.length, 4, 'one password Secret per user (admin, two by API, one by kubectl)');
  for (const s of passwordSecrets) {
    t.same(Object.keys(s.data), ['passwordHash'], `${s.metadata.name}: only the hash`);
    t.match(
      Buffer.from(s.data.passwordHash, 'base64').toString(),
      /^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/,
      `${s.metadata.name}: a salted scrypt hash`,
    );
  }
  const keySecrets = secrets.filter((s) => s.data?.keyHash !== undefined);
  t.equal(keySecrets.length, keys.length, 'one Secret per API key');
  for (const s of keySecrets) {
    t.same(Object.keys(s.data), ['keyHash'], `${s.metadata.name}: only the hash`);
    t.match(
      Buffer.from(s.data.keyHash, 'base64').toString(),
      /^[0-9a-f]{64}$/,
      `${s.metadata.name}: a SHA-256 hex digest`,
    );
  }
});

t.test('API keys: unusable once expired, and on every replica once deleted', async (t) => {
  const [a, b, admin] = await replicaPair(t);
  const soon = new Date(Date.now() + 3000).toISOString();
  const shortLived = await call(a.url, 'POST', KEYS, {
    body: { name: 'short-lived', roles: ['admin'], expiresAt: soon },
    headers: admin.headers,
  });
  t.equal(shortLived.status, 201);
  const use = (gw: TestGateway, key: string) => call(gw.url, 'GET', KEYS, { headers: { authorization: key } });
  const expired = await eventually(
    'the key to expire by itself',
    async () => {
      const res = await use(a, shortLived.body.key);
      return res.status === 401 ? res : undefined;
    },
    30_000,
    200,
  );
  t.equal(expired.body.error, 'API key expired');
  t.equal((await use(b, shortLived.body.key)).status, 401, 'expired on the other replica too');
  t.equal((await use(a, `Bearer ${shortLived.body.key}`)).status, 401, 'also as Bearer');

  const doomed = await call(a.url, 'POST', KEYS, {
    body: { name: 'doomed', roles: ['admin'] },
    headers: admin.headers,
  });
  await eventually('the key to work on the other replica', async () => (await use(b, doomed.body.key)).status === 200);
  t.equal((await call(a.url, 'DELETE', `${KEYS}/${doomed.body.id}`, { headers: admin.headers })).status, 200);
  t.equal((await use(a, doomed.body.key)).status, 401, 'refused at once on the replica that deleted it');
  await eventually(
    'the other replica to refuse the deleted key',
    async () => (await use(b, doomed.body.key)).status === 401,
    10_000,
  );
  t.pass('refused on the other replica once it sees the deletion');
  t.equal(
    (await call(b.url, 'GET', `/api/v1/configmaps/default`, { headers: { authorization: doomed.body.key } })).status,
    401,
    'no route accepts it',
  );
});

t.test('sessions die on every replica when the user is disabled or the password reset', async (t) => {
  const [a, b, admin] = await replicaPair(t);
  const created = await call(a.url, 'POST', USERS, {
    body: { username: 'roamer', password: 'roamer-password' },
    headers: admin.headers,
  });
  const id = created.body.id;
  const me = (gw: TestGateway, cookie: string) => call(gw.url, 'GET', '/api/auth/user', withCookie(cookie));
  const session = await eventually(
    'login on replica b',
    async () => login(b.url, 'roamer', 'roamer-password').catch(() => undefined),
    10_000,
  );
  t.equal((await me(a, session)).status, 200, 'a session from b works on a');

  t.same(
    (await call(a.url, 'POST', `${USERS}/${id}/enable`, { body: { enabled: false }, headers: admin.headers })).body,
    { success: true },
  );
  t.equal((await me(a, session)).status, 401, 'dead at once on the replica that disabled the user');
  await eventually(
    'b to end the session of the disabled user',
    async () => (await me(b, session)).status === 401,
    10_000,
  );
  t.pass('dead on the other replica');
  t.equal(
    (await call(a.url, 'POST', `${USERS}/${id}/enable`, { body: { enabled: true }, headers: admin.headers })).status,
    200,
  );

  const second = await eventually(
    'login again',
    async () => login(b.url, 'roamer', 'roamer-password').catch(() => undefined),
    10_000,
  );
  t.equal(
    (
      await call(b.url, 'POST', `${USERS}/${id}/reset_password`, {
        body: { password: 'roamer-new-password' },
        headers: admin.headers,
      })
    ).status,
    200,
  );
  t.equal((await me(b, second)).status, 401, 'dead at once where the password was reset');
  await eventually('a to end the session after the reset', async () => (await me(a, second)).status === 401, 10_000);
  t.pass('dead on the other replica');
  t.equal(
    (await call(a.url, 'POST', '/api/auth/refresh', withCookie(second))).status,
    401,
    'a dead session cannot be refreshed',
  );
});

t.test('create bodies cannot grant themselves roles or ids', async (t) => {
  const gw = await startGateway(t, { logName: 'security' });
  const admin = await bootstrapAdmin(gw);
  const sneaky = await call(gw.url, 'POST', USERS, {
    body: {
      username: 'sneaky',
      password: 'sneaky-password',
      roles: [{ id: 1, name: 'admin' }],
      id: 1,
      provider: 'root',
    },
    headers: admin.headers,
  });
  t.equal(sneaky.status, 201, 'unknown members of a user body are ignored (Kite compatibility)');
  t.same(sneaky.body.roles, [], 'but grant nothing');
  t.not(sneaky.body.id, 1, 'and choose no id');
  t.equal(sneaky.body.provider, 'password');
  const cookie = await login(gw.url, 'sneaky', 'sneaky-password');
  t.equal((await call(gw.url, 'GET', USERS, withCookie(cookie))).status, 403, 'the user is no admin');
  t.equal(
    (
      await call(gw.url, 'PUT', `${USERS}/${sneaky.body.id}`, {
        body: { roles: ['admin'], enabled: true },
        ...withCookie(cookie),
      })
    ).status,
    403,
    'and cannot edit itself',
  );
  const updated = await call(gw.url, 'PUT', `${USERS}/${sneaky.body.id}`, {
    body: { name: 'S', roles: [{ id: 1, name: 'admin' }] },
    headers: admin.headers,
  });
  t.same(updated.body.roles, [], 'an update body cannot assign roles either (assign is its own route)');
  t.equal(
    (await call(gw.url, 'POST', KEYS, { body: { name: 'mine', roles: ['admin'] }, ...withCookie(cookie) })).status,
    403,
    'a non-admin cannot mint an admin key',
  );
});
