// Sign-in with an OpenID Connect provider against a real one (oidc-provider, run by this test on
// loopback): provider administration (admin only, the client secret never shown), the login page's
// provider list, the code flow with PKCE, state and nonce, users created on first sign-in, groups
// mapped to roles (and a changed group), a user holding no role, a replayed or foreign state, a
// tampered ID token, an unknown provider, a username held by a password user, disabling, a deleted
// provider, the API keys of a provider's user, and a key rotation at the provider.
import t from 'tap';
import { kubectl } from './helpers/clusters.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { bootstrapAdmin, login, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { signInAtProvider, startOidcProvider } from './helpers/oidc-provider.js';

const PROVIDERS = '/api/v1/admin/oauth-providers';
const ROLES = '/api/v1/admin/roles';

interface Attempt {
  /** kiteline's callback URL as the provider sent the browser there, and the flow cookie. */
  callback: string;
  flowCookie: string;
}

/** Starts a sign-in at kiteline and walks the provider's pages as `login`. */
async function attempt(gw: TestGateway, login: string, provider = 'corp'): Promise<Attempt> {
  const started = await call(gw.url, 'GET', `/api/auth/login?provider=${provider}`);
  if (started.status !== 200) throw new Error(`login start: ${started.status} ${started.text}`);
  const flowCookie = /kiteline_oidc=[^;]+/.exec(started.headers.get('set-cookie') ?? '')![0];
  const callback = await signInAtProvider(started.body.auth_url, login, `${gw.url}/api/auth/callback`);
  return { callback, flowCookie };
}

/** Hands the provider's answer to kiteline: the redirect's Location and the session cookie, if any. */
async function finish(a: Attempt): Promise<{ status: number; location: string; cookie?: string }> {
  const res = await fetch(a.callback, { redirect: 'manual', headers: { cookie: a.flowCookie } });
  const session = /auth_token=([^;]+)/.exec(res.headers.getSetCookie().join('\n'));
  return {
    status: res.status,
    location: res.headers.get('location') ?? '',
    ...(session ? { cookie: `auth_token=${session[1]}` } : {}),
  };
}

async function signIn(gw: TestGateway, login: string): Promise<string> {
  const done = await finish(await attempt(gw, login));
  if (done.status !== 302 || done.location !== '/' || !done.cookie)
    throw new Error(`sign-in of ${login} failed: ${done.status} ${done.location}`);
  return done.cookie;
}

const errorOf = (location: string) => new URL(location, 'http://x').searchParams.get('error');

