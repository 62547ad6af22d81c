// The OpenAPI document (GET /openapi.json) and the docs page (/docs) of a running gateway: the
// document validates as OpenAPI 3, lists exactly the routes the app registered (except the docs
// page's own static routes) with a response schema each, and its security claims hold. The
// response schemas are also Fastify's serializers: answers keep every member of the views, and
// resource answers stream through from the cluster byte for byte.
import { isDeepStrictEqual } from 'node:util';
import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { FastifyInstance } from 'fastify';
import { apiKeyView, roleView, userView } from '../src/gateway/views/identity.js';
import { resourceId } from '../src/host/resources.js';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { call, startGateway } from './helpers/gateway.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig, type Caller } from './helpers/fixtures.js';

const gw = await startGateway(t, { logName: 'openapi' });
const fetched = await call(gw.url, 'GET', '/openapi.json');
const doc = fetched.body;
type Operation = {
  security?: unknown[];
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  tags?: string[];
};
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

/** `METHOD /path/{param}` of every operation in the document. */
function documentedOperations(): Map<string, Operation> {
  const ops = new Map<string, Operation>();
  for (const [path, item] of Object.entries<Record<string, Operation>>(doc.paths)) {
    for (const [method, op] of Object.entries(item))
      if (METHODS.includes(method)) ops.set(`${method.toUpperCase()} ${path}`, op);
  }
  return ops;
}

/**
 * `METHOD /path/{param}` of every route the app registered, read from app.printRoutes() (a tree
 * whose lines carry a path segment and its methods). HEAD routes are Fastify's automatic twins of
 * the GET routes and are left out, like the docs page's routes under /docs.
 */
function registeredRoutes(app: FastifyInstance): Set<string> {
  const routes = new Set<string>();
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    // A route with constraints prints them after its methods: ` (GET, HEAD) {"eventStream":"yes"}`.
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(.+?)(?: \(([^)]*)\))?(?: \{.*\})?$/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 4;
    const path = (depth > 0 ? prefixes[depth - 1] : '') + m[2];
    prefixes[depth] = path;
    prefixes.length = depth + 1;
    if (path === '/docs' || path.startsWith('/docs/')) continue;
    // The kubectl proxy (/k8s/clusters/*, which find-my-way prints as a bare `*`) is the clusters'
    // own Kubernetes API, documented by each cluster's /openapi/v2, not by kiteline's document.
    // The replicas' internal hop (docs/fleet.md) is no API: only replicas can call it.
    if (path === '*' || path.startsWith('/k8s/clusters/') || path.startsWith('/internal/fleet/')) continue;
    // Likewise the rest of the path of the pod and service proxies (`.../proxy/*`, printed `.../proxy*`):
    // the pod's own paths. Their `.../proxy` routes are documented.
    if (/^\/api\/v1\/namespaces\/:namespace\/(pods|services)\/:name\/proxy\/?\*$/.test(path)) continue;
    // GET and DELETE /mcp only answer 405 (MCP's Streamable HTTP: no server stream, no session).
    const notOperations = path === '/mcp' ? ['GET', 'DELETE'] : [];
    for (const method of (m[3] ?? '').split(', ').filter((x) => x && x !== 'HEAD' && !notOperations.includes(x))) {
      routes.add(`${method} ${path.replace(/:([A-Za-z_]+)/g, '{$1}')}`);
    }
  }
  return routes;
}

t.test('GET /openapi.json is a valid OpenAPI 3 document, public', async (t) => {
  t.equal(fetched.status, 200, 'no credentials needed');
  t.match(fetched.headers.get('content-type'), /^application\/json/);
  t.match(doc.openapi, /^3\./);
  t.equal(doc.info.title, 'kiteline');
  const result = await new Validator().validate(doc);
  t.ok(result.valid, `validates: ${JSON.stringify(result.errors ?? '').slice(0, 2000)}`);
});

t.test('every registered route is in the document, and nothing else', async (t) => {
  const registered = registeredRoutes(gw.app);
  const documented = documentedOperations();
  // The parse must have found the routes at all (a broken parse would make this test vacuous).
  for (const known of [
    'GET /healthz',
    'POST /api/v1/admin/users/create_super_user',
    'POST /api/v1/admin/users/{id}/reset_password',
    'DELETE /api/v1/admin/roles/{id}/assign',
    'GET /api/v1/{resource}',
    'PATCH /api/v1/{resource}/{namespace}/{name}',
    'POST /api/auth/login/password',
    'GET /openapi.json',
  ]) {
    t.ok(registered.has(known), `registered: ${known}`);
  }
  t.ok(registered.size >= 45, `all routes parsed (${registered.size})`);
  for (const route of registered) t.ok(documented.has(route), `documented: ${route}`);
  for (const op of documented.keys()) t.ok(registered.has(op), `registered, as documented: ${op}`);
  t.notOk(
    [...documented.keys()].some((op) => op.includes(' /docs')),
    'the docs page routes are hidden',
  );
});

