// The LDAP directory configured from Kite's UI (PUT /api/v1/admin/ldap-setting/) against a real
// directory (OpenLDAP's slapd, run by this test on loopback, StartTLS and ldaps with a CA made
// here): configured, a directory user signs in (Kite's %s filters, groups mapped to roles); a
// change holds from the next sign-in without a restart, made by the API or by kubectl; a broken
// rule is a 400 that changes nothing; a moved server needs the password again; LDAP turned off
// suspends its users' sessions; the login page's providers follow; and how the environment's
// directory (KITELINE_LDAP_*) and the LDAPSetting combine.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { kubectl, kubectlInBackground, uniqueName } from './helpers/clusters.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { bootstrapAdmin, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import {
  BASE,
  directoryEnv,
  SERVICE_DN,
  SERVICE_PASSWORD,
  startSlapd,
  storeBindPassword,
  type TestDirectory,
} from './helpers/slapd.js';

const LDAP = '/api/v1/admin/ldap-setting';
const ROLES = '/api/v1/admin/roles';

const directory: TestDirectory = await startSlapd(
  t,
  [
    { uid: 'alice', password: 'alice-password-1', cn: 'Alice Liddell' },
    { uid: 'bob', password: 'bob-password-1', cn: 'Bob' },
  ],
  { ops: ['alice', 'bob'] },
);
const ca = readFileSync(directory.caFile, 'utf8');

/** What Settings → Authentication sends for the test directory (Kite's %s filters). */
const uiForm = {
  enabled: true,
  serverUrl: directory.url,
  useStartTLS: true,
  bindDn: SERVICE_DN,
  bindPassword: SERVICE_PASSWORD,
  userBaseDn: `ou=people,${BASE}`,
  userFilter: '(uid=%s)',
  usernameAttribute: 'uid',
  displayNameAttribute: 'cn',
  groupBaseDn: `ou=groups,${BASE}`,
  groupFilter: '(member=%s)',
  groupNameAttribute: 'cn',
};

async function ldapLogin(gw: TestGateway, username: string, password: string, via = 'ldap') {
  return call(gw.url, 'POST', `/api/auth/login/${via}`, {
    body: { username, password },
    headers: { 'x-forwarded-for': `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}` },
  });
}

function sessionOf(res: { headers: Headers }): { headers: { cookie: string } } {
  const match = /auth_token=([^;]+)/.exec(res.headers.get('set-cookie') ?? '');
  if (!match) throw new Error('no session cookie');
  return withCookie(`auth_token=${match[1]}`);
}

/** `kubectl patch` of the LDAPSetting's spec (a merge patch), as an operator would. */
async function patchSetting(gw: TestGateway, spec: object): Promise<void> {
  const args = ['-n', gw.namespace, 'patch', 'ldapsettings.kiteline.io', 'ldap', '--type=merge'];
  const res = await kubectlInBackground(gw.kubeconfig, [...args, '-p', JSON.stringify({ spec })]);
  if (res.status !== 0) throw new Error(`kubectl patch: ${res.stderr}`);
}

/** The LDAPSetting and its Secret as the host has them. */
function hostState(gw: TestGateway): string {
  return kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'get',
    'ldapsettings.kiteline.io,secrets',
    '-o',
    'jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion} {end}',
  ]).stdout;
}

