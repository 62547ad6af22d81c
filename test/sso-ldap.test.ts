// Sign-in against a real LDAP directory (OpenLDAP's slapd, run by this test on loopback, StartTLS
// with a CA made here): bind-search-bind, groups mapped to roles (and a changed group), one 401 for
// an unknown user and a wrong password, filter injection, the rate limit shared with password
// logins, a disabled user, a user holding no role, the periodic re-check (a group change without a
// new sign-in; a user removed from the directory loses every session), ldaps, and a directory
// whose certificate the configured CA did not sign.
import t from 'tap';
import { Attribute, Change } from 'ldapts';
import { uniqueName } from './helpers/clusters.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { bootstrapAdmin, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import {
  directoryEnv,
  groupDn,
  SERVICE_DN,
  startSlapd,
  storeBindPassword,
  userDn,
  type TestDirectory,
} from './helpers/slapd.js';

const ROLES = '/api/v1/admin/roles';

function ldapEnv(directory: TestDirectory, caFile: string): Record<string, string> {
  return { ...directoryEnv(directory, caFile), KITELINE_LOGIN_MAX_FAILURES: '4' };
}

async function ldapLogin(gw: TestGateway, username: string, password: string, address?: string) {
  return call(gw.url, 'POST', '/api/auth/login/ldap', {
    body: { username, password },
    ...(address ? { headers: { 'x-forwarded-for': address } } : {}),
  });
}

function sessionOf(res: { headers: Headers }): { headers: { cookie: string } } {
  const match = /auth_token=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
  if (!match) throw new Error('no session cookie');
  return withCookie(`auth_token=${match[1]}`);
}

