// Kite's settings pages (issue 34) against the shared host cluster: an unknown admin path is a 404;
// the general settings (GET|PUT /api/v1/admin/general-setting[/], stored as the GeneralSetting
// `general`, the AI key write-only in its Secret), /api/v1/ai/status, password login switched off,
// the global sidebar (POST|DELETE /api/v1/admin/sidebar_preference/global and GET /api/auth/user),
// init_check before any user, and OAuth providers' allowedGroups at a real OpenID Provider. Every
// route role by role (admin session and key; viewer, namespace-limited role: 403; anonymous: 401);
// bad input is a 400 that changes nothing; and the AI key and the LDAP bind password cannot be read
// by anyone: not in any answer, not through the resource routes or the Kubernetes API proxy.
import t, { type Test } from 'tap';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { startOidcProvider } from './helpers/oidc-provider.js';
import { oidcSignIn, signInError } from './helpers/oidc-sign-in.js';

const GENERAL = '/api/v1/admin/general-setting';
const LDAP = '/api/v1/admin/ldap-setting';
const SIDEBAR = '/api/v1/admin/sidebar_preference/global';
const AI_KEY = 'sk-test-ai-key-0123456789';
const BIND_PASSWORD = 'bind-password-never-shown';

const gw = await startGateway(t, { logName: 'kite-settings', env: { KITELINE_AUDIT_FLUSH_INTERVAL_MS: '200' } });
const ns = gw.namespace;
const admin = await bootstrapAdmin(gw);
const viewer = await apiKeyWithRoles(gw, admin, 'settings-viewer', ['viewer']);
const TEAM_ROLE = 'team-a-editor';
await createRole(gw, admin, {
  name: TEAM_ROLE,
  clusters: ['*'],
  namespaces: ['team-a'],
  resources: ['*'],
  verbs: ['*'],
});
const teamMember = await apiKeyWithRoles(gw, admin, 'settings-team', [TEAM_ROLE]);
const anonymous: Caller = { key: '', headers: {} };

/** Signs in with a password and returns the session's headers. */
async function session(username: string, password: string): Promise<Record<string, string>> {
  const login = await call(gw.url, 'POST', '/api/auth/login/password', { body: { username, password } });
  if (login.status !== 204) throw new Error(`login ${username}: ${login.status} ${login.text}`);
  return { cookie: (login.headers.get('set-cookie') ?? '').split(';')[0] };
}

/** A password user holding `role`, signed in. */
async function userWithRole(username: string, role: string): Promise<Record<string, string>> {
  const password = `${username}-password-1`;
  const created = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers: admin.headers,
    body: { username, password },
  });
  if (created.status !== 201) throw new Error(`create ${username}: ${created.text}`);
  const roles = (await call(gw.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers })).body.roles as {
    id: number;
    name: string;
  }[];
  const id = roles.find((r) => r.name === role)!.id;
  const assigned = await call(gw.url, 'POST', `/api/v1/admin/roles/${id}/assign`, {
    headers: admin.headers,
    body: { subjectType: 'user', subject: username },
  });
  if (assigned.status !== 201) throw new Error(`assign ${role}: ${assigned.text}`);
  return eventually(`${username} to sign in`, () => session(username, password).catch(() => undefined), 10_000, 100);
}

/** The settings objects and their Secrets in the install namespace, as the host has them. */
function hostState(): string {
  const res = kubectl(gw.kubeconfig, [
    '-n',
    ns,
    'get',
    'generalsettings.kiteline.io,ldapsettings.kiteline.io,secrets',
    '-o',
    'jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion} {end}',
  ]);
  if (res.status !== 0) throw new Error(res.stderr);
  return res.stdout;
}