t.test('configured from the UI, changed by the API and by kubectl, each holding at the next sign-in', async (t) => {
  const gw = await startGateway(t, {
    logName: 'kite-ldap-setting',
    env: { KITELINE_TRUST_PROXY: 'loopback' },
  });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1')).status, 404, 'no directory yet');
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['password'],
    credentialProviders: ['password'],
    oauthProviders: [],
  });

  // ---- broken rules: 400, nothing written ----
  const before = hostState(gw);
  for (const [what, change, message] of [
    ['no bind password', { bindPassword: undefined }, /bindPassword is required when enabled/],
    ['no server', { serverUrl: '' }, /serverUrl is required when enabled/],
    ['no user base', { userBaseDn: ' ' }, /userBaseDn is required when enabled/],
    ['plain ldap:// beyond loopback', { serverUrl: 'ldap://ldap.example.com:389', useStartTLS: false }, /clear text/],
    ['StartTLS on ldaps', { serverUrl: directory.ldapsUrl }, /ldaps is TLS already/],
    ['an http URL', { serverUrl: 'http://127.0.0.1:389' }, /ldap:\/\/ or ldaps:\/\//],
    ['credentials in the URL', { serverUrl: 'ldaps://user:pw@ldap.example.com' }, /without credentials/],
    ['a filter without its placeholder', { userFilter: '(uid=alice)' }, /userFilter must contain/],
    ['two placeholders', { userFilter: '(|(uid=%s)(mail=%s))' }, /exactly once/],
    ['an unbalanced filter', { userFilter: '(uid=%s' }, /parenthesized|not an LDAP filter/],
    ['a group filter without its placeholder', { groupFilter: '(member=x)' }, /groupFilter must contain/],
    ['a CA that is no certificate', { caCert: 'not a certificate' }, /caCert must be a PEM certificate/],
    ['an attribute with a space', { usernameAttribute: 'u id' }, /attribute name/],
    ['a DN on two lines', { bindDn: 'cn=a,\ndc=b' }, /bindDn must be a DN/],
    ['an unknown member', { bindPasswordPlain: 'x' }, /additional/],
  ] as const) {
    const res = await call(gw.url, 'PUT', `${LDAP}/`, { ...admin, body: { ...uiForm, ...change } });
    t.equal(res.status, 400, `${what}: 400 (${res.text})`);
    t.match(res.body?.error, message, what);
  }
  t.equal(hostState(gw), before, 'nothing was written');

  // ---- configured from the UI ----
  const put = await call(gw.url, 'PUT', `${LDAP}/`, { ...admin, body: { ...uiForm, caCert: ca } });
  t.equal(put.status, 200, put.text);
  t.match(put.body, {
    enabled: true,
    serverUrl: directory.url,
    userFilter: '(uid=%s)',
    bindPassword: '',
    bindPasswordConfigured: true,
    source: 'setting',
    problem: '',
  });
  t.notMatch(put.text, SERVICE_PASSWORD, 'the password is not in the answer');
  const object = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'ldapsettings.kiteline.io', 'ldap', '-o', 'json']);
  t.notMatch(object.stdout, SERVICE_PASSWORD, 'nor in the LDAPSetting');
  t.match(JSON.parse(object.stdout).spec, { bindPasswordSecretRef: { name: 'kiteline-ldap-setting' } });
  t.equal((await call(gw.url, 'GET', LDAP, admin)).body.bindPasswordConfigured, true);
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['password'],
    credentialProviders: ['password', 'ldap'],
    oauthProviders: [],
  });

  // The directory is the only source of groups: Kite's bare group name is the directory's.
  const roles = (await call(gw.url, 'GET', `${ROLES}/`, admin)).body.roles as { id: number; name: string }[];
  const viewerRole = roles.find((r) => r.name === 'viewer')!.id;
  const assigned = await call(gw.url, 'POST', `${ROLES}/${viewerRole}/assign`, {
    ...admin,
    body: { subjectType: 'group', subject: 'ops' },
  });
  t.equal(assigned.status, 201, assigned.text);
  t.equal(assigned.body.assignment.subject, 'ldap/ops');

  const signedIn = await ldapLogin(gw, 'alice', 'alice-password-1');
  t.equal(signedIn.status, 204, signedIn.text);
  const alice = sessionOf(signedIn);
  t.match((await call(gw.url, 'GET', '/api/auth/user', alice)).body.user, {
    username: 'alice',
    name: 'Alice Liddell',
    provider: 'ldap',
    oidc_groups: ['ops'],
  });
  t.equal((await ldapLogin(gw, 'alice', 'not-her-password')).status, 401, 'the directory checks the password');
  t.equal((await ldapLogin(gw, 'bob', 'bob-password-1', 'password')).status, 204, "Kite's password form too");

  // ---- a change by the API holds at the next sign-in ----
  const narrowed = await call(gw.url, 'PUT', LDAP, {
    ...admin,
    body: { userFilter: '(&(uid={username})(cn=Bob))' },
  });
  t.equal(narrowed.status, 200, narrowed.text);
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1')).status, 401, 'alice no longer matches the filter');
  t.equal((await ldapLogin(gw, 'bob', 'bob-password-1')).status, 204, 'bob does');
  t.equal(
    (await call(gw.url, 'PUT', LDAP, { ...admin, body: { userFilter: '' } })).body.userFilter,
    '(uid={username})',
  );
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1')).status, 204, 'the default filter again');

  // ---- the stored password goes to no other server without being given again ----
  const beforeMove = hostState(gw);
  const moved = await call(gw.url, 'PUT', LDAP, {
    ...admin,
    body: { serverUrl: directory.ldapsUrl, useStartTLS: false },
  });
  t.equal(moved.status, 400);
  t.match(moved.body.error, /give bindPassword again/);
  const otherCa = await call(gw.url, 'PUT', LDAP, {
    ...admin,
    body: { caCert: readFileSync(directory.otherCaFile, 'utf8') },
  });
  t.equal(otherCa.status, 400, 'another CA neither');
  t.equal(hostState(gw), beforeMove, 'nothing changed');
  const ldaps = await call(gw.url, 'PUT', LDAP, {
    ...admin,
    body: { serverUrl: directory.ldapsUrl, useStartTLS: false, bindPassword: SERVICE_PASSWORD },
  });
  t.equal(ldaps.status, 200, ldaps.text);
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1')).status, 204, 'over ldaps://, the CA checked');
  const wrongPassword = await call(gw.url, 'PUT', LDAP, { ...admin, body: { bindPassword: 'not-the-password' } });
  t.equal(wrongPassword.status, 200);
  const refused = await ldapLogin(gw, 'alice', 'alice-password-1');
  t.equal(refused.status, 503, 'the directory refuses the service account: 503, not a failed login');
  t.notMatch(refused.text, /not-the-password/);
  await call(gw.url, 'PUT', LDAP, { ...admin, body: { bindPassword: SERVICE_PASSWORD } });
  const aliceAgain = await ldapLogin(gw, 'alice', 'alice-password-1');
  t.equal(aliceAgain.status, 204, 'the new password, at once');
  const alice2 = sessionOf(aliceAgain);

  // ---- kubectl: turned off, her sessions are suspended; on again, they are back ----
  await patchSetting(gw, { enabled: false });
  await eventually(
    'the directory to be off',
    async () => (await ldapLogin(gw, 'alice', 'alice-password-1')).status === 404,
  );
  t.equal((await call(gw.url, 'GET', '/api/auth/user', alice2)).status, 401, 'her session is suspended');
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body.credentialProviders, ['password']);
  t.match((await call(gw.url, 'GET', LDAP, admin)).body, { enabled: false, source: 'setting' });
  await patchSetting(gw, { enabled: true });
  await eventually(
    'her session to be back',
    async () => (await call(gw.url, 'GET', '/api/auth/user', alice2)).status === 200,
  );
  t.pass('on again: her session holds again');

  // An LDAPSetting applied with kubectl that breaks a rule is not used, and says why.
  await patchSetting(gw, { serverUrl: 'ldap://ldap.example.com:389', useStartTLS: false });
  const broken = await eventually('the broken setting to show', async () => {
    const res = await call(gw.url, 'GET', LDAP, admin);
    return res.body.problem ? res.body : undefined;
  });
  t.match(broken.problem, /clear text/);
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1')).status, 404, 'not used: no LDAP sign-in');
  const fixed = await call(gw.url, 'PUT', LDAP, {
    ...admin,
    body: { serverUrl: directory.url, useStartTLS: true, bindPassword: SERVICE_PASSWORD },
  });
  t.equal(fixed.status, 200, fixed.text);
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1')).status, 204, 'fixed through the API');

  // ---- password login off: the form still signs directory users in, LDAP may not go off ----
  const noPassword = await call(gw.url, 'PUT', '/api/v1/admin/general-setting/', {
    ...admin,
    body: { passwordLoginDisabled: true },
  });
  t.equal(noPassword.status, 200, 'allowed: the directory signs people in');
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['password'],
    credentialProviders: ['ldap'],
    oauthProviders: [],
  });
  t.equal((await ldapLogin(gw, 'alice', 'alice-password-1', 'password')).status, 204, 'the form, for the directory');
  t.equal(
    (await ldapLogin(gw, 'admin', 'admin-password-1', 'password')).status,
    401,
    "the password admin's password no longer signs in",
  );
  const beforeOff = hostState(gw);
  const lockout = await call(gw.url, 'PUT', LDAP, { ...admin, body: { enabled: false } });
  t.equal(lockout.status, 400, 'turning the directory off would leave nobody a way in');
  t.match(lockout.body.error, /nobody could sign in/);
  t.equal(hostState(gw), beforeOff, 'nothing changed');
  t.equal(
    (await call(gw.url, 'PUT', '/api/v1/admin/general-setting/', { ...admin, body: { passwordLoginDisabled: false } }))
      .status,
    200,
  );
});

