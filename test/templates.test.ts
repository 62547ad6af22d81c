// Resource templates and the sidebar preference, against the shared host cluster. Templates:
// create, list, read, update, delete through the admin and read routes, stored as Template custom
// resources in the install namespace; a viewer reads but cannot write (403), anonymous 401; bad
// input (missing or broken YAML, a bad name, a name change, unknown members, oversize) 400; a taken
// name 409; unknown ids 404; writes audited. Sidebar preference: the signed-in user's own, saved
// and read back through GET /api/auth/user, never another user's; bad or oversize input 400; an
// API key 400; anonymous 401; audited.
import t from 'tap';
import type { TemplateView } from '../src/host/templates.js';
import { kubectl } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { apiKeyWithRoles, bootstrapAdmin, type Caller } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const gw = await startGateway(t, { logName: 'templates', env: { KITELINE_AUDIT_FLUSH_INTERVAL_MS: '200' } });
const admin = await bootstrapAdmin(gw);
let viewer: Caller;

const READ = '/api/v1/templates';
const ADMIN = '/api/v1/admin/templates';
const POD_YAML =
  'apiVersion: v1\nkind: Pod\nmetadata:\n  name: example\nspec:\n  containers:\n    - name: c\n      image: busybox\n';

type Template = TemplateView;

/** Waits for the audit record of a write (the trail is flushed every 200 ms here). */
async function audited(resourceType: string, operationType: string, resourceName = '') {
  return eventually(
    `an audit record ${operationType} ${resourceType}`,
    async () => {
      const res = await call(gw.url, 'GET', `/api/v1/admin/audit-logs?resourceType=${resourceType}&size=100`, {
        headers: admin.headers,
      });
      return (
        res.body?.data as Array<{ operationType: string; resourceName: string; success: boolean }> | undefined
      )?.find((r) => r.operationType === operationType && r.resourceName === resourceName);
    },
    30_000,
    100,
  );
}

/** Signs in with a password and returns the session cookie. */
async function session(username: string, password: string): Promise<Record<string, string>> {
  const login = await call(gw.url, 'POST', '/api/auth/login/password', { body: { username, password } });
  if (login.status !== 204) throw new Error(`login ${username}: ${login.status} ${login.text}`);
  return { cookie: (login.headers.get('set-cookie') ?? '').split(';')[0] };
}

t.test('templates: create, list, read, update, delete', async (t) => {
  viewer = await apiKeyWithRoles(gw, admin, 'templates-viewer', ['viewer']);
  const empty = await call<Template[]>(gw.url, 'GET', `${READ}/`, { headers: viewer.headers });
  t.equal(empty.status, 200, empty.text);
  t.same(empty.body, [], 'none at first');

  const created = await call<Template>(gw.url, 'POST', `${ADMIN}/`, {
    headers: admin.headers,
    body: { name: 'Pod', description: 'A basic Pod', yaml: POD_YAML },
  });
  t.equal(created.status, 201, created.text);
  t.match(created.body, {
    name: 'Pod',
    description: 'A basic Pod',
    yaml: POD_YAML,
    createdAt: /^\d{4}-\d\d-\d\dT/,
    updatedAt: /^\d{4}-\d\d-\d\dT/,
  });
  t.ok(Number.isInteger(created.body.id) && created.body.id > 0, 'an integer id');
  t.equal(created.body.ID, created.body.id, 'also as ID, where Kite’s UI reads it');
  const second = await call<Template>(gw.url, 'POST', ADMIN, {
    headers: admin.headers,
    body: { name: 'Config Map', yaml: 'kind: ConfigMap' },
  });
  t.equal(second.status, 201, `without the trailing slash too: ${second.text}`);
  t.ok(second.body.id > created.body.id, 'ids grow');
  t.equal(second.body.description, '');

  const stored = JSON.parse(
    kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'templates.kiteline.io', '-o', 'json']).stdout,
  );
  t.same(
    stored.items.map((i: { spec: { name: string } }) => i.spec.name).sort(),
    ['Config Map', 'Pod'],
    'Template custom resources in the install namespace',
  );

  const listed = await call<Template[]>(gw.url, 'GET', READ, { headers: viewer.headers });
  t.same(
    listed.body.map((x) => [x.id, x.name]),
    [
      [created.body.id, 'Pod'],
      [second.body.id, 'Config Map'],
    ],
    'a viewer lists them, by id',
  );
  const one = await call<Template>(gw.url, 'GET', `${READ}/${created.body.id}`, { headers: viewer.headers });
  t.same(one.body, created.body, 'and reads one');

  const updated = await call<Template>(gw.url, 'PUT', `${ADMIN}/${created.body.id}`, {
    headers: admin.headers,
    body: { name: 'Pod', description: 'changed', yaml: 'kind: Pod\n' },
  });
  t.equal(updated.status, 200, updated.text);
  t.match(updated.body, { id: created.body.id, name: 'Pod', description: 'changed', yaml: 'kind: Pod\n' });
  t.same(
    (await call<Template>(gw.url, 'GET', `${READ}/${created.body.id}`, { headers: admin.headers })).body.description,
    'changed',
    'the change is stored',
  );
  const yamlOnly = await call<Template>(gw.url, 'PUT', `${ADMIN}/${created.body.id}`, {
    headers: admin.headers,
    body: { yaml: POD_YAML },
  });
  t.match(yamlOnly.body, { description: 'changed', yaml: POD_YAML }, 'an absent member is left as it is');

  const deleted = await call(gw.url, 'DELETE', `${ADMIN}/${second.body.id}`, { headers: admin.headers });
  t.equal(deleted.status, 200, deleted.text);
  t.same(deleted.body, { message: 'template deleted' });
  t.equal((await call(gw.url, 'GET', `${READ}/${second.body.id}`, { headers: admin.headers })).status, 404, 'gone');
  t.equal(
    (await call(gw.url, 'DELETE', `${ADMIN}/${second.body.id}`, { headers: admin.headers })).status,
    404,
    'deleting it again: 404',
  );
  t.same(
    (await call<Template[]>(gw.url, 'GET', READ, { headers: admin.headers })).body.map((x) => x.name),
    ['Pod'],
  );

  const created2 = await audited('templates', 'create', 'Pod');
  t.equal(created2.success, true, 'the create is audited');
  t.ok(await audited('templates', 'update'), 'the update is audited');
  t.ok(await audited('templates', 'delete'), 'the delete is audited');
});