t.test('every operation has tags, success and error responses with schemas', async (t) => {
  const errorRef = '#/components/schemas/ErrorResponse';
  for (const [name, op] of documentedOperations()) {
    t.ok(op.tags && op.tags.length > 0, `${name}: tagged`);
    const codes = Object.keys(op.responses);
    // A redirect is the success of the OAuth callback (to / or to /login?error=).
    const success = codes.filter((c) => /^[23]/.test(c));
    t.ok(success.length > 0, `${name}: a success response`);
    for (const code of success) {
      if (code === '204' || /^3/.test(code)) t.notOk(op.responses[code].content, `${name}: ${code} has no body`);
      else t.ok(Object.values(op.responses[code].content ?? {})[0]?.schema, `${name}: ${code} has a schema`);
    }
    for (const code of ['4XX', '5XX']) {
      t.same(
        op.responses[code]?.content?.['application/json']?.schema,
        { $ref: errorRef },
        `${name}: ${code} is the error shape`,
      );
    }
  }
  t.match(doc.components.schemas.ErrorResponse, {
    required: ['error', 'reason', 'code'],
    properties: { error: {}, reason: {}, code: {}, details: {} },
  });
});

t.test('security schemes, and public routes really are public', async (t) => {
  t.match(doc.components.securitySchemes, {
    apiKey: { type: 'apiKey', in: 'header', name: 'Authorization' },
    bearerApiKey: { type: 'http', scheme: 'bearer' },
    sessionCookie: { type: 'apiKey', in: 'cookie', name: 'auth_token' },
  });
  t.same(doc.security, [{ apiKey: [] }, { bearerApiKey: [] }, { sessionCookie: [] }], 'credentials by default');
  const ops = documentedOperations();
  const isPublic = (op: Operation) =>
    Array.isArray(op.security) &&
    (op.security.length === 0 || op.security.some((s) => Object.keys(s as object).length === 0));
  const publicOps = [...ops]
    .filter(([, op]) => isPublic(op))
    .map(([name]) => name)
    .sort();
  t.same(
    publicOps,
    [
      'GET /api/auth/callback',
      'GET /api/auth/login',
      'GET /api/auth/providers',
      'GET /api/v1/bootstrap',
      'GET /api/v1/init_check',
      'GET /healthz',
      'GET /openapi.json',
      'GET /readyz',
      'POST /api/auth/login/ldap',
      'POST /api/auth/login/mfa',
      'POST /api/auth/login/password',
      'POST /api/auth/logout',
      'POST /api/auth/passkey/login/begin',
      'POST /api/auth/passkey/login/finish',
      'POST /api/auth/setup/create_super_user',
      'POST /api/v1/admin/clusters/import',
      'POST /api/v1/admin/users/create_super_user',
    ],
    'the public (or credentials-optional) operations',
  );
  // Every operation called without credentials (this gateway has no user and no cluster yet;
  // empty bodies change nothing): public ones do not answer 401, all others do.
  for (const [name, op] of ops) {
    const [method, template] = name.split(' ') as [string, string];
    const path = template
      .replace('{id}', '1')
      .replace('{resource}', 'configmaps')
      .replace('{namespace}', 'default')
      .replace('{name}', 'x');
    const res = await call(gw.url, method, path, method === 'GET' || method === 'DELETE' ? {} : { body: {} });
    if (isPublic(op)) t.not(res.status, 401, `${name} answers without credentials (${res.status})`);
    else t.equal(res.status, 401, `${name} needs credentials`);
  }
});

t.test('/docs serves the Swagger UI page and its assets locally', async (t) => {
  const page = await call(gw.url, 'GET', '/docs');
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html/);
  t.match(page.text, /swagger-ui-bundle\.js/);
  const bundle = await call(gw.url, 'GET', '/docs/static/swagger-ui-bundle.js');
  t.equal(bundle.status, 200, 'the UI comes from node_modules, not the network');
  t.match(bundle.headers.get('content-type'), /javascript/);
  const own = await call(gw.url, 'GET', '/docs/json');
  t.same(own.body, doc, "the UI's /docs/json is the same document");
});

/** The admin of the tests below (created after the checks that need a gateway without users). */
let admin: Promise<Caller> | undefined;
const theAdmin = () => (admin ??= bootstrapAdmin(gw));