t.test('the environment and the LDAPSetting: the environment until one exists, then the LDAPSetting', async (t) => {
  const namespace = uniqueName('kl');
  const gw = await startGateway(t, {
    namespace,
    logName: 'kite-ldap-env',
    env: { ...directoryEnv(directory), KITELINE_TRUST_PROXY: 'loopback' },
  });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  storeBindPassword(gw.kubeconfig, namespace);
  const roles = (await call(gw.url, 'GET', `${ROLES}/`, admin)).body.roles as { id: number; name: string }[];
  await call(gw.url, 'POST', `${ROLES}/${roles.find((r) => r.name === 'viewer')!.id}/assign`, {
    ...admin,
    body: { subjectType: 'group', subject: 'ldap/ops' },
  });
  const shown = await eventually('the bind password to be seen', async () => {
    const res = await call(gw.url, 'GET', `${LDAP}/`, admin);
    return res.body.bindPasswordConfigured ? res.body : undefined;
  });
  t.match(shown, {
    enabled: true,
    serverUrl: directory.url,
    useStartTLS: true,
    caCert: ca.trim(),
    bindDn: SERVICE_DN,
    bindPassword: '',
    userFilter: '(uid={username})',
    source: 'environment',
  });
  t.equal((await ldapLogin(gw, 'bob', 'bob-password-1')).status, 204, "the environment's directory");

  // Saving the page unchanged writes nothing: the environment stays in force.
  const same = await call(gw.url, 'PUT', LDAP, { ...admin, body: shown });
  t.equal(same.status, 200, same.text);
  t.equal(same.body.source, 'environment');
  t.equal(kubectl(gw.kubeconfig, ['-n', namespace, 'get', 'ldapsettings.kiteline.io', 'ldap']).status, 1, 'no object');

  // A change makes the LDAPSetting, which decides from then on (here: LDAP off).
  const off = await call(gw.url, 'PUT', LDAP, { ...admin, body: { enabled: false } });
  t.equal(off.status, 200, off.text);
  t.match(off.body, { enabled: false, source: 'setting', bindPasswordConfigured: true });
  const object = JSON.parse(
    kubectl(gw.kubeconfig, ['-n', namespace, 'get', 'ldapsettings.kiteline.io', 'ldap', '-o', 'json']).stdout,
  );
  t.same(object.spec.bindPasswordSecretRef, { name: 'kiteline-ldap-bind' }, "the environment's Secret, by reference");
  t.equal((await ldapLogin(gw, 'bob', 'bob-password-1')).status, 404, 'the LDAPSetting decides: off');
  // Deleting it brings the environment's directory back.
  t.equal(
    (await kubectlInBackground(gw.kubeconfig, ['-n', namespace, 'delete', 'ldapsettings.kiteline.io', 'ldap'])).status,
    0,
  );
  await eventually(
    "the environment's directory again",
    async () => (await ldapLogin(gw, 'bob', 'bob-password-1')).status === 204,
  );
  t.equal(
    kubectl(gw.kubeconfig, ['-n', namespace, 'get', 'secret', 'kiteline-ldap-bind']).status,
    0,
    "the environment's Secret was left alone",
  );
});
