// Identities from identity providers (issue 32, points 5 and 13), against real providers: two
// OpenID Providers (oidc-provider) and an LDAP directory (slapd), all run by this test.
// - A group assignment names the provider the group comes from (`oidc:<provider>/<group>`,
//   `ldap/<group>`): another provider, or the directory, sending the same group name gets nothing;
//   the role-assignment API takes and answers the scoped form (a bare name is resolved only when
//   there is one provider to resolve it to); bare names of before are matched only for the one
//   provider there is, and rewritten to it at start-up.
// - A user pre-created with kubectl binds to the provider's subject, never to a username claim
//   the user may choose at the provider; a directory entry deleted and re-created under the same
//   name is another person; a user holding no role is not kept for ever.
import t from 'tap';
import type { Client } from 'ldapts';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { bootstrapAdmin, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { startOidcProvider, type TestOidcProvider } from './helpers/oidc-provider.js';
import { oidcSignIn, signInError } from './helpers/oidc-sign-in.js';
import { directoryEnv, startSlapd, storeBindPassword, userDn } from './helpers/slapd.js';

const ROLES = '/api/v1/admin/roles';
const PROVIDERS = '/api/v1/admin/oauth-providers';
type Session = { headers: { cookie: string } };

async function addProvider(gw: TestGateway, admin: Session, name: string, op: TestOidcProvider): Promise<void> {
  const res = await call(gw.url, 'POST', `${PROVIDERS}/`, {
    ...admin,
    body: {
      name,
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      issuer: op.issuer,
      scopes: 'openid,profile,groups',
    },
  });
  if (res.status !== 201) throw new Error(`provider ${name}: ${res.status} ${res.text}`);
}

async function roleId(gw: TestGateway, admin: Session, name: string): Promise<number> {
  const roles = (await call(gw.url, 'GET', `${ROLES}/`, admin)).body.roles as { id: number; name: string }[];
  return roles.find((r) => r.name === name)!.id;
}

function annotations(gw: TestGateway, kind: string, name: string): Record<string, string> {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', kind, name, '-o', 'json']);
  if (res.status !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout).metadata.annotations ?? {};
}

function setAnnotation(gw: TestGateway, kind: string, name: string, key: string, value: string): void {
  const res = kubectl(gw.kubeconfig, ['-n', gw.namespace, 'annotate', '--overwrite', kind, name, `${key}=${value}`]);
  if (res.status !== 0) throw new Error(res.stderr);
}

const ldapLogin = (gw: TestGateway, username: string, password: string) =>
  call(gw.url, 'POST', '/api/auth/login/ldap', { body: { username, password } });

const usernames = async (gw: TestGateway, admin: Session) =>
  ((await call(gw.url, 'GET', '/api/v1/admin/users/?size=100', admin)).body.users as { username: string }[]).map(
    (u) => u.username,
  );

t.test('a group assignment names its provider; the same group name elsewhere grants nothing', async (t) => {
  const directory = await startSlapd(
    t,
    [
      { uid: 'lara', password: 'lara-password-1', cn: 'Lara' },
      { uid: 'leon', password: 'leon-password-1', cn: 'Leon' },
    ],
    { 'platform-admins': ['lara', 'leon'], 'ldap-staff': ['lara'] },
  );
  const gw = await startGateway(t, { env: directoryEnv(directory) });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  storeBindPassword(gw.kubeconfig, gw.namespace);
  const corp = await startOidcProvider(`${gw.url}/api/auth/callback`);
  const partner = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => Promise.all([corp.close(), partner.close()]));
  await addProvider(gw, admin, 'corp', corp);
  await addProvider(gw, admin, 'partner', partner);
  const adminRole = await roleId(gw, admin, 'admin');
  const viewerRole = await roleId(gw, admin, 'viewer');
  const assign = (role: number, subject: string) =>
    call(gw.url, 'POST', `${ROLES}/${role}/assign`, { ...admin, body: { subjectType: 'group', subject } });

  // ---- the role-assignment API: the scoped form ----
  const bare = await assign(adminRole, 'platform-admins');
  t.equal(bare.status, 400, 'a bare name with several providers is ambiguous: 400');
  t.match(bare.body.error, /oidc:corp\/platform-admins/, 'the message shows the forms to use');
  const scoped = await assign(adminRole, 'oidc:corp/platform-admins');
  t.equal(scoped.status, 201, scoped.text);
  t.same(scoped.body.assignment, { roleId: adminRole, subjectType: 'group', subject: 'oidc:corp/platform-admins' });
  t.equal((await assign(adminRole, 'oidc:corp/platform-admins')).status, 200, 'assigned already: 200');
  t.equal((await assign(viewerRole, 'ldap/ldap-staff')).status, 201);
  for (const bad of ['oidc:Corp/x', 'oidc:corp/', 'oidc:/x', 'oidc:corp', 'ldap/', 'ldap:x', 'oidc:pass word/x']) {
    const res = await assign(viewerRole, bad);
    t.equal(res.status, 400, `${JSON.stringify(bad)}: 400 (${res.text})`);
  }
  const view = await call(gw.url, 'GET', `${ROLES}/${adminRole}`, admin);
  t.match(view.body.role.assignments, [
    { subjectType: 'user', subject: 'admin' },
    { subjectType: 'group', subject: 'oidc:corp/platform-admins' },
  ]);

  // ---- corp's group gives corp's users the role ----
  corp.accounts.set('alice-sub', { preferred_username: 'alice', groups: ['platform-admins'] });
  const alice = await oidcSignIn(gw, 'alice-sub', 'corp');
  t.equal(signInError(alice), null, `corp's platform-admins signs in (${alice.location})`);
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/users/', withCookie(alice.cookie!))).status, 200, 'as an admin');

  // ---- the attack: the same group name from another provider, or from the directory ----
  partner.accounts.set('mallory-sub', { preferred_username: 'mallory', groups: ['platform-admins'] });
  const mallory = await oidcSignIn(gw, 'mallory-sub', 'partner');
  t.equal(signInError(mallory), 'insufficient_permissions', "partner's platform-admins is not corp's");
  t.notOk(mallory.cookie, 'no session');
  const leon = await ldapLogin(gw, 'leon', 'leon-password-1');
  t.equal(leon.status, 403, "the directory's platform-admins is not corp's either");

  // A bare name in a Role, as written before (kubectl annotate, as the docs said), matches no one
  // while several providers are configured.
  setAnnotation(
    gw,
    'roles.kiteline.io',
    'role-admin',
    'kiteline.io/groups',
    '["oidc:corp/platform-admins","platform-admins"]',
  );
  await eventually('the annotation to be seen', async () => {
    const res = await call(gw.url, 'GET', `${ROLES}/${adminRole}`, admin);
    return res.body.role.assignments.some((a: { subject: string }) => a.subject === 'platform-admins');
  });
  const mallory2 = await oidcSignIn(gw, 'mallory-sub', 'partner');
  t.equal(signInError(mallory2), 'insufficient_permissions', 'a bare name of before does not reach partner');
  t.equal((await ldapLogin(gw, 'leon', 'leon-password-1')).status, 403, 'nor the directory');

  // ---- LDAP groups are ldap/<name>; the directory's subject is the entry's entryUUID ----
  const lara = await ldapLogin(gw, 'lara', 'lara-password-1');
  t.equal(lara.status, 204, lara.text);
  const laraSession = withCookie(/auth_token=[^;]+/.exec(lara.headers.get('set-cookie')!)![0]);
  const me = (await call(gw.url, 'GET', '/api/auth/user', laraSession)).body.user;
  t.same(
    me.roles.map((r: { name: string }) => r.name),
    ['viewer'],
    'viewer by ldap/ldap-staff, not admin by platform-admins',
  );
  const subject = annotations(gw, 'users.kiteline.io', 'user-lara')['kiteline.io/subject'];
  t.match(subject, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'the entryUUID, not the DN');

  // An older release recorded the DN: the next sign-in records the entryUUID.
  setAnnotation(gw, 'users.kiteline.io', 'user-lara', 'kiteline.io/subject', userDn('lara'));
  await eventually('the DN to be seen', async () => {
    const user = gw.services.users.byUsername('lara');
    return user?.metadata.annotations?.['kiteline.io/subject'] === userDn('lara');
  });
  t.equal((await ldapLogin(gw, 'lara', 'lara-password-1')).status, 204, 'a DN of before still signs in');
  t.equal(annotations(gw, 'users.kiteline.io', 'user-lara')['kiteline.io/subject'], subject, 'now the entryUUID');

  // The entry deleted and re-created under the same name is another person: not lara's user.
  const root: Client = await directory.admin();
  t.teardown(() => root.unbind());
  await root.del(userDn('lara'));
  await root.add(userDn('lara'), {
    objectClass: 'inetOrgPerson',
    uid: 'lara',
    cn: 'Another Lara',
    sn: 'lara',
    userPassword: 'new-lara-password-1',
  });
  const impostor = await ldapLogin(gw, 'lara', 'new-lara-password-1');
  t.equal(impostor.status, 401, 'a new entry under the old DN does not get the old user');

  // ---- unassigning the scoped group takes the role ----
  const removed = await call(
    gw.url,
    'DELETE',
    `${ROLES}/${adminRole}/assign?subjectType=group&subject=${encodeURIComponent('oidc:corp/platform-admins')}`,
    admin,
  );
  t.equal(removed.status, 200);
  await eventually(
    'alice to lose admin',
    async () => (await call(gw.url, 'GET', '/api/v1/admin/users/', withCookie(alice.cookie!))).status === 403,
    10_000,
  );
  t.pass('unassigned');
});