t.test('the serializers keep every member of the views', async (t) => {
  const { headers } = await theAdmin();
  const { users: userStore, roles, apiKeys } = gw.services;
  const roleByName = (name: string) => roles.byName(name);

  const created = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers,
    body: { username: 'reader', password: 'long-enough-pw' },
  });
  t.equal(created.status, 201, created.text);
  // `managedBy` is there only for a user applied by a GitOps engine (test/gitops.test.ts shows it kept).
  t.same(Object.keys(created.body).sort(), [...doc.components.schemas.User.required].sort(), 'User: every member');
  t.same(
    Object.keys(doc.components.schemas.User.properties).filter(
      (k) => !doc.components.schemas.User.required.includes(k),
    ),
    ['managedBy'],
    'the one optional member',
  );
  t.equal(created.body.lastLoginAt, null, 'null stays null (not "")');
  // The answers equal the views built from the same cache (polled: a login time may land between).
  const users = await eventually(
    'the user list to equal the views',
    async () => {
      const res = await call(gw.url, 'GET', '/api/v1/admin/users/', { headers });
      const views = res.body.users.map((u: { id: number }) => userView(userStore.byId(u.id)!, roleByName));
      return res.body.users.length === 2 && isDeepStrictEqual(res.body.users, views) ? res : undefined;
    },
    10_000,
  );
  t.equal(users.body.total, 2);

  const me = await call(gw.url, 'GET', '/api/auth/user', { headers });
  t.same(
    Object.keys(me.body.user).sort(),
    [...doc.components.schemas.SessionUser.required].sort(),
    'the caller (an API key): every member',
  );
  t.equal(me.body.user.provider, 'api_key');

  await eventually(
    'the API key list to equal the views',
    async () => {
      const res = await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers });
      const views = res.body.apiKeys.map((k: { id: number }) => apiKeyView(apiKeys.byId(k.id)!));
      return res.body.apiKeys.length === 1 && isDeepStrictEqual(res.body.apiKeys, views);
    },
    10_000,
  );
  t.same(
    Object.keys(apiKeyView(apiKeys.list()[0])).sort(),
    Object.keys(doc.components.schemas.APIKey.properties).sort(),
    'APIKey: every member',
  );

  const role = await call(gw.url, 'GET', `/api/v1/admin/roles/${resourceId(roles.byName('admin')!)}`, { headers });
  t.same(role.body.role, roleView(roles.byName('admin')!, userStore.list()), 'Role with its assignments');
  t.ok(role.body.role.assignments.length > 0);

  const denied = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers,
    body: { username: 'bad name!', password: 'long-enough-pw' },
  });
  t.equal(denied.status, 400);
  t.same(Object.keys(denied.body).sort(), ['code', 'error', 'reason'], 'the error shape');
});

t.test('resource answers stream through unchanged', async (t) => {
  const caller = await theAdmin();
  const cluster = uniqueName('oa');
  await addReadyCluster(gw, caller, { name: cluster, config: testKubeconfig('target-a'), isDefault: true });
  const clusters = await call(gw.url, 'GET', '/api/v1/admin/clusters/', { headers: caller.headers });
  t.same(
    Object.keys(clusters.body[0]).sort(),
    // `source` is there only for a cluster read from a source (test/cluster-sources.test.ts shows it kept).
    [...doc.components.schemas.Cluster.required].sort(),
    'Cluster: every member',
  );

  const target = gw.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
  const ns = uniqueName('oa');
  t.equal(kubectl(target, ['create', 'namespace', ns]).status, 0);
  t.teardown(() => {
    kubectl(target, ['delete', 'namespace', ns, '--wait=false']);
  });
  t.equal(kubectl(target, ['create', 'configmap', 'streamed', '-n', ns, '--from-literal=a=1']).status, 0);
  const H = { headers: { ...caller.headers, 'x-cluster-name': cluster } };

  const got = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}/streamed`, H);
  t.equal(got.status, 200, got.text);
  const raw = kubectl(target, ['get', '--raw', `/api/v1/namespaces/${ns}/configmaps/streamed`]);
  t.equal(got.text, raw.stdout, "a get is the cluster's answer byte for byte");

  const listed = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, H);
  t.equal(listed.status, 200);
  t.equal(listed.body.kind, 'ConfigMapList');
  t.ok(listed.body.items.some((i: { metadata: { name: string } }) => i.metadata.name === 'streamed'));
  t.ok(listed.text.endsWith('}\n'), "the API server's own encoding (a re-serialized body has no trailing newline)");
  // A list larger than the API server's write buffer comes chunked; the gateway keeps that framing
  // when it passes it through (a buffered, re-serialized answer would carry a Content-Length).
  t.equal(
    kubectl(target, ['create', 'configmap', 'streamed-big', '-n', ns, `--from-literal=big=${'x'.repeat(64 * 1024)}`])
      .status,
    0,
  );
  const big = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}`, H);
  t.equal(big.status, 200);
  if (big.headers.get('x-kiteline-cache') === 'hit') {
    // Hot by now: the read cache (docs/read-cache.md) answers it whole, framed by its length.
    t.equal(big.headers.get('content-length'), String(Buffer.byteLength(big.text)), 'a cached list, framed');
  } else {
    t.notOk(big.headers.get('content-length'), 'a large list is streamed (chunked), not buffered');
  }

  const invalid = await call(gw.url, 'POST', `/api/v1/configmaps/${ns}`, {
    ...H,
    body: { metadata: { name: 'bad' }, data: { 'not a key!': 'x' } },
  });
  t.equal(invalid.status, 422, invalid.text);
  t.match(
    invalid.body,
    { reason: 'Invalid', code: 422, details: { causes: Array } },
    'the error keeps the cluster Status details',
  );
});
