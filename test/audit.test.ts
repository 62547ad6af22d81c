// The audit log against a real gateway and target cluster (issue 6 point 3, CONTRACT section 8):
// every write, admin or resource, successful or not, is exactly one 'audit' line with who, when,
// cluster, verb, resource, namespace, name, result and request id; the log holds no Secret value,
// password, kubeconfig token or last-applied annotation. Optionally admin writes become Events.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { kubectl, TEST_DIR, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { apiKeyWithRoles, bootstrapAdmin, testKubeconfig, waitClusterReady } from './helpers/fixtures.js';
import { call, startGateway, type RequestOptions } from './helpers/gateway.js';
import { AUDIT_ROUTES, auditField, auditKey } from '../src/gateway/audit-table.js';

const logName = uniqueName('audit');
const gw = await startGateway(t, { logName });
const logFile = join(TEST_DIR, 'logs', `${logName}.log`);
const admin = await bootstrapAdmin(gw);
const viewer = await apiKeyWithRoles(gw, admin, 'audit-viewer', ['viewer']);

const targetConfig = testKubeconfig('target-a');
const kubeconfigToken = /token: (\S+)/.exec(targetConfig)![1];
const target = gw.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
const ns = uniqueName('audit');
t.equal(kubectl(target, ['create', 'namespace', ns]).status, 0, 'test namespace on the target');
t.teardown(() => {
  kubectl(target, ['delete', 'namespace', ns, '--wait=false']);
});

interface AuditLine {
  msg: string;
  audit: Record<string, unknown>;
}

/** The audit lines of one request, by its request id. */
function auditLines(requestId: string): AuditLine[] {
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((line) => line.includes(requestId))
    .map((line) => JSON.parse(line) as AuditLine)
    .filter((line) => line.msg === 'audit' && line.audit?.requestId === requestId);
}

/** Sends a request with a fresh request id; returns the response and that id. */
async function traced(method: string, path: string, options: RequestOptions = {}) {
  const requestId = uniqueName('req');
  const res = await call(gw.url, method, path, {
    ...options,
    headers: { ...options.headers, 'x-request-id': requestId },
  });
  return { res, requestId };
}

/** The one audit line of a request (fails the test when there is not exactly one). */
function onlyAudit(t: Test, requestId: string): Record<string, unknown> {
  const lines = auditLines(requestId);
  t.equal(lines.length, 1, 'exactly one audit line');
  return lines[0]?.audit ?? {};
}

const CLUSTER = 'target-a'; // the context name in the imported kubeconfig

t.test('importing a kubeconfig: one audit line, no token in the log', async (t) => {
  const { res, requestId } = await traced('POST', '/api/v1/admin/clusters/import', {
    body: { config: targetConfig },
    headers: admin.headers,
  });
  t.equal(res.status, 201, 'imported');
  const audit = onlyAudit(t, requestId);
  t.match(audit, {
    who: 'apikey:admin-key',
    whoKind: 'apikey',
    verb: 'import',
    resource: 'clusters',
    name: CLUSTER,
    result: 'success',
    status: 201,
    cluster: '',
  });
  t.ok(Math.abs(Date.parse(audit.when as string) - Date.now()) < 60_000, 'when is an ISO time of now');
  t.notOk(readFileSync(logFile, 'utf8').includes(kubeconfigToken), 'the kubeconfig token is not in the log');
  await waitClusterReady(gw, admin, CLUSTER);
});