t.test('LDAP sign-in against a real directory', async (t) => {
  const directory = await startSlapd(
    t,
    [
      { uid: 'alice', password: 'alice-password-1', cn: 'Alice Liddell' },
      { uid: 'bob', password: 'bob-password-1', cn: 'Bob' },
      { uid: 'carl', password: 'carl-password-1', cn: 'Carl' },
      { uid: 'dora', password: 'dora-password-1', cn: 'Dora' },
      { uid: 'admin', password: 'directory-admin-password', cn: 'Not the admin' },
    ],
    { 'kl-admins': ['alice', 'admin'], ops: ['alice', 'bob', 'dora'], staff: ['carl'] },
  );
  const namespace = uniqueName('kl');
  const gw = await startGateway(t, {
    namespace,
    env: {
      ...ldapEnv(directory, directory.caFile),
      KITELINE_TRUST_PROXY: 'loopback',
      KITELINE_LDAP_RECHECK_INTERVAL: '1',
    },
  });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  // Not "ldap" in `providers`: Kite's login page of before would show it as an OAuth button; its
  // password form does LDAP. The newer page reads the forms from `credentialProviders`.
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['password'],
    credentialProviders: ['password', 'ldap'],
    oauthProviders: [],
  });

  // The service account's password is a Secret in the install namespace.
  const noSecret = await ldapLogin(gw, 'alice', 'alice-password-1', '10.0.0.1');
  t.equal(noSecret.status, 503, 'no service password yet: 503, not a failed login');
  storeBindPassword(gw.kubeconfig, namespace);

  const roles = (await call(gw.url, 'GET', `${ROLES}/`, admin)).body.roles as { id: number; name: string }[];
  const adminRole = roles.find((r) => r.name === 'admin')!.id;
  const viewerRole = roles.find((r) => r.name === 'viewer')!.id;
  for (const [role, group] of [
    [adminRole, 'kl-admins'],
    [viewerRole, 'ops'],
  ] as const) {
    const res = await call(gw.url, 'POST', `${ROLES}/${role}/assign`, {
      ...admin,
      body: { subjectType: 'group', subject: group },
    });
    t.equal(res.status, 201);
  }

  // ---- sign-in, groups mapped to roles ----
  let signedIn!: Awaited<ReturnType<typeof ldapLogin>>;
  await eventually(
    'the service password to be seen',
    async () => (signedIn = await ldapLogin(gw, 'alice', 'alice-password-1', '10.0.0.2')).status !== 503,
    10_000,
  );
  t.equal(signedIn.status, 204, signedIn.text);
  const alice = sessionOf(signedIn);
  const me = (await call(gw.url, 'GET', '/api/auth/user', alice)).body.user;
  t.match(me, { username: 'alice', name: 'Alice Liddell', provider: 'ldap' });
  t.same(me.oidc_groups, ['kl-admins', 'ops']);
  t.same(me.roles.map((r: { name: string }) => r.name).sort(), ['admin', 'viewer']);
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/users/', alice)).status, 200, 'an admin by group');
  t.match(signedIn.headers.get('set-cookie'), /HttpOnly; SameSite=Lax/, 'the same session cookie as a password login');

  // ---- a changed group ----
  const ldap = await directory.admin();
  t.teardown(() => ldap.unbind());
  await ldap.modify(
    groupDn('kl-admins'),
    new Change({ operation: 'replace', modification: new Attribute({ type: 'member', values: [SERVICE_DN] }) }),
  );
  const again = await ldapLogin(gw, 'alice', 'alice-password-1', '10.0.0.2');
  t.equal(again.status, 204);
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/users/', alice)).status, 403, 'admin gone, older session too');
  t.same(
    (await call(gw.url, 'GET', '/api/auth/user', alice)).body.user.roles.map((r: { name: string }) => r.name),
    ['viewer'],
  );

  // ---- wrong password, unknown user, injection: one 401 ----
  const wrong = await ldapLogin(gw, 'bob', 'not-his-password', '10.0.0.3');
  const unknown = await ldapLogin(gw, 'nobody', 'whatever-password', '10.0.0.4');
  t.equal(wrong.status, 401);
  t.equal(unknown.status, 401);
  t.same(wrong.body, unknown.body, 'the same answer');
  for (const name of ['*', 'b*', 'bob)(uid=*', 'alice,ou=people']) {
    const res = await ldapLogin(gw, name, 'bob-password-1', '10.0.0.5');
    t.equal(res.status, 401, `username ${JSON.stringify(name)}: 401`);
  }
  t.equal((await ldapLogin(gw, 'bob', '', '10.0.0.6')).status, 400, 'an empty password (an unauthenticated bind)');
  // Kite's login page has only the password form: it signs directory users in too, with the same answers.
  const viaForm = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'alice', password: 'alice-password-1' },
    headers: { 'x-forwarded-for': '10.0.0.11' },
  });
  t.equal(viaForm.status, 204, 'the password form signs a directory user in');
  t.match((await call(gw.url, 'GET', '/api/auth/user', sessionOf(viaForm))).body.user, { provider: 'ldap' });
  const wrongViaForm = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'alice', password: 'not-her-password' },
    headers: { 'x-forwarded-for': '10.0.0.12' },
  });
  t.equal(wrongViaForm.status, 401);
  t.same(wrongViaForm.body, unknown.body);

  // ---- a directory entry named like kiteline's password admin does not become it ----
  const takeover = await ldapLogin(gw, 'admin', 'directory-admin-password', '10.0.0.10');
  t.equal(takeover.status, 401, "the password user's name is not taken over");
  t.same(takeover.body, unknown.body);
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/users/?size=100', admin)).body.users.find(
      (u: { username: string }) => u.username === 'admin',
    ).provider,
    'password',
  );

  // ---- the rate limit, shared with password logins ----
  for (let i = 0; i < 3; i++) await ldapLogin(gw, 'bob', `wrong-${i}-password`, `10.0.1.${i}`);
  const limited = await ldapLogin(gw, 'bob', 'bob-password-1', '10.0.1.9');
  t.equal(limited.status, 429, 'over the limit: 429 even with the right password');
  const viaPassword = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'bob', password: 'bob-password-1' },
    headers: { 'x-forwarded-for': '10.0.1.10' },
  });
  t.equal(viaPassword.status, 429, 'the same count for password logins');

  // ---- a user with no role ----
  const carl = await ldapLogin(gw, 'carl', 'carl-password-1', '10.0.0.7');
  t.equal(carl.status, 403, 'no role, directly or by group');
  t.notOk(carl.headers.get('set-cookie'));

  // ---- disabled in kiteline ----
  const dora = await ldapLogin(gw, 'dora', 'dora-password-1', '10.0.0.8');
  t.equal(dora.status, 204);
  const doraSession = sessionOf(dora);
  const users = (await call(gw.url, 'GET', '/api/v1/admin/users/?size=100', admin)).body.users;
  const doraId = users.find((u: { username: string }) => u.username === 'dora').id;
  await call(gw.url, 'POST', `/api/v1/admin/users/${doraId}/enable`, { ...admin, body: { enabled: false } });
  t.equal((await call(gw.url, 'GET', '/api/auth/user', doraSession)).status, 401, 'her session ended');
  const doraAgain = await ldapLogin(gw, 'dora', 'dora-password-1', '10.0.0.8');
  t.equal(doraAgain.status, 401, 'a disabled user cannot sign in');
  t.same(doraAgain.body, unknown.body, 'with the same answer as a wrong password');

  // ---- the periodic re-check: a group change reaches the roles without a new sign-in ----
  await ldap.modify(
    groupDn('kl-admins'),
    new Change({ operation: 'add', modification: new Attribute({ type: 'member', values: [userDn('alice')] }) }),
  );
  await eventually(
    'the re-check to give alice the admin role of her group again',
    async () => (await call(gw.url, 'GET', '/api/v1/admin/users/', alice)).status === 200,
    20_000,
  );
  t.pass('admin again, in the session she had');

  // ---- removed from the directory: no new sign-in, and the re-check ends her sessions ----
  await ldap.del(userDn('alice'));
  const gone = await ldapLogin(gw, 'alice', 'alice-password-1', '10.0.0.9');
  t.equal(gone.status, 401, 'a user removed from the directory cannot sign in again');
  await eventually(
    'the re-check to end her sessions',
    async () => (await call(gw.url, 'GET', '/api/auth/user', alice)).status === 401,
    20_000,
  );
  t.pass('her session ended without anyone touching kiteline');
});