/** Waits for the audit record of a settings write (the trail is flushed every 200 ms here). */
async function audited(resourceType: string, operationType: string) {
  return eventually(
    `an audit record ${operationType} ${resourceType}`,
    async () => {
      const res = await call(gw.url, 'GET', `/api/v1/admin/audit-logs?resourceType=${resourceType}&size=100`, {
        headers: admin.headers,
      });
      return (res.body?.data as Array<{ operationType: string; success: boolean }> | undefined)?.find(
        (r) => r.operationType === operationType && r.success,
      );
    },
    30_000,
    100,
  );
}

/** Every non-admin caller gets 403 (anonymous 401) for each route, and nothing changes. */
async function onlyAdmins(t: Test, routes: [string, string, unknown?][]) {
  const before = hostState();
  for (const [method, path, body] of routes) {
    for (const [who, caller, status] of [
      ['viewer', viewer, 403],
      ['namespace-limited role', teamMember, 403],
      ['anonymous', anonymous, 401],
    ] as const) {
      const res = await call(gw.url, method, path, {
        headers: caller.headers,
        ...(body !== undefined ? { body } : {}),
      });
      t.equal(res.status, status, `${who}: ${method} ${path}`);
      t.type(res.body?.error, 'string', `${who}: ${method} ${path}: a JSON {error}`);
    }
  }
  t.equal(hostState(), before, 'nothing changed');
}

t.test('an unknown path under /api/v1/admin/ is a JSON 404, never the resource routes', async (t) => {
  for (const [method, path] of [
    ['GET', '/api/v1/admin/no-such-setting/'],
    ['GET', '/api/v1/admin/no-such-setting'],
    ['GET', '/api/v1/admin/nope/x'],
    ['GET', '/api/v1/admin/nope/x/y'],
    ['PUT', '/api/v1/admin/nope/x/y'],
    ['DELETE', '/api/v1/admin/nope/x/y'],
    ['GET', '/api/v1/admin'],
  ] as const) {
    for (const [who, caller] of [
      ['admin', admin],
      ['anonymous', anonymous],
    ] as const) {
      const res = await call(gw.url, method, path, {
        headers: caller.headers,
        ...(method === 'PUT' ? { body: {} } : {}),
      });
      t.equal(res.status, 404, `${who}: ${method} ${path}: ${res.text}`);
      t.match(res.body, { error: /route not found/, reason: 'NotFound', code: 404 }, `${who}: ${method} ${path}`);
    }
  }
});