t.test('templates: who may write, and bad input', async (t) => {
  const id = (await call<Template[]>(gw.url, 'GET', READ, { headers: admin.headers })).body[0].id;
  t.equal(
    (await call(gw.url, 'POST', `${ADMIN}/`, { headers: viewer.headers, body: { name: 'Mine', yaml: POD_YAML } }))
      .status,
    403,
    'a viewer cannot create',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${ADMIN}/${id}`, { headers: viewer.headers, body: { description: 'x' } })).status,
    403,
    'nor update',
  );
  t.equal((await call(gw.url, 'DELETE', `${ADMIN}/${id}`, { headers: viewer.headers })).status, 403, 'nor delete');
  t.equal((await call(gw.url, 'GET', READ)).status, 401, 'anonymous: 401');
  t.equal((await call(gw.url, 'POST', `${ADMIN}/`, { body: { name: 'Anon', yaml: POD_YAML } })).status, 401);

  const duplicate = await call(gw.url, 'POST', `${ADMIN}/`, {
    headers: admin.headers,
    body: { name: 'Pod', yaml: POD_YAML },
  });
  t.equal(duplicate.status, 409, `a taken name: ${duplicate.text}`);
  t.equal(duplicate.body.reason, 'AlreadyExists');
  for (const [what, body] of [
    ['no yaml', { name: 'X' }],
    ['no name', { yaml: POD_YAML }],
    ['broken YAML', { name: 'X', yaml: 'a: [1, 2' }],
    ['only spaces as YAML', { name: 'X', yaml: '   \n' }],
    ['a name with a leading space', { name: ' X', yaml: POD_YAML }],
    ['a name with a control character', { name: 'X\u0007', yaml: POD_YAML }],
    ['an unknown member', { name: 'X', yaml: POD_YAML, owner: 'me' }],
    ['YAML over 512 KiB', { name: 'X', yaml: `a: "${'x'.repeat(512 * 1024)}"` }],
  ] as const) {
    const res = await call(gw.url, 'POST', `${ADMIN}/`, { headers: admin.headers, body });
    t.equal(res.status, 400, `${what}: ${res.text.slice(0, 200)}`);
  }
  const rename = await call(gw.url, 'PUT', `${ADMIN}/${id}`, {
    headers: admin.headers,
    body: { name: 'Other', yaml: POD_YAML },
  });
  t.equal(rename.status, 400, `the name cannot change: ${rename.text}`);
  t.equal(
    (await call(gw.url, 'PUT', `${ADMIN}/${id}`, { headers: admin.headers, body: { yaml: 'a: [' } })).status,
    400,
    'broken YAML in an update',
  );
  t.equal(
    (await call(gw.url, 'PUT', `${ADMIN}/99999`, { headers: admin.headers, body: { yaml: POD_YAML } })).status,
    404,
    'an unknown id: 404',
  );
  t.equal((await call(gw.url, 'GET', `${READ}/abc`, { headers: admin.headers })).status, 400, 'a bad id: 400');
  t.same(
    (await call<Template[]>(gw.url, 'GET', READ, { headers: admin.headers })).body.map((x) => x.name),
    ['Pod'],
    'nothing bad was stored',
  );
});

t.test('sidebar preference: saved on the signed-in user, read back, bounded', async (t) => {
  const adminSession = await session('admin', 'correct-horse-battery');
  const other = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers: admin.headers,
    body: { username: 'other', password: 'other-password-1' },
  });
  t.equal(other.status, 201, other.text);
  const otherSession = await eventually(
    'the new user signs in',
    () => session('other', 'other-password-1').catch(() => undefined),
    30_000,
    100,
  );

  const before = await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession });
  t.equal(before.body.user.sidebar_preference, '', 'none saved yet');
  const preference = JSON.stringify({
    version: 3,
    groups: [{ id: 'workloads', visible: true }],
    pinned: ['pods'],
    lastUpdated: 1,
  });
  const saved = await call(gw.url, 'POST', '/api/users/sidebar_preference', {
    headers: adminSession,
    body: { sidebar_preference: preference },
  });
  t.equal(saved.status, 200, saved.text);
  t.same(saved.body, { success: true });
  const after = await eventually(
    'the preference in the user cache',
    async () => {
      const res = await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession });
      return res.body.user.sidebar_preference === preference ? res : undefined;
    },
    30_000,
    100,
  );
  t.equal(after.body.user.sidebar_preference, preference, 'GET /api/auth/user answers it back');
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: otherSession })).body.user.sidebar_preference,
    '',
    "another user's is untouched",
  );

  const otherPreference = JSON.stringify({ version: 3, groups: [] });
  t.equal(
    (
      await call(gw.url, 'POST', '/api/users/sidebar_preference', {
        headers: otherSession,
        body: { sidebar_preference: otherPreference },
      })
    ).status,
    200,
  );
  await eventually(
    "the other user's preference",
    async () =>
      (await call(gw.url, 'GET', '/api/auth/user', { headers: otherSession })).body.user.sidebar_preference ===
      otherPreference,
    30_000,
    100,
  );
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession })).body.user.sidebar_preference,
    preference,
    'each user saves only their own',
  );

  for (const [what, body] of [
    ['over 16 KiB', { sidebar_preference: JSON.stringify({ padding: 'x'.repeat(16 * 1024) }) }],
    ['over 16 KiB of UTF-8 in fewer characters', { sidebar_preference: JSON.stringify({ padding: 'é'.repeat(9000) }) }],
    ['not JSON', { sidebar_preference: '{not json' }],
    ['JSON but not an object', { sidebar_preference: '[1,2]' }],
    ['not a string', { sidebar_preference: { version: 1 } }],
    ['missing', {}],
  ] as const) {
    const res = await call(gw.url, 'POST', '/api/users/sidebar_preference', { headers: adminSession, body });
    t.equal(res.status, 400, `${what}: ${res.text.slice(0, 200)}`);
  }
  t.equal(
    (await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession })).body.user.sidebar_preference,
    preference,
    'a refused save changes nothing',
  );
  t.equal(
    (
      await call(gw.url, 'POST', '/api/users/sidebar_preference', {
        headers: admin.headers,
        body: { sidebar_preference: preference },
      })
    ).status,
    400,
    'an API key has no user to keep it on',
  );
  t.equal(
    (await call(gw.url, 'POST', '/api/users/sidebar_preference', { body: { sidebar_preference: preference } })).status,
    401,
    'anonymous: 401',
  );

  t.equal(
    (
      await call(gw.url, 'POST', '/api/users/sidebar_preference', {
        headers: adminSession,
        body: { sidebar_preference: '' },
      })
    ).status,
    200,
    '"" forgets it',
  );
  await eventually(
    'the preference forgotten',
    async () =>
      (await call(gw.url, 'GET', '/api/auth/user', { headers: adminSession })).body.user.sidebar_preference === '',
    30_000,
    100,
  );
  t.ok(await audited('sidebar_preferences', 'update'), 'saves are audited');
});