t.test('ldaps with the CA of the directory; a certificate the configured CA did not sign: 503', async (t) => {
  const directory = await startSlapd(t, [{ uid: 'erin', password: 'erin-password-1', cn: 'Erin' }], {
    staff: ['erin'],
  });
  const ldaps = await startGateway(t, {
    env: {
      ...ldapEnv(directory, directory.caFile),
      KITELINE_LDAP_URL: directory.ldapsUrl,
      KITELINE_LDAP_START_TLS: 'false',
    },
  });
  const ldapsAdmin = withCookie(await bootstrapAdmin(ldaps.url));
  storeBindPassword(ldaps.kubeconfig, ldaps.namespace);
  const viewer = (await call(ldaps.url, 'GET', `${ROLES}/`, ldapsAdmin)).body.roles.find(
    (r: { name: string }) => r.name === 'viewer',
  );
  await call(ldaps.url, 'POST', `${ROLES}/${viewer.id}/assign`, {
    ...ldapsAdmin,
    body: { subjectType: 'group', subject: 'staff' },
  });
  await eventually(
    'a sign-in over ldaps',
    async () => (await ldapLogin(ldaps, 'erin', 'erin-password-1')).status === 204,
    10_000,
  );
  t.pass('signed in over ldaps://, the certificate checked against the CA');

  const gw = await startGateway(t, { env: ldapEnv(directory, directory.otherCaFile) });
  await bootstrapAdmin(gw.url);
  storeBindPassword(gw.kubeconfig, gw.namespace);
  await eventually(
    'the answer to be about TLS',
    async () => {
      const res = await ldapLogin(gw, 'erin', 'erin-password-1');
      return res.status === 503 && /StartTLS/.test(res.body.error) ? res : false;
    },
    10_000,
  );
  t.pass('refused: the certificate is checked');
  const noLdap = await startGateway(t);
  t.equal(
    (await call(noLdap.url, 'POST', '/api/auth/login/ldap', { body: { username: 'erin', password: 'x-password' } }))
      .status,
    404,
    'LDAP not configured: 404',
  );
});