t.test('general settings: defaults, role by role, the AI key write-only, bad input changes nothing', async (t) => {
  for (const url of [GENERAL, `${GENERAL}/`]) {
    const res = await call(gw.url, 'GET', url, { headers: admin.headers });
    t.equal(res.status, 200, `${url}: ${res.text}`);
    t.same(res.body, {
      aiAgentEnabled: false,
      aiProvider: 'openai',
      aiModel: 'gpt-4o-mini',
      aiApiKey: '',
      aiApiKeyConfigured: false,
      aiBaseUrl: '',
      aiMaxTokens: 4096,
      kubectlEnabled: false,
      kubectlImage: 'zzde/kubectl:latest',
      nodeTerminalImage: 'busybox:latest',
      enableAnalytics: false,
      enableVersionCheck: false,
      passwordLoginDisabled: false,
      requireMFA: false,
    });
  }
  t.equal(
    kubectl(gw.kubeconfig, ['-n', ns, 'get', 'generalsettings.kiteline.io', 'general']).status,
    1,
    'no object yet',
  );
  await onlyAdmins(t, [
    ['GET', `${GENERAL}/`],
    ['GET', GENERAL],
    ['PUT', `${GENERAL}/`, { kubectlEnabled: true }],
    ['PUT', GENERAL, { aiAgentEnabled: true, aiApiKey: 'sk-stolen' }],
  ]);
  t.same(
    (await call(gw.url, 'GET', '/api/v1/ai/status', { headers: viewer.headers })).body,
    { enabled: false },
    'AI off',
  );

  // ---- bad input: 400, nothing written ----
  const before = hostState();
  for (const [what, body, message] of [
    ['the AI without a key', { aiAgentEnabled: true }, /aiApiKey is required/],
    ['an unknown provider', { aiProvider: 'mistral' }, /aiProvider must be one of openai, anthropic/],
    ['kubectl without an image', { kubectlEnabled: true, kubectlImage: '' }, /kubectlImage is required/],
    ['an image with a space', { kubectlImage: 'evil image' }, /image reference/],
    ['an http base URL elsewhere', { aiBaseUrl: 'http://api.example.com' }, /https/],
    ['a negative token count', { aiMaxTokens: -1 }, /aiMaxTokens/],
    ['an unknown member', { aiApiKeyPlain: 'x' }, /additional/],
    ['password login off with nothing else', { passwordLoginDisabled: true }, /nothing else signs anyone in/],
  ] as const) {
    const res = await call(gw.url, 'PUT', `${GENERAL}/`, { headers: admin.headers, body });
    t.equal(res.status, 400, `${what}: 400`);
    t.match(res.body?.error, message, `${what}: ${res.body?.error}`);
  }
  t.equal(hostState(), before, 'nothing was written');

  // ---- Settings → General saves (the UI's body, a key typed in) ----
  const generalTab = {
    aiAgentEnabled: true,
    aiProvider: 'anthropic',
    aiModel: '',
    aiBaseUrl: '',
    aiMaxTokens: 0,
    kubectlEnabled: true,
    kubectlImage: 'zzde/kubectl:latest',
    nodeTerminalImage: 'busybox:1.36',
    enableAnalytics: false,
    enableVersionCheck: true,
    aiApiKey: AI_KEY,
  };
  const saved = await call(gw.url, 'PUT', GENERAL, { headers: admin.headers, body: generalTab });
  t.equal(saved.status, 200, saved.text);
  t.match(saved.body, {
    aiAgentEnabled: true,
    aiProvider: 'anthropic',
    aiModel: 'claude-sonnet-4-5',
    aiApiKey: '',
    aiApiKeyConfigured: true,
    aiMaxTokens: 4096,
    kubectlEnabled: true,
    nodeTerminalImage: 'busybox:1.36',
    enableVersionCheck: true,
  });
  t.notMatch(saved.text, AI_KEY, 'the key is not in the answer');
  const object = kubectl(gw.kubeconfig, ['-n', ns, 'get', 'generalsettings.kiteline.io', 'general', '-o', 'json']);
  t.equal(object.status, 0, 'the GeneralSetting exists');
  t.notMatch(object.stdout, AI_KEY, 'the key is not in the object');
  t.match(JSON.parse(object.stdout).spec, {
    aiApiKeySecretRef: { name: 'kiteline-general-setting' },
    kubectlEnabled: true,
  });
  const secret = JSON.parse(
    kubectl(gw.kubeconfig, ['-n', ns, 'get', 'secret', 'kiteline-general-setting', '-o', 'json']).stdout,
  );
  t.equal(Buffer.from(secret.data.aiApiKey, 'base64').toString(), AI_KEY, 'but in its Secret');
  t.equal(secret.metadata.ownerReferences[0].kind, 'GeneralSetting', 'owned by the GeneralSetting');
  await audited('generalsettings', 'update');

  // ---- the AI status: every signed-in user, never the key ----
  for (const [who, caller] of [
    ['viewer', viewer],
    ['namespace-limited role', teamMember],
    ['admin', admin],
  ] as const) {
    const status = await call(gw.url, 'GET', '/api/v1/ai/status', { headers: caller.headers });
    t.same(status.body, { enabled: true, provider: 'anthropic', model: 'claude-sonnet-4-5' }, who);
    t.notMatch(status.text, AI_KEY);
  }
  t.equal((await call(gw.url, 'GET', '/api/v1/ai/status')).status, 401, 'anonymous: 401');

  // ---- Settings → Authentication sends the whole object it read back ----
  const read = (await call(gw.url, 'GET', `${GENERAL}/`, { headers: admin.headers })).body;
  const authTab = await call(gw.url, 'PUT', `${GENERAL}/`, { headers: admin.headers, body: { ...read } });
  t.equal(authTab.status, 200, authTab.text);
  t.same(authTab.body, read, 'nothing changed, the key kept');

  // ---- the stored key goes nowhere new without being given again ----
  const beforeMove = hostState();
  const moved = await call(gw.url, 'PUT', GENERAL, {
    headers: admin.headers,
    body: { aiBaseUrl: 'https://attacker.example.com/v1' },
  });
  t.equal(moved.status, 400);
  t.match(moved.body.error, /give aiApiKey again/);
  t.equal(hostState(), beforeMove, 'nothing changed');
  const withKey = await call(gw.url, 'PUT', GENERAL, {
    headers: admin.headers,
    body: { aiBaseUrl: 'https://llm.example.com/v1', aiApiKey: `${AI_KEY}-2` },
  });
  t.equal(withKey.status, 200, withKey.text);
  t.equal(withKey.body.aiBaseUrl, 'https://llm.example.com/v1');

  // ---- kubectl changes it too: every replica's next answer ----
  const patched = kubectl(gw.kubeconfig, [
    '-n',
    ns,
    'patch',
    'generalsettings.kiteline.io',
    'general',
    '--type=merge',
    '-p',
    '{"spec":{"aiAgentEnabled":false}}',
  ]);
  t.equal(patched.status, 0, patched.stderr);
  await eventually(
    'the AI status to follow kubectl',
    async () => (await call(gw.url, 'GET', '/api/v1/ai/status', { headers: viewer.headers })).body?.enabled === false,
  );
  const misnamed = kubectl(
    gw.kubeconfig,
    ['-n', ns, 'apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'kiteline.io/v1alpha1', kind: 'GeneralSetting', metadata: { name: 'second' } }),
  );
  t.not(misnamed.status, 0, 'a second GeneralSetting is refused by the API server');
  t.match(misnamed.stderr, /named general/);
});

t.test('password login switched off: 403, the login page knows, an OAuth provider signs in', async (t) => {
  const op = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => op.close());
  const provider = await call(gw.url, 'POST', '/api/v1/admin/oauth-providers/', {
    headers: admin.headers,
    body: { name: 'corp', clientId: op.clientId, clientSecret: op.clientSecret, issuer: op.issuer },
  });
  t.equal(provider.status, 201, provider.text);
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['corp', 'password'],
    credentialProviders: ['password'],
    oauthProviders: ['corp'],
  });
  const off = await call(gw.url, 'PUT', `${GENERAL}/`, {
    headers: admin.headers,
    body: { passwordLoginDisabled: true },
  });
  t.equal(off.status, 200, off.text);
  t.equal(off.body.passwordLoginDisabled, true);
  t.same((await call(gw.url, 'GET', '/api/auth/providers')).body, {
    providers: ['corp'],
    credentialProviders: [],
    oauthProviders: ['corp'],
  });
  const login = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'admin', password: 'correct-horse-battery' },
  });
  t.equal(login.status, 403, 'the right password, still refused');
  t.match(login.body, { error: 'password login is disabled' });
  const unknown = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'nobody', password: 'whatever-password' },
  });
  t.same(unknown.body, login.body, 'the same answer for anyone: no user is told apart');
  await audited('generalsettings', 'update');

  const on = await call(gw.url, 'PUT', `${GENERAL}/`, {
    headers: admin.headers,
    body: { passwordLoginDisabled: false },
  });
  t.equal(on.status, 200, 'an API key still administers');
  t.equal((await session('admin', 'correct-horse-battery')).cookie.startsWith('auth_token='), true, 'back on');
});