t.test('bare group names of before: the one provider there is, rewritten at start-up', async (t) => {
  const namespace = uniqueName('kl');
  const gw = await startGateway(t, { namespace });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  const corp = await startOidcProvider(`${gw.url}/api/auth/callback`);
  const partner = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => Promise.all([corp.close(), partner.close()]));
  await addProvider(gw, admin, 'corp', corp);
  const created = await call(gw.url, 'POST', `${ROLES}/`, {
    ...admin,
    body: { name: 'ops', clusters: ['*'], namespaces: ['*'], resources: ['pods'], verbs: ['get'] },
  });
  t.equal(created.status, 201, created.text);
  const ops = created.body.role.id as number;

  // With one provider, the API resolves a bare name to it (Kite's UI sends bare names).
  const resolved = await call(gw.url, 'POST', `${ROLES}/${ops}/assign`, {
    ...admin,
    body: { subjectType: 'group', subject: 'api-ops' },
  });
  t.equal(resolved.status, 201);
  t.equal(resolved.body.assignment.subject, 'oidc:corp/api-ops', 'stored and answered scoped');

  // A bare name of before matches the groups of the one provider there is...
  setAnnotation(gw, 'roles.kiteline.io', 'role-ops', 'kiteline.io/groups', '["oidc:corp/api-ops","legacy-ops"]');
  corp.accounts.set('alice-sub', { preferred_username: 'alice', groups: ['legacy-ops'] });
  await eventually('the bare name to be seen', () =>
    gw.services.roles.byName('ops')?.metadata.annotations?.['kiteline.io/groups']?.includes('legacy-ops'),
  );
  const alice = await oidcSignIn(gw, 'alice-sub', 'corp');
  t.equal(signInError(alice), null, `the one provider's group (${alice.location})`);

  // ...and a replica that starts (an upgrade) rewrites it to that provider's.
  await startGateway(t, { namespace });
  t.same(
    JSON.parse(annotations(gw, 'roles.kiteline.io', 'role-ops')['kiteline.io/groups']),
    ['oidc:corp/api-ops', 'oidc:corp/legacy-ops'],
    'rewritten at start-up',
  );

  // A second provider: a bare name added now is nobody's, and stays as it is at start-up.
  await addProvider(gw, admin, 'partner', partner);
  setAnnotation(
    gw,
    'roles.kiteline.io',
    'role-ops',
    'kiteline.io/groups',
    '["oidc:corp/api-ops","oidc:corp/legacy-ops","legacy-two"]',
  );
  await eventually('the second bare name to be seen', () =>
    gw.services.roles.byName('ops')?.metadata.annotations?.['kiteline.io/groups']?.includes('legacy-two'),
  );
  partner.accounts.set('mallory-sub', { preferred_username: 'mallory', groups: ['legacy-ops', 'legacy-two'] });
  t.equal(signInError(await oidcSignIn(gw, 'mallory-sub', 'partner')), 'insufficient_permissions');
  corp.accounts.set('bob-sub', { preferred_username: 'bob', groups: ['legacy-two'] });
  t.equal(signInError(await oidcSignIn(gw, 'bob-sub', 'corp')), 'insufficient_permissions', "nor corp's");
  await startGateway(t, { namespace });
  t.same(
    JSON.parse(annotations(gw, 'roles.kiteline.io', 'role-ops')['kiteline.io/groups']),
    ['oidc:corp/api-ops', 'oidc:corp/legacy-ops', 'legacy-two'],
    'left for an administrator to scope',
  );
  t.equal(signInError(await oidcSignIn(gw, 'alice-sub', 'corp')), null, 'the rewritten name still works');
});