t.test('creating a user: one audit line, no password in the log', async (t) => {
  const password = `pw-${uniqueName('secret')}`;
  const username = uniqueName('carol');
  const { res, requestId } = await traced('POST', '/api/v1/admin/users/', {
    body: { username, password, name: 'Carol' },
    headers: admin.headers,
  });
  t.equal(res.status, 201, 'created');
  t.match(onlyAudit(t, requestId), {
    who: 'apikey:admin-key',
    verb: 'create',
    resource: 'users',
    name: username,
    result: 'success',
    status: 201,
  });

  const reset = await traced('POST', `/api/v1/admin/users/${res.body.id}/reset_password`, {
    body: { password: `${password}-2` },
    headers: admin.headers,
  });
  t.equal(reset.res.status, 200, 'password reset');
  t.match(onlyAudit(t, reset.requestId), {
    verb: 'reset_password',
    resource: 'users',
    id: String(res.body.id),
    result: 'success',
  });

  const login = await traced('POST', '/api/auth/login/password', {
    body: { username, password: 'wrong-password-here' },
  });
  t.equal(login.res.status, 401);
  t.match(onlyAudit(t, login.requestId), {
    who: 'anonymous',
    verb: 'login',
    resource: 'sessions',
    name: username,
    result: 'failure',
    status: 401,
  });
  const log = readFileSync(logFile, 'utf8');
  t.notOk(log.includes(password), 'no password in the log');
  t.notOk(log.includes('wrong-password-here'), 'no attempted password in the log');
});

t.test('creating a Secret: one audit line, no data, no last-applied annotation', async (t) => {
  const value = uniqueName('top-secret-value');
  const stringValue = uniqueName('string-secret');
  const annotation = JSON.stringify({ kind: 'Secret', stringData: { hidden: uniqueName('applied-secret') } });
  const body = {
    metadata: {
      name: 'db-credentials',
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': annotation },
    },
    data: { password: Buffer.from(value).toString('base64') },
    stringData: { token: stringValue },
  };
  const H = { ...admin.headers, 'x-cluster-name': CLUSTER };
  const { res, requestId } = await traced('POST', `/api/v1/secrets/${ns}`, { body, headers: H });
  t.equal(res.status, 201, 'created');
  const audit = onlyAudit(t, requestId);
  t.match(audit, {
    who: 'apikey:admin-key',
    whoKind: 'apikey',
    cluster: CLUSTER,
    verb: 'create',
    resource: 'secrets',
    namespace: ns,
    name: 'db-credentials',
    result: 'success',
    status: 201,
  });
  t.notOk('dryRun' in audit, 'no dryRun flag on a real write');
  t.same(Object.keys(audit).sort(), [
    'cluster',
    'name',
    'namespace',
    'requestId',
    'resource',
    'result',
    'status',
    'verb',
    'when',
    'who',
    'whoKind',
  ]);

  const dry = await traced('PATCH', `/api/v1/secrets/${ns}/db-credentials?dryRun=All&patchType=merge`, {
    body: { stringData: { extra: stringValue } },
    headers: { ...H, 'content-type': 'application/merge-patch+json' },
  });
  t.equal(dry.res.status, 200, 'dry-run patch');
  t.match(onlyAudit(t, dry.requestId), {
    verb: 'patch',
    resource: 'secrets',
    name: 'db-credentials',
    dryRun: true,
    result: 'success',
  });

  const log = readFileSync(logFile, 'utf8');
  for (const secret of [
    value,
    Buffer.from(value).toString('base64'),
    stringValue,
    Buffer.from(stringValue).toString('base64'),
  ]) {
    t.notOk(log.includes(secret), 'no Secret value (plain or base64) in the log');
  }
  t.notOk(log.includes('applied-secret'), 'no last-applied annotation in the log');
});

t.test('failed writes are audited too', async (t) => {
  const H = { 'x-cluster-name': CLUSTER };
  const anonymous = await traced('POST', `/api/v1/configmaps/${ns}`, { body: { metadata: { name: 'x' } }, headers: H });
  t.equal(anonymous.res.status, 401);
  t.match(onlyAudit(t, anonymous.requestId), {
    who: 'anonymous',
    whoKind: 'anonymous',
    cluster: CLUSTER,
    verb: 'create',
    resource: 'configmaps',
    namespace: ns,
    result: 'failure',
    status: 401,
  });

  const forbidden = await traced('DELETE', `/api/v1/secrets/${ns}/db-credentials`, {
    headers: { ...H, ...viewer.headers },
  });
  t.equal(forbidden.res.status, 403);
  t.match(onlyAudit(t, forbidden.requestId), {
    who: 'apikey:audit-viewer',
    cluster: CLUSTER,
    verb: 'delete',
    resource: 'secrets',
    namespace: ns,
    name: 'db-credentials',
    result: 'failure',
    status: 403,
  });
  t.equal(kubectl(target, ['get', 'secret', 'db-credentials', '-n', ns]).status, 0, 'the Secret is still there');

  const notAdmin = await traced('POST', '/api/v1/admin/roles/', {
    body: { name: 'nope', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['*'] },
    headers: viewer.headers,
  });
  t.equal(notAdmin.res.status, 403);
  // Refused before its body is read: the line has no name, but says who tried what.
  t.match(onlyAudit(t, notAdmin.requestId), {
    who: 'apikey:audit-viewer',
    verb: 'create',
    resource: 'roles',
    result: 'failure',
    status: 403,
  });

  const bad = await traced('PUT', '/api/v1/admin/clusters/999999', {
    body: { description: 'x' },
    headers: admin.headers,
  });
  t.equal(bad.res.status, 404);
  t.match(onlyAudit(t, bad.requestId), {
    verb: 'update',
    resource: 'clusters',
    id: '999999',
    result: 'failure',
    status: 404,
  });
});