t.test("OAuth providers' allowedGroups: stored, and only their members sign in", async (t) => {
  const op = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => op.close());
  op.accounts.set('olga-sub', { preferred_username: 'olga', groups: ['ops', 'staff'] });
  op.accounts.set('otto-sub', { preferred_username: 'otto', groups: ['staff'] });
  const created = await call(gw.url, 'POST', '/api/v1/admin/oauth-providers/', {
    headers: admin.headers,
    body: {
      name: 'gated',
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      issuer: op.issuer,
      scopes: 'openid,profile,groups',
      allowedGroups: ' ops , platform ',
    },
  });
  t.equal(created.status, 201, created.text);
  t.equal(created.body.provider.allowedGroups, 'ops,platform', 'stored as Kite does, each name trimmed');
  const id = created.body.provider.id as number;
  const roles = (await call(gw.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers })).body.roles;
  const viewerRole = roles.find((r: { name: string }) => r.name === 'viewer').id;
  t.equal(
    (
      await call(gw.url, 'POST', `/api/v1/admin/roles/${viewerRole}/assign`, {
        headers: admin.headers,
        body: { subjectType: 'group', subject: 'oidc:gated/staff' },
      })
    ).status,
    201,
  );

  const refused = await oidcSignIn(gw, 'otto-sub', 'gated');
  t.equal(signInError(refused), 'insufficient_permissions', 'otto is in none of the allowed groups');
  t.equal(new URL(refused.location, 'http://x').searchParams.get('reason'), 'not_in_allowed_groups', "Kite's reason");
  t.notOk(refused.cookie, 'no session');
  const users = (await call(gw.url, 'GET', '/api/v1/admin/users/?size=100', { headers: admin.headers })).body.users;
  t.notOk(
    users.some((u: { username: string }) => u.username === 'otto'),
    'and no user was made',
  );
  const allowed = await oidcSignIn(gw, 'olga-sub', 'gated');
  t.equal(signInError(allowed), null, `olga is in ops: ${allowed.location}`);
  t.ok(allowed.cookie, 'signed in');

  // Kite's UI sends only the members it has: "" is how an API client lets everyone in again.
  const cleared = await call(gw.url, 'PUT', `/api/v1/admin/oauth-providers/${id}`, {
    headers: admin.headers,
    body: { allowedGroups: '' },
  });
  t.equal(cleared.body.provider.allowedGroups, '');
  t.equal(signInError(await oidcSignIn(gw, 'otto-sub', 'gated')), null, 'anyone (with a role) signs in again');
  const bad = await call(gw.url, 'PUT', `/api/v1/admin/oauth-providers/${id}`, {
    headers: admin.headers,
    body: { allowedGroups: 'ops\nadmins' },
  });
  t.equal(bad.status, 400, 'a line break: 400');
});