t.test('a user pre-created with kubectl binds to the subject, not to a username claim', async (t) => {
  const gw = await startGateway(t);
  const admin = withCookie(await bootstrapAdmin(gw.url));
  const corp = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => corp.close());
  await addProvider(gw, admin, 'corp', corp);

  // Declared with kubectl before their first sign-in: dave with his subject, frank without.
  const user = (name: string, subject?: string) => ({
    apiVersion: 'kiteline.io/v1alpha1',
    kind: 'User',
    metadata: {
      name: `user-${name}`,
      namespace: gw.namespace,
      labels: { 'kiteline.io/provider': 'corp' },
      ...(subject ? { annotations: { 'kiteline.io/subject': subject } } : {}),
    },
    spec: { username: name, roles: ['viewer'] },
  });
  const applied = kubectl(
    gw.kubeconfig,
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [user('dave', `${corp.issuer} dave-sub`), user('frank')] }),
  );
  t.equal(applied.status, 0, applied.stderr);
  await eventually('the users to be seen', () => gw.services.users.byUsername('frank'));

  // The attack: an account at the provider that calls itself dave, or frank.
  corp.accounts.set('mallory-sub', { preferred_username: 'dave', groups: [] });
  const asDave = await oidcSignIn(gw, 'mallory-sub', 'corp');
  t.equal(signInError(asDave), 'callback_error', "another subject named dave does not get dave's user");
  t.notOk(asDave.cookie);
  corp.accounts.set('mallory-sub', { preferred_username: 'frank', groups: [] });
  const asFrank = await oidcSignIn(gw, 'mallory-sub', 'corp');
  t.equal(signInError(asFrank), 'callback_error', 'a user declared without a subject is bound to no one who asks');
  t.notOk(asFrank.cookie);
  t.notOk(annotations(gw, 'users.kiteline.io', 'user-frank')['kiteline.io/subject'], 'frank is still unbound');

  // dave's own subject gets dave's user, whatever username his provider account shows now.
  corp.accounts.set('dave-sub', { preferred_username: 'david', groups: [] });
  const dave = await oidcSignIn(gw, 'dave-sub', 'corp');
  t.equal(signInError(dave), null, dave.location);
  const me = (await call(gw.url, 'GET', '/api/auth/user', withCookie(dave.cookie ?? ''))).body?.user;
  t.match(me, { username: 'dave', provider: 'corp' });
  t.same(
    me?.roles.map((r: { name: string }) => r.name),
    ['viewer'],
  );
  t.notOk((await usernames(gw, admin)).includes('david'), 'no second user for a changed username claim');
});