t.test('reads are not audited; every write route is in the audit table', async (t) => {
  const read = await traced('GET', `/api/v1/secrets/${ns}`, {
    headers: { ...admin.headers, 'x-cluster-name': CLUSTER },
  });
  t.equal(read.res.status, 200);
  t.equal(auditLines(read.requestId).length, 0, 'a list writes no audit line');
  t.notOk(
    readFileSync(logFile, 'utf8').includes('write route missing from the audit table'),
    'no write route without an entry',
  );
});

t.test('the audit table: keys and the fields it copies', async (t) => {
  t.equal(auditKey('POST', '/api/v1/admin/users/'), 'POST /api/v1/admin/users', 'a trailing slash does not matter');
  t.equal(auditKey('GET', '/'), 'GET /');
  t.ok(AUDIT_ROUTES['DELETE /api/v1/:resource/:namespace/:name']?.clusterScoped, 'resource writes carry the cluster');
  const request = (body: unknown) =>
    ({ body, params: { id: '7' }, query: {} }) as unknown as Parameters<typeof auditField>[0];
  t.equal(auditField(request({ username: 'dora' }), 'body.username'), 'dora');
  t.equal(auditField(request({ username: { $gt: '' } }), 'body.username'), undefined, 'only strings are copied');
  t.equal(auditField(request('raw text'), 'body.name'), undefined, 'a non-object body has no fields');
  t.equal(auditField(request({ name: 'x'.repeat(5000) }), 'body.name')?.length, 253, 'long values are cut');
  t.equal(auditField(request({}), 'params.id'), '7');
  const fields = Object.values(AUDIT_ROUTES).flatMap((r) => [r.name, r.namespace, r.subject, r.resourceField]);
  t.notOk(
    fields.some((f) => f && /password|config|key|token/i.test(f)),
    'no secret-bearing field is ever copied',
  );
});

t.test('KITELINE_AUDIT_EVENTS=true also records admin writes as Events', async (t) => {
  const events = await startGateway(t, { logName: `${logName}-events`, env: { KITELINE_AUDIT_EVENTS: 'true' } });
  const boss = await bootstrapAdmin(events, 'boss');
  const role = uniqueName('auditors');
  const created = await call(events.url, 'POST', '/api/v1/admin/roles/', {
    body: { name: role, clusters: ['*'], namespaces: ['*'], resources: ['pods'], verbs: ['get'] },
    headers: boss.headers,
  });
  t.equal(created.status, 201);
  const event = await eventually('the audit Event', async () => {
    const out = kubectl(events.kubeconfig, [
      'get',
      'events',
      '-n',
      events.namespace,
      '-l',
      'kiteline.io/audit=true',
      '-o',
      'json',
    ]);
    const items = out.status === 0 ? (JSON.parse(out.stdout).items as any[]) : [];
    return items.find((e) => e.message.includes(`create roles ${role}`));
  });
  t.equal(event.reason, 'AdminWrite');
  t.equal(event.type, 'Normal');
  t.match(event.message, /^apikey:boss-key create roles /);
  t.match(JSON.parse(event.metadata.annotations['kiteline.io/audit']), {
    who: 'apikey:boss-key',
    verb: 'create',
    resource: 'roles',
    name: role,
    result: 'success',
  });
});