t.test('the global sidebar: admins set and remove it, everyone else gets it', async (t) => {
  const layout = JSON.stringify({ version: 1, groups: [], hiddenItems: ['pods'], pinnedItems: [], groupOrder: [] });
  await onlyAdmins(t, [
    ['POST', SIDEBAR, { sidebar_preference: layout }],
    ['DELETE', SIDEBAR],
  ]);
  const vera = await userWithRole('vera', 'viewer');
  const own = JSON.stringify({ version: 1, groups: [], hiddenItems: [], pinnedItems: ['nodes'], groupOrder: [] });
  t.equal(
    (await call(gw.url, 'POST', '/api/users/sidebar_preference', { headers: vera, body: { sidebar_preference: own } }))
      .status,
    200,
    'vera keeps her own while there is no global sidebar',
  );
  const adminSession = await session('admin', 'correct-horse-battery');
  t.match((await call(gw.url, 'GET', '/api/auth/user', { headers: vera })).body, {
    user: { sidebar_preference: own },
    hasGlobalSidebarPreference: false,
    globalSidebarPreference: '',
  });

  const before = hostState();
  for (const [what, body] of [
    ['empty', { sidebar_preference: '' }],
    ['not JSON', { sidebar_preference: '{oops' }],
    ['not an object', { sidebar_preference: '[1,2]' }],
    ['too large', { sidebar_preference: JSON.stringify({ x: 'y'.repeat(17 * 1024) }) }],
    ['no body member', {}],
  ] as const) {
    const res = await call(gw.url, 'POST', SIDEBAR, { headers: admin.headers, body });
    t.equal(res.status, 400, `${what}: 400 (${res.text})`);
  }
  t.equal(hostState(), before, 'nothing was written');

  const set = await call(gw.url, 'POST', SIDEBAR, { headers: adminSession, body: { sidebar_preference: layout } });
  t.same(set.body, { success: true });
  await audited('sidebar_preferences/global', 'update');
  t.match((await call(gw.url, 'GET', '/api/auth/user', { headers: vera })).body, {
    user: { sidebar_preference: layout },
    hasGlobalSidebarPreference: true,
    globalSidebarPreference: layout,
  });
  t.match(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: viewer.headers })).body,
    { user: { provider: 'api_key', sidebar_preference: layout }, hasGlobalSidebarPreference: true },
    'an API key caller too',
  );
  t.match(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession })).body.user,
    { sidebar_preference: layout },
    'an admin without a layout of their own gets it',
  );
  const adminOwn = JSON.stringify({ version: 1, groups: [], hiddenItems: [], pinnedItems: [], groupOrder: ['x'] });
  const saved = await call(gw.url, 'POST', '/api/users/sidebar_preference', {
    headers: adminSession,
    body: { sidebar_preference: adminOwn },
  });
  t.equal(saved.status, 200, 'an admin still saves their own');
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession })).body.user.sidebar_preference,
    adminOwn,
    'and keeps it',
  );
  const refused = await call(gw.url, 'POST', '/api/users/sidebar_preference', {
    headers: vera,
    body: { sidebar_preference: own },
  });
  t.equal(refused.status, 403, "Kite's rule: others no longer save their own");
  t.match(refused.body.error, /disabled by global sidebar/);

  // Kite's UI deletes it with Content-Type application/json and no body.
  const removed = await call(gw.url, 'DELETE', SIDEBAR, {
    headers: { ...adminSession, 'content-type': 'application/json' },
    raw: '',
  });
  t.equal(removed.status, 200, removed.text);
  t.same(removed.body, { success: true });
  await audited('sidebar_preferences/global', 'delete');
  t.match((await call(gw.url, 'GET', '/api/auth/user', { headers: vera })).body, {
    user: { sidebar_preference: own },
    hasGlobalSidebarPreference: false,
    globalSidebarPreference: '',
  });
});

