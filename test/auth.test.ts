// Sessions against a real host cluster (CONTRACT section 6): login, cookie attributes, the current
// user, refresh, logout, providers, init_check, the rate limit, and one shared session key for
// two replicas.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { kubectl, TEST_DIR } from './helpers/clusters.js';
import { call, startGateway } from './helpers/gateway.js';
import { ADMIN, bootstrapAdmin, login, withCookie } from './helpers/auth-session.js';

t.test('login, current user, refresh, logout, providers', async (t) => {
  // Behind a trusted proxy (loopback), so X-Forwarded-Proto counts.
  const gw = await startGateway(t, { logName: 'auth-session', env: { KITELINE_TRUST_PROXY: 'loopback' } });
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['password'],
    credentialProviders: ['password'],
    oauthProviders: [],
  });
  t.equal((await call(gw.url, 'GET', '/api/auth/user')).status, 401, 'no session: 401');
  await bootstrapAdmin(gw.url);

  const res = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: ADMIN.username, password: ADMIN.password },
  });
  t.equal(res.status, 204);
  const setCookie = res.headers.get('set-cookie') ?? '';
  t.match(
    setCookie,
    /^auth_token=v1\.[^;]+; Path=\/; Max-Age=86400; HttpOnly; SameSite=Lax$/,
    'HttpOnly, Lax, not Secure over http',
  );
  const cookie = /auth_token=[^;]*/.exec(setCookie)![0];

  const me = await call(gw.url, 'GET', '/api/auth/user', withCookie(cookie));
  t.equal(me.status, 200);
  // Kite's Settings → OAuth tab: no OAuth provider is configured (admins only).
  t.same((await call(gw.url, 'GET', '/api/v1/admin/oauth-providers/', withCookie(cookie))).body, { providers: [] });
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/oauth-providers/')).status, 401, 'anonymous');
  t.match(me.body, {
    user: {
      username: 'admin',
      name: ADMIN.name,
      provider: 'password',
      enabled: true,
      roles: [{ name: 'admin', id: Number }],
    },
  });
  t.match(me.body.user.lastLoginAt ?? '', /^$|^\d{4}-\d{2}-\d{2}T/, 'lastLoginAt is ISO 8601 when set');

  const behindHttps = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: ADMIN.username, password: ADMIN.password },
    headers: { 'x-forwarded-proto': 'https' },
  });
  t.match(behindHttps.headers.get('set-cookie') ?? '', /; Secure/, 'Secure behind https');

  // As Kite's UI sends it: a JSON content type and no body.
  const refreshed = await call(gw.url, 'POST', '/api/auth/refresh', {
    headers: { cookie, 'content-type': 'application/json' },
  });
  t.equal(refreshed.status, 204, refreshed.text);
  t.match(refreshed.headers.get('set-cookie') ?? '', /^auth_token=v1\./);
  t.equal((await call(gw.url, 'POST', '/api/auth/refresh')).status, 401, 'refresh without a session: 401');
  t.equal(
    (await call(gw.url, 'POST', '/api/auth/refresh', { headers: { cookie: 'auth_token=nonsense' } })).status,
    401,
  );

  const out = await call(gw.url, 'POST', '/api/auth/logout', withCookie(cookie));
  t.equal(out.status, 200);
  t.match(out.headers.get('set-cookie') ?? '', /^auth_token=; Path=\/; Max-Age=0/);

  // "log out everywhere" ends every session of the user.
  const a = await login(gw.url, ADMIN.username, ADMIN.password);
  const b = await login(gw.url, ADMIN.username, ADMIN.password);
  t.equal((await call(gw.url, 'POST', '/api/auth/logout?all=true', withCookie(a))).status, 200);
  t.equal((await call(gw.url, 'GET', '/api/auth/user', withCookie(b))).status, 401, 'the other session ended too');

  // Lastly, the log never shows the password or the cookie.
  const log = readFileSync(join(TEST_DIR, 'logs', 'auth-session.log'), 'utf8');
  t.notOk(log.includes(ADMIN.password), 'no password in logs');
  t.notOk(log.includes(cookie.slice('auth_token='.length)), 'no session token in logs');
});