t.test('a user of a provider holding no role is refused, and not kept', async (t) => {
  const gw = await startGateway(t, { env: { KITELINE_ROLELESS_USER_TTL: '8' } });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  const corp = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => corp.close());
  await addProvider(gw, admin, 'corp', corp);
  // Declared with kubectl for a later sign-in, holding no role yet: not the sweep's business.
  const declared = kubectl(
    gw.kubeconfig,
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'kiteline.io/v1alpha1',
      kind: 'User',
      metadata: {
        name: 'user-gina',
        namespace: gw.namespace,
        labels: { 'kiteline.io/provider': 'corp' },
        annotations: { 'kiteline.io/subject': `${corp.issuer} gina-sub` },
      },
      spec: { username: 'gina' },
    }),
  );
  t.equal(declared.status, 0, declared.stderr);
  corp.accounts.set('nora-sub', { preferred_username: 'nora', groups: ['nothing'] });
  corp.accounts.set('rita-sub', { preferred_username: 'rita', groups: [] });
  corp.accounts.set('dina-sub', { preferred_username: 'dina', groups: [] });
  for (const sub of ['nora-sub', 'rita-sub', 'dina-sub'])
    t.equal(signInError(await oidcSignIn(gw, sub, 'corp')), 'insufficient_permissions', sub);
  const listed = (await call(gw.url, 'GET', '/api/v1/admin/users/?size=100', admin)).body.users as {
    id: number;
    username: string;
  }[];
  t.ok(
    listed.some((u) => u.username === 'nora'),
    'listed for a while, for an administrator to give a role',
  );
  // rita gets a role in time; dina is disabled by an administrator (kept, so the decision holds).
  const viewerRole = await roleId(gw, admin, 'viewer');
  const given = await call(gw.url, 'POST', `${ROLES}/${viewerRole}/assign`, {
    ...admin,
    body: { subjectType: 'user', subject: 'rita' },
  });
  t.equal(given.status, 201);
  const dinaId = listed.find((u) => u.username === 'dina')!.id;
  t.equal(
    (await call(gw.url, 'POST', `/api/v1/admin/users/${dinaId}/enable`, { ...admin, body: { enabled: false } })).status,
    200,
  );
  await eventually('the role-less user to go', async () => !(await usernames(gw, admin)).includes('nora'), 30_000, 200);
  const left = await usernames(gw, admin);
  t.ok(left.includes('rita'), 'a user given a role stays');
  t.ok(left.includes('dina'), 'a disabled user stays');
  t.ok(left.includes('admin'), 'password users stay');
  t.ok(left.includes('gina'), 'a user declared with kubectl that never signed in stays');
  t.equal(signInError(await oidcSignIn(gw, 'rita-sub', 'corp')), null, 'rita signs in');
});