t.test('LDAP settings: role by role; the bind password is never shown', async (t) => {
  await onlyAdmins(t, [
    ['GET', LDAP],
    ['GET', `${LDAP}/`],
    ['PUT', `${LDAP}/`, { enabled: false, bindPassword: 'stolen' }],
  ]);
  const res = await call(gw.url, 'GET', `${LDAP}/`, { headers: admin.headers });
  t.equal(res.status, 200, res.text);
  t.same(res.body, {
    enabled: false,
    serverUrl: '',
    useStartTLS: false,
    caCert: '',
    bindDn: '',
    bindPassword: '',
    bindPasswordConfigured: false,
    userBaseDn: '',
    userFilter: '(uid={username})',
    usernameAttribute: 'uid',
    displayNameAttribute: 'cn',
    groupBaseDn: '',
    groupFilter: '(member={dn})',
    groupNameAttribute: 'cn',
    source: 'none',
    problem: '',
  });
  // Settings → Authentication saves its form unchanged: nothing to store.
  const unchanged = await call(gw.url, 'PUT', LDAP, { headers: admin.headers, body: res.body });
  t.equal(unchanged.status, 200, unchanged.text);
  t.equal(kubectl(gw.kubeconfig, ['-n', ns, 'get', 'ldapsettings.kiteline.io', 'ldap']).status, 1, 'no object');
  const stored = await call(gw.url, 'PUT', LDAP, {
    headers: admin.headers,
    body: { enabled: false, serverUrl: 'ldaps://ldap.example.com', bindDn: 'cn=svc', bindPassword: BIND_PASSWORD },
  });
  t.equal(stored.status, 200, stored.text);
  t.match(stored.body, { bindPassword: '', bindPasswordConfigured: true, source: 'setting', enabled: false });
  t.notMatch(stored.text, BIND_PASSWORD);
  const object = kubectl(gw.kubeconfig, ['-n', ns, 'get', 'ldapsettings.kiteline.io', 'ldap', '-o', 'json']);
  t.notMatch(object.stdout, BIND_PASSWORD, 'not in the object');
  await audited('ldapsettings', 'update');
});