t.test('login errors: same 401 for unknown user and bad password; 400 for bad input', async (t) => {
  const gw = await startGateway(t);
  await bootstrapAdmin(gw.url);
  const unknown = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'nobody', password: 'whatever-pw' },
  });
  const wrong = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: ADMIN.username, password: 'wrong-password' },
  });
  t.equal(unknown.status, 401);
  t.same(unknown.body, wrong.body, 'indistinguishable');
  t.same(wrong.body, { error: 'invalid username or password', reason: 'Unauthorized', code: 401 });
  for (const body of [{}, { username: 'admin' }, { password: 'x' }, { username: '', password: '' }]) {
    t.equal((await call(gw.url, 'POST', '/api/auth/login/password', { body })).status, 400, JSON.stringify(body));
  }
  t.equal(
    (
      await call(gw.url, 'POST', '/api/auth/login/password', {
        raw: 'not json',
        headers: { 'content-type': 'application/json' },
      })
    ).status,
    400,
  );
});

t.test('repeated failures are rate limited per user and per address', async (t) => {
  const gw = await startGateway(t, {
    env: { KITELINE_LOGIN_MAX_FAILURES: '3', KITELINE_LOGIN_WINDOW: '600', KITELINE_TRUST_PROXY: 'loopback' },
  });
  const cookie = await bootstrapAdmin(gw.url);
  await call(gw.url, 'POST', '/api/v1/admin/users/', {
    ...withCookie(cookie),
    body: { username: 'victim', password: 'victim-password' },
  });
  const attempt = (username: string, password: string, ip: string) =>
    call(gw.url, 'POST', '/api/auth/login/password', {
      body: { username, password },
      headers: { 'x-forwarded-for': ip },
    });

  for (let i = 0; i < 3; i++) t.equal((await attempt('victim', 'bad-password', `10.0.0.${i}`)).status, 401);
  const limited = await attempt('victim', 'victim-password', '10.0.0.9');
  t.equal(limited.status, 429, 'the user is limited, even with the right password, from any address');
  t.equal(limited.body.reason, 'TooManyRequests');
  t.ok(Number(limited.headers.get('retry-after')) > 0, 'Retry-After is given');
  t.equal((await attempt('admin', ADMIN.password, '10.0.0.9')).status, 204, 'other users are not affected');

  for (let i = 0; i < 3; i++) t.equal((await attempt(`ghost${i}`, 'bad-password', '10.9.9.9')).status, 401);
  t.equal((await attempt('admin', ADMIN.password, '10.9.9.9')).status, 429, 'the address is limited for every user');
});

t.test('two replicas share the session key; sessions work on both', async (t) => {
  const gw = await startGateway(t);
  const second = await startGateway(t, { namespace: gw.namespace });
  const cookie = await bootstrapAdmin(gw.url);
  t.equal(
    (await call(second.url, 'GET', '/api/auth/user', withCookie(cookie))).status,
    200,
    'a session from one replica works on the other',
  );
  const keys = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'get',
    'secret',
    'kiteline-session-key',
    '-o',
    'jsonpath={.data.key}',
  ]);
  t.equal(Buffer.from(keys.stdout, 'base64').length, 32, 'a 256-bit key in a Secret');
});

t.test('init_check counts users and clusters', async (t) => {
  const gw = await startGateway(t);
  t.same((await call(gw.url, 'GET', '/api/v1/init_check')).body, { initialized: false, step: 0 });
  await bootstrapAdmin(gw.url);
  t.same((await call(gw.url, 'GET', '/api/v1/init_check')).body, { initialized: false, step: 1 });
});