t.test('OpenID Connect sign-in against a real provider', async (t) => {
  const gw = await startGateway(t);
  const admin = withCookie(await bootstrapAdmin(gw.url));
  const op = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => op.close());

  // ---- administration ----
  const body = {
    name: 'corp',
    clientId: op.clientId,
    clientSecret: op.clientSecret,
    issuer: op.issuer,
    scopes: 'openid,profile,email,groups',
  };
  t.equal((await call(gw.url, 'GET', `${PROVIDERS}/`)).status, 401, 'anonymous cannot list providers');
  const created = await call(gw.url, 'POST', `${PROVIDERS}/`, { ...admin, body });
  t.equal(created.status, 201, created.text);
  t.match(created.body.provider, {
    id: Number,
    name: 'corp',
    clientId: 'kiteline',
    clientSecret: '***',
    enabled: true,
  });
  t.notMatch(created.text, op.clientSecret, 'the client secret is not in the answer');
  const listed = await call(gw.url, 'GET', `${PROVIDERS}/`, admin);
  t.equal(listed.body.providers.length, 1);
  t.notMatch(listed.text, op.clientSecret, 'nor in the list');
  const got = await call(gw.url, 'GET', `${PROVIDERS}/${created.body.provider.id}`, admin);
  t.equal(got.body.provider.clientSecret, '***');
  const secret = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'get',
    'secret',
    'oauthprovider-corp-client',
    '-o',
    'jsonpath={.data.clientSecret}',
  ]);
  t.equal(Buffer.from(secret.stdout, 'base64').toString(), op.clientSecret, 'kept in a Secret');
  const cr = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'oauthproviders.kiteline.io', '-o', 'json']);
  t.notMatch(cr.stdout, op.clientSecret, 'and not in the OAuthProvider object');

  for (const [what, bad] of [
    ['an http issuer elsewhere', { ...body, name: 'other', issuer: 'http://example.com' }],
    ['no issuer', { ...body, name: 'other', issuer: undefined }],
    ['a reserved name', { ...body, name: 'password' }],
    ['an upper-case name', { ...body, name: 'Corp2' }],
    ['an unknown member', { ...body, name: 'other', admin: true }],
  ] as const) {
    const res = await call(gw.url, 'POST', `${PROVIDERS}/`, { ...admin, body: bad });
    t.equal(res.status, 400, `${what}: 400 (${res.text})`);
  }
  t.equal((await call(gw.url, 'POST', `${PROVIDERS}/`, { ...admin, body })).status, 409, 'the name is taken');
  // Kite's UI sends back the "***" it was shown: the stored secret is kept.
  const put = await call(gw.url, 'PUT', `${PROVIDERS}/${created.body.provider.id}`, {
    ...admin,
    body: { ...listed.body.providers[0], scopes: 'openid profile email groups' },
  });
  t.equal(put.status, 200, put.text);
  t.equal(put.body.provider.scopes, 'openid profile email groups');
  const renamed = await call(gw.url, 'PUT', `${PROVIDERS}/${created.body.provider.id}`, {
    ...admin,
    body: { name: 'corp2' },
  });
  t.equal(renamed.status, 400, 'no renames');

  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['corp', 'password'],
    credentialProviders: ['password'],
    oauthProviders: ['corp'],
  });

  const roles = (await call(gw.url, 'GET', `${ROLES}/`, admin)).body.roles as { id: number; name: string }[];
  const adminRole = roles.find((r) => r.name === 'admin')!.id;
  const viewerRole = roles.find((r) => r.name === 'viewer')!.id;

  // A viewer may not see or change providers.
  const viewerUser = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    ...admin,
    body: { username: 'vera', password: 'vera-password-1' },
  });
  await call(gw.url, 'POST', `${ROLES}/${viewerRole}/assign`, {
    ...admin,
    body: { subjectType: 'user', subject: 'vera' },
  });
  t.equal(viewerUser.status, 201);
  const vera = withCookie(await login(gw.url, 'vera', 'vera-password-1'));
  t.equal((await call(gw.url, 'GET', `${PROVIDERS}/`, vera)).status, 403, 'a viewer cannot list providers');
  t.equal(
    (await call(gw.url, 'POST', `${PROVIDERS}/`, { ...vera, body: { ...body, name: 'evil' } })).status,
    403,
    'nor create one',
  );
  t.equal(
    (await call(gw.url, 'DELETE', `${PROVIDERS}/${created.body.provider.id}`, vera)).status,
    403,
    'nor delete one',
  );

  // ---- an unknown provider ----
  const unknown = await call(gw.url, 'GET', '/api/auth/login?provider=nope');
  t.equal(unknown.status, 400);
  t.match(unknown.body.error, /unknown provider/);

  // ---- groups mapped to roles ----
  const assigned = await call(gw.url, 'POST', `${ROLES}/${adminRole}/assign`, {
    ...admin,
    body: { subjectType: 'group', subject: 'kl-admins' },
  });
  t.equal(assigned.status, 201);
  // A bare name is the one provider's group (groups are scoped by their provider: security-groups.test.ts).
  t.same(assigned.body.assignment, { roleId: adminRole, subjectType: 'group', subject: 'oidc:corp/kl-admins' });
  t.equal(
    (
      await call(gw.url, 'POST', `${ROLES}/${adminRole}/assign`, {
        ...admin,
        body: { subjectType: 'group', subject: 'kl-admins' },
      })
    ).status,
    200,
    'assigned already',
  );
  await call(gw.url, 'POST', `${ROLES}/${viewerRole}/assign`, {
    ...admin,
    body: { subjectType: 'group', subject: 'readers' },
  });
  const adminRoleView = await call(gw.url, 'GET', `${ROLES}/${adminRole}`, admin);
  t.match(adminRoleView.body.role.assignments, [
    { subjectType: 'user', subject: 'admin' },
    { subjectType: 'group', subject: 'oidc:corp/kl-admins' },
  ]);

  op.accounts.set('alice-sub', { preferred_username: 'alice', name: 'Alice', groups: ['kl-admins', 'staff'] });
  const alice = withCookie(await signIn(gw, 'alice-sub'));
  const me = await call(gw.url, 'GET', '/api/auth/user', alice);
  t.equal(me.status, 200);
  t.match(me.body.user, { username: 'alice', name: 'Alice', provider: 'corp', enabled: true });
  t.same(me.body.user.oidc_groups, ['kl-admins', 'staff']);
  t.same(
    me.body.user.roles.map((r: { name: string }) => r.name),
    ['admin'],
    'the admin role, by group',
  );
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/users/', alice)).status, 200, 'an admin by group');
  t.equal(
    (await call(gw.url, 'POST', '/api/auth/login/password', { body: { username: 'alice', password: 'anything-1' } }))
      .status,
    401,
    "a provider's user has no password",
  );

  // ---- a disabled provider suspends its users' sessions at once (a compromised client secret) ----
  const corp = (await call(gw.url, 'GET', `${PROVIDERS}/`, admin)).body.providers[0];
  const setEnabled = (enabled: boolean) =>
    call(gw.url, 'PUT', `${PROVIDERS}/${corp.id}`, { ...admin, body: { ...corp, enabled } });
  t.equal((await setEnabled(false)).status, 200);
  t.equal((await call(gw.url, 'GET', '/api/auth/user', alice)).status, 401, "a disabled provider's session: 401");
  t.equal((await setEnabled(true)).status, 200);
  t.equal((await call(gw.url, 'GET', '/api/auth/user', alice)).status, 200, 'enabled again: the session is back');

  // ---- a changed group: the roles follow at the next sign-in, for every session ----
  op.accounts.set('alice-sub', { preferred_username: 'alice', name: 'Alice', groups: ['readers'] });
  const alice2 = withCookie(await signIn(gw, 'alice-sub'));
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/users/', alice2)).status, 403, 'no longer an admin');
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/users/', alice)).status, 403, 'in her older session too');
  t.same(
    (await call(gw.url, 'GET', '/api/auth/user', alice2)).body.user.roles.map((r: { name: string }) => r.name),
    ['viewer'],
  );

  // ---- a user holding no role is refused (and kept, for an admin to assign roles) ----
  op.accounts.set('bob-sub', { preferred_username: 'bob', groups: ['nobody'] });
  const bob = await finish(await attempt(gw, 'bob-sub'));
  t.equal(bob.status, 302);
  t.equal(errorOf(bob.location), 'insufficient_permissions');
  t.notOk(bob.cookie, 'no session');

  // ---- an e-mail address names a user only when the provider says it verified it ----
  op.accounts.set('erin-sub', { email: 'erin@example.com', groups: ['readers'] });
  const unverified = await finish(await attempt(gw, 'erin-sub'));
  t.equal(errorOf(unverified.location), 'user_info_failed', 'no email_verified: refused');
  t.notOk(unverified.cookie, 'no session');

  // ---- a replayed state, a foreign state, no flow cookie ----
  const once = await attempt(gw, 'alice-sub');
  t.equal((await finish(once)).location, '/', 'first use');
  const replay = await finish(once);
  t.equal(errorOf(replay.location), 'callback_failed', 'the same state again: refused');
  t.notOk(replay.cookie);
  const a = await attempt(gw, 'alice-sub');
  const b = await attempt(gw, 'alice-sub');
  const crossed = await finish({ callback: a.callback, flowCookie: b.flowCookie });
  t.equal(errorOf(crossed.location), 'callback_failed', "another sign-in's state: refused (login CSRF)");
  t.notOk(crossed.cookie);
  const bare = await fetch(a.callback, { redirect: 'manual' });
  t.equal(errorOf(bare.headers.get('location') ?? ''), 'callback_failed', 'no flow cookie: refused');
  // The provider's error text is not shown on the login page (anyone can put text in a URL).
  const refused = await finish({
    callback: `${gw.url}/api/auth/callback?error=${encodeURIComponent('Call +1 555 0100 to fix your account')}`,
    flowCookie: b.flowCookie,
  });
  t.equal(errorOf(refused.location), 'callback_failed');
  t.notMatch(decodeURIComponent(refused.location), /555/, "the provider's text is not reflected");
  const forged = await finish({ callback: a.callback, flowCookie: 'kiteline_oidc=AAAA.BBBB.CCCC' });
  t.equal(errorOf(forged.location), 'callback_failed', 'a forged flow cookie: refused');

  // ---- a tampered ID token ----
  op.accounts.set('carol-sub', { preferred_username: 'carol', groups: ['readers'] });
  op.tamper = (claims) => ({ ...claims, groups: ['kl-admins'] });
  const tampered = await finish(await attempt(gw, 'carol-sub'));
  op.tamper = undefined;
  t.equal(errorOf(tampered.location), 'token_exchange_failed', 'a changed ID token fails its signature');
  t.notOk(tampered.cookie);
  const users = await call(gw.url, 'GET', '/api/v1/admin/users/?size=100', admin);
  t.notOk(
    users.body.users.some((u: { username: string }) => u.username === 'carol'),
    'no user for a tampered token',
  );

  // ---- a username held by a password user is not taken over ----
  op.accounts.set('vera-sub', { preferred_username: 'vera', groups: ['kl-admins'] });
  const takeover = await finish(await attempt(gw, 'vera-sub'));
  t.equal(errorOf(takeover.location), 'callback_error');
  t.notOk(takeover.cookie);
  const veraNow = users.body.users.find((u: { username: string }) => u.username === 'vera');
  t.equal(veraNow.provider, 'password');
  // Nor a user of the provider by another subject with the same name.
  op.accounts.set('alice-2-sub', { preferred_username: 'alice', groups: ['kl-admins'] });
  t.equal(errorOf((await finish(await attempt(gw, 'alice-2-sub'))).location), 'callback_error');

  // ---- the API keys of a provider's user stop when the provider has not vouched for too long ----
  const aliceUser = users.body.users.find((u: { username: string }) => u.username === 'alice');
  const { key } = await gw.services.apiKeys.createUserToken(
    { kind: 'user', id: aliceUser.id, name: 'alice', roles: ['viewer'] },
    'kubernetes',
    3600,
    10,
  );
  // A kubeconfig token is for the Kubernetes API: a cluster nobody registered is a 404 to a valid
  // token, a 401 to a dead one.
  const useKey = () => call(gw.url, 'GET', '/k8s/clusters/nowhere/version', { headers: { authorization: key } });
  t.equal((await useKey()).status, 404);
  kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'patch',
    'users.kiteline.io',
    'user-alice',
    '--type=merge',
    '-p',
    JSON.stringify({ metadata: { annotations: { 'kiteline.io/verified-at': '2001-01-01T00:00:00Z' } } }),
  ]);
  await eventually(
    "the key stops once the provider's word is older than the session lifetime",
    async () => (await useKey()).status === 401,
    10_000,
  );

  // ---- disabling ends the sessions of a provider's user, and refuses the next sign-in ----
  const aliceId = aliceUser.id;
  const disabled = await call(gw.url, 'POST', `/api/v1/admin/users/${aliceId}/enable`, {
    ...admin,
    body: { enabled: false },
  });
  t.equal(disabled.status, 200, disabled.text);
  t.equal((await call(gw.url, 'GET', '/api/auth/user', alice2)).status, 401, 'the session ended');
  t.equal(errorOf((await finish(await attempt(gw, 'alice-sub'))).location), 'user_disabled');
  await call(gw.url, 'POST', `/api/v1/admin/users/${aliceId}/enable`, { ...admin, body: { enabled: true } });
  t.equal((await call(gw.url, 'GET', '/api/auth/user', alice2)).status, 401, 're-enabling revives no session');
  await signIn(gw, 'alice-sub');

  // ---- a disabled or deleted provider signs nobody in ----
  const pending = await attempt(gw, 'alice-sub');
  await call(gw.url, 'PUT', `${PROVIDERS}/${created.body.provider.id}`, { ...admin, body: { enabled: false } });
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['password'],
    credentialProviders: ['password'],
    oauthProviders: [],
  });
  t.equal((await call(gw.url, 'GET', '/api/auth/login?provider=corp')).status, 400, 'disabled: unknown');
  t.equal(errorOf((await finish(pending)).location), 'callback_failed', 'a sign-in under way ends too');
  await call(gw.url, 'PUT', `${PROVIDERS}/${created.body.provider.id}`, { ...admin, body: { enabled: true } });
  await signIn(gw, 'alice-sub');

  // ---- the provider rotates its signing key: the new key is fetched ----
  // The library refetches the key set for a key it does not know once its copy is a minute old.
  op.rotateKeys();
  await new Promise((resolve) => setTimeout(resolve, 61_000));
  await signIn(gw, 'alice-sub');
  t.pass('signed in with a token signed by the new key');

  const deleted = await call(gw.url, 'DELETE', `${PROVIDERS}/${created.body.provider.id}`, admin);
  t.equal(deleted.status, 200);
  t.equal((await call(gw.url, 'GET', '/api/auth/login?provider=corp')).status, 400, 'deleted: unknown');
  await eventually(
    'the client secret is deleted with the provider',
    async () => kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', 'oauthprovider-corp-client']).status !== 0,
    10_000,
  );
});