t.test('the secrets are out of reach of the resource routes and the Kubernetes API proxy', async (t) => {
  // kiteline's host registered as a cluster of its own: its install namespace is guarded.
  const self = uniqueName('self');
  await addReadyCluster(gw, admin, { name: self, config: testKubeconfig('host'), isDefault: true });
  for (const [who, caller] of [
    ['admin', admin],
    ['viewer', viewer],
    ['namespace-limited role', teamMember],
  ] as const) {
    for (const path of [
      `/api/v1/generalsettings.kiteline.io/${ns}/general`,
      `/api/v1/ldapsettings.kiteline.io/${ns}/ldap`,
      `/api/v1/generalsettings.kiteline.io`,
      `/api/v1/secrets/${ns}/kiteline-general-setting`,
      `/api/v1/secrets/${ns}/kiteline-ldap-setting`,
      `/k8s/clusters/${self}/apis/kiteline.io/v1alpha1/namespaces/${ns}/generalsettings/general`,
      `/k8s/clusters/${self}/apis/kiteline.io/v1alpha1/namespaces/${ns}/ldapsettings/ldap`,
      `/k8s/clusters/${self}/api/v1/namespaces/${ns}/secrets/kiteline-general-setting`,
      `/k8s/clusters/${self}/api/v1/namespaces/${ns}/secrets/kiteline-ldap-setting`,
    ]) {
      const res = await call(gw.url, 'GET', path, { headers: { ...caller.headers, 'x-cluster-name': self } });
      t.equal(res.status, 403, `${who}: GET ${path}`);
      t.notMatch(res.text, AI_KEY);
      t.notMatch(res.text, BIND_PASSWORD);
    }
  }
  for (const path of [`${GENERAL}/`, `${LDAP}/`, '/api/v1/ai/status', '/api/auth/user', '/api/auth/providers']) {
    const res = await call(gw.url, 'GET', path, { headers: admin.headers });
    t.notMatch(res.text, AI_KEY, `${path}: not the AI key`);
    t.notMatch(res.text, BIND_PASSWORD, `${path}: not the bind password`);
  }
});

t.test('init_check: step 0 while no user exists, whatever clusters there are', async (t) => {
  const fresh: TestGateway = await startGateway(t, { logName: 'kite-settings-init' });
  const applied = kubectl(
    fresh.kubeconfig,
    ['-n', fresh.namespace, 'apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'kiteline.io/v1alpha1',
      kind: 'Cluster',
      metadata: { name: 'early' },
      spec: { name: 'early', kubeconfigSecretRef: { name: 'early-kubeconfig' } },
    }),
  );
  t.equal(applied.status, 0, applied.stderr);
  await eventually('the cluster to be seen', () => fresh.services.clusterStore.any());
  t.same(
    (await call(fresh.url, 'GET', '/api/v1/init_check')).body,
    { initialized: false, step: 0 },
    "Kite's UI offers the super user first",
  );
  await bootstrapAdmin(fresh);
  t.same((await call(fresh.url, 'GET', '/api/v1/init_check')).body, { initialized: true, step: 2 });
});
