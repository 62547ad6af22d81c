// Hostile input (issue 8, point 3): a corpus of several hundred requests GENERATED as routes x
// payload kinds (malformed, huge and deeply nested JSON, wrong types, unknown members where bodies
// are strict, path segments with '..', '%2F' and overlong names, bad ids, invalid JSON patches,
// wrong content types, kind/namespace mismatches, kubeconfigs with plugins, file paths, broken
// certificates and non-http(s) servers, bad credentials). Every request must get a 4xx with a JSON
// error body {error, reason, code}, the gateway must keep answering /healthz, and neither the host
// cluster (the install namespaces' kiteline objects, Secrets and ConfigMaps) nor the target cluster
// (its namespaces and the ConfigMaps the corpus aims at) may change.
import t from 'tap';
import { parse, stringify } from 'yaml';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway, type HttpResponse, type TestGateway } from './helpers/gateway.js';

const LOG = 'hostile-input';
const main = await startGateway(t, { logName: LOG });
// A second install namespace with no user and no cluster: the public bootstrap routes are open there.
const fresh = await startGateway(t, { logName: LOG });
const admin = await bootstrapAdmin(main);
const targetConfig = testKubeconfig('target-a');
const target = main.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
const CLUSTER = uniqueName('hostile');
const clusterId = await addReadyCluster(main, admin, { name: CLUSTER, config: targetConfig, isDefault: true });
const ns = uniqueName('hostile-a');
const otherNs = uniqueName('hostile-b');
/** Set-up steps throw (no assertion before the test: tap would end the root test early). */
function must(res: { status: number; stderr: string }, what: string): void {
  if (res.status !== 0) throw new Error(`${what}: ${res.stderr}`);
}
for (const n of [ns, otherNs]) must(kubectl(target, ['create', 'namespace', n]), `namespace ${n} on the target`);
t.teardown(() => {
  for (const n of [ns, otherNs]) kubectl(target, ['delete', 'namespace', n, '--wait=false']);
});
must(
  kubectl(target, ['-n', ns, 'create', 'configmap', 'keep', '--from-literal=color=blue']),
  'a ConfigMap the writes aim at',
);

// Objects the id routes aim at.
const userRes = await call(main.url, 'POST', '/api/v1/admin/users/', {
  body: { username: 'bystander', password: 'bystander-pw' },
  headers: admin.headers,
});
const userId: number = userRes.body.id;
const roleName = uniqueName('narrow');
await createRole(main, admin, {
  name: roleName,
  clusters: [CLUSTER],
  namespaces: [ns],
  resources: ['configmaps'],
  verbs: ['get'],
});
const roleIds = Object.fromEntries(
  (await call(main.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers })).body.roles.map(
    (r: { name: string; id: number }) => [r.name, r.id],
  ),
) as Record<string, number>;
const roleId = roleIds[roleName];
const narrow = await apiKeyWithRoles(main, admin, uniqueName('narrow-key'), [roleName]);
const adminUserId: number = (
  await call(main.url, 'GET', '/api/v1/admin/users/?search=admin', { headers: admin.headers })
).body.users[0].id;

// ---------------------------------------------------------------- the corpus

interface Probe {
  what: string;
  method: string;
  path: string;
  /** Raw body text (sent with content-type application/json unless headers say otherwise). */
  raw?: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** 'admin' (default), 'none' (no credentials), or given headers only. */
  as?: 'admin' | 'none' | 'narrow';
  /** The gateway with no user and no cluster (bootstrap routes). */
  onFresh?: boolean;
}

const LIMIT = main.config.bodyLimitBytes;
const deep = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

/** Bodies that are not a JSON object at all, sent with content-type application/json. */
const MALFORMED: Array<[string, string]> = [
  ['truncated object', '{"username":'],
  ['unclosed object', '{"a":1'],
  ['single quotes', "{'a':1}"],
  ['trailing garbage', '{"a":1}}'],
  ['bare word', 'undefined'],
  ['NUL byte', '\u0000'],
  ['array', '[]'],
  ['array of objects', '[{}]'],
  ['string', '"text"'],
  ['number', '42'],
  ['null', 'null'],
  ['boolean', 'true'],
  ['__proto__ member', '{"__proto__":{"isAdmin":true}}'],
  ['deeply nested array', '['.repeat(5000) + ']'.repeat(5000)],
];

/** Bodies whose content type is not JSON. */
const WRONG_CONTENT_TYPES: Array<[string, string, string]> = [
  ['text/plain', 'text/plain', '{"a":1}'],
  ['form', 'application/x-www-form-urlencoded', 'a=1&b=2'],
  ['xml', 'application/xml', '<a>1</a>'],
  ['multipart', 'multipart/form-data; boundary=x', '--x\r\n\r\n--x--'],
];

/** A body over the configured limit (413). */
const huge = () => `{"name":"${'x'.repeat(LIMIT + 1024)}"}`;

/** Values that no JSON schema coerces into a string or boolean. */
const NOT_SCALAR: Array<[string, unknown]> = [
  ['object', { a: 1 }],
  ['array of objects', [{ a: 1 }]],
  ['deeply nested object', JSON.parse(deep(500))],
];

function jsonRoute(
  probes: Probe[],
  base: Omit<Probe, 'what'>,
  route: string,
  valid: Record<string, unknown>,
  fields: string[],
  extra: Array<[string, unknown]>,
) {
  for (const [kind, raw] of MALFORMED)
    probes.push({ ...base, what: `${route}: ${kind}`, raw, headers: { 'content-type': 'application/json' } });
  for (const [kind, type, raw] of WRONG_CONTENT_TYPES)
    probes.push({ ...base, what: `${route}: content type ${kind}`, raw, headers: { 'content-type': type } });
  probes.push({
    ...base,
    what: `${route}: body over the limit`,
    raw: huge(),
    headers: { 'content-type': 'application/json' },
  });
  for (const field of fields) {
    for (const [kind, value] of NOT_SCALAR)
      probes.push({ ...base, what: `${route}: ${field} is an ${kind}`, body: { ...valid, [field]: value } });
  }
  for (const [what, body] of extra) probes.push({ ...base, what: `${route}: ${what}`, body });
}

// Kubeconfigs: every way one can be unusable or unsafe.
const good = parse(targetConfig);
function variant(mutate: (doc: any) => void): string {
  const doc = structuredClone(good);
  mutate(doc);
  return stringify(doc);
}
const cluster = (doc: any) => doc.clusters[0].cluster;
const user = (doc: any) => doc.users[0].user;
const garbageB64 = Buffer.from('this is not a certificate').toString('base64');
const brokenPem = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIBbroken\n-----END CERTIFICATE-----\n').toString(
  'base64',
);
const brokenKey = Buffer.from('-----BEGIN PRIVATE KEY-----\nMIIEnope\n-----END PRIVATE KEY-----\n').toString('base64');
const KUBECONFIGS: Array<[string, string]> = [
  [
    'exec plugin',
    variant((d) => {
      user(d).exec = {
        apiVersion: 'client.authentication.k8s.io/v1beta1',
        command: 'sh',
        args: ['-c', 'touch /tmp/pwned'],
      };
      delete user(d).token;
    }),
  ],
  [
    'auth-provider plugin',
    variant((d) => {
      user(d)['auth-provider'] = { name: 'gcp', config: { 'cmd-path': '/bin/sh' } };
      delete user(d).token;
    }),
  ],
  [
    'tokenFile path',
    variant((d) => {
      user(d).tokenFile = '/etc/shadow';
      delete user(d).token;
    }),
  ],
  [
    'client-certificate path',
    variant((d) => {
      user(d)['client-certificate'] = '/etc/ssl/private/c.crt';
      user(d)['client-key-data'] = garbageB64;
    }),
  ],
  [
    'client-key path',
    variant((d) => {
      user(d)['client-key'] = '/root/.ssh/id_rsa';
    }),
  ],
  [
    'certificate-authority path',
    variant((d) => {
      delete cluster(d)['certificate-authority-data'];
      cluster(d)['certificate-authority'] = '/etc/kubernetes/pki/ca.crt';
    }),
  ],
  [
    'proxy-url',
    variant((d) => {
      cluster(d)['proxy-url'] = 'socks5://evil:1080';
    }),
  ],
  [
    'impersonation in the kubeconfig',
    variant((d) => {
      user(d).as = 'system:admin';
    }),
  ],
  [
    'CA that is not base64',
    variant((d) => {
      cluster(d)['certificate-authority-data'] = '%%% not base64 %%%';
    }),
  ],
  [
    'CA that is not PEM',
    variant((d) => {
      cluster(d)['certificate-authority-data'] = garbageB64;
    }),
  ],
  [
    'CA PEM with a broken body',
    variant((d) => {
      cluster(d)['certificate-authority-data'] = brokenPem;
    }),
  ],
  [
    'client certificate that is not PEM',
    variant((d) => {
      user(d)['client-certificate-data'] = garbageB64;
      user(d)['client-key-data'] = garbageB64;
      delete user(d).token;
    }),
  ],
  [
    'client certificate and key with broken bodies',
    variant((d) => {
      user(d)['client-certificate-data'] = brokenPem;
      user(d)['client-key-data'] = brokenKey;
      delete user(d).token;
    }),
  ],
  [
    'client certificate without its key',
    variant((d) => {
      user(d)['client-certificate-data'] = brokenPem;
    }),
  ],
  [
    'server file:///',
    variant((d) => {
      cluster(d).server = 'file:///etc/passwd';
    }),
  ],
  [
    'server ftp://',
    variant((d) => {
      cluster(d).server = 'ftp://files.example/kube';
    }),
  ],
  [
    'server javascript:',
    variant((d) => {
      cluster(d).server = 'javascript:alert(1)';
    }),
  ],
  [
    'server data:',
    variant((d) => {
      cluster(d).server = 'data:text/plain,hello';
    }),
  ],
  [
    'server without a scheme',
    variant((d) => {
      cluster(d).server = '10.0.0.1:6443';
    }),
  ],
  [
    'server host:port',
    variant((d) => {
      cluster(d).server = 'localhost:6443';
    }),
  ],
  [
    'server with credentials',
    variant((d) => {
      cluster(d).server = 'https://user:pass@10.0.0.1:6443';
    }),
  ],
  [
    'server with a query',
    variant((d) => {
      cluster(d).server = 'https://10.0.0.1:6443/?x=1';
    }),
  ],
  [
    'server missing',
    variant((d) => {
      delete cluster(d).server;
    }),
  ],
  [
    'server not a string',
    variant((d) => {
      cluster(d).server = { url: 'https://x' };
    }),
  ],
  [
    'insecure-skip-tls-verify not a boolean',
    variant((d) => {
      cluster(d)['insecure-skip-tls-verify'] = 'yes';
    }),
  ],
  [
    'token over two lines',
    variant((d) => {
      user(d).token = 'abc\ndef';
    }),
  ],
  [
    'no contexts',
    variant((d) => {
      d.contexts = [];
    }),
  ],
  [
    'unknown current-context',
    variant((d) => {
      d['current-context'] = 'nowhere';
    }),
  ],
  [
    'context naming a missing cluster',
    variant((d) => {
      d.contexts[0].context.cluster = 'ghost';
    }),
  ],
  [
    'kind Secret',
    variant((d) => {
      d.kind = 'Secret';
    }),
  ],
  [
    'clusters not a list',
    variant((d) => {
      d.clusters = { a: 1 };
    }),
  ],
  ['invalid YAML', 'clusters: [unclosed'],
  ['YAML list', '- a\n- b\n'],
  ['YAML scalar', '42'],
  ['two YAML documents', 'a: 1\n---\nb: 2\n'],
  [
    'alias bomb',
    [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...Array.from({ length: 9 }, (_, i) => {
        const name = String.fromCharCode(98 + i);
        const alias = `*${String.fromCharCode(97 + i)}`;
        return `${name}: &${name} [${Array.from({ length: 9 }, () => alias).join(',')}]`;
      }),
    ].join('\n'),
  ],
  ['empty', '   '],
];

const BAD_IDS = [
  '0',
  '-1',
  'abc',
  '1.5',
  '1e3',
  '0x1',
  '%2E%2E',
  '..%2F1',
  '%2F',
  '99999999999999999999',
  '%00',
  '%201',
  'x'.repeat(300),
];
const BAD_NAMES = [
  '%2E%2E',
  '..%2F..%2Fsecrets',
  'a%2Fb',
  '%2e%2e%2fkube-system',
  'x'.repeat(254),
  '.hidden',
  'a%00b',
  'a%20b',
  '%C3%BC',
  'a..b',
  '%252E%252E',
];
const BAD_NAMESPACES = ['%2E%2E', 'Kube-System', 'a'.repeat(64), 'a%2Fb', '_ALL', '-x', 'a_b', '%2E%2E%2Fkube-system'];
const BAD_RESOURCES = ['%2E%2E', 'Pods', 'pods%2Fexec', 'pods..', '-pods', 'x'.repeat(254), 'config%20maps'];

function buildCorpus(): Probe[] {
  const probes: Probe[] = [];
  const U = '/api/v1/admin/users';
  const R = '/api/v1/admin/roles';
  const K = '/api/v1/admin/apikeys';
  const C = '/api/v1/admin/clusters';
  const validUser = { username: 'newcomer', password: 'newcomer-pw', name: 'New' };
  const validRole = { name: 'newrole', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] };
  const validCluster = { name: 'newcluster', config: targetConfig };

  // Admin JSON routes: generic payload kinds plus each route's own invalid values.
  jsonRoute(
    probes,
    { method: 'POST', path: `${U}/` },
    'create user',
    validUser,
    ['username', 'password', 'name'],
    [
      ['no username', { password: 'long-enough' }],
      ['no password', { username: 'someone' }],
      ...['', 'a b', '../etc', 'a/b', 'x'.repeat(64), '%2F', 'ünï', 'admin\u0000'].map(
        (u) => [`username ${JSON.stringify(u).slice(0, 20)}`, { ...validUser, username: u }] as [string, unknown],
      ),
      ['password too short', { ...validUser, password: 'short' }],
      ['password too long', { ...validUser, password: 'p'.repeat(129) }],
      ['duplicate username', { ...validUser, username: 'bystander' }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'PUT', path: `${U}/${userId}` },
    'update user',
    { name: 'x' },
    ['name', 'avatar_url'],
    [
      ['name too long', { name: 'n'.repeat(257) }],
      ['avatar_url too long', { avatar_url: 'https://a/' + 'x'.repeat(2048) }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'POST', path: `${U}/${userId}/reset_password` },
    'reset password',
    { password: 'a-new-password' },
    ['password'],
    [
      ['no password', {}],
      ['password too short', { password: 'short' }],
      ['password too long', { password: 'p'.repeat(129) }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'POST', path: `${U}/${userId}/enable` },
    'enable user',
    { enabled: false },
    ['enabled'],
    [
      ['no enabled', {}],
      ['enabled "maybe"', { enabled: 'maybe' }],
    ],
  );
  probes.push({
    what: 'disable yourself',
    method: 'POST',
    path: `${U}/${adminUserId}/enable`,
    body: { enabled: false },
  });
  jsonRoute(
    probes,
    { method: 'POST', path: `${R}/` },
    'create role',
    validRole,
    ['name', 'verbs', 'namespaces'],
    [
      ['unknown member', { ...validRole, namespace: 'typo' }],
      ['unknown verb', { ...validRole, verbs: ['fly'] }],
      ['bad name', { ...validRole, name: 'a b' }],
      ['name too long', { ...validRole, name: 'r'.repeat(300) }],
      ['too many patterns', { ...validRole, resources: Array.from({ length: 300 }, (_, i) => `r${i}`) }],
      ['duplicate of a built-in', { ...validRole, name: 'admin' }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'PUT', path: `${R}/${roleId}` },
    'update role',
    { description: 'x' },
    ['verbs', 'clusters'],
    [
      ['unknown member', { verbs: ['get'], extra: true }],
      ['rename', { name: 'renamed' }],
      ['unknown verb', { verbs: ['teleport'] }],
    ],
  );
  probes.push({
    what: 'update the built-in admin role',
    method: 'PUT',
    path: `${R}/${roleIds.admin}`,
    body: { verbs: ['get'] },
  });
  jsonRoute(
    probes,
    { method: 'POST', path: `${R}/${roleId}/assign` },
    'assign role',
    { subjectType: 'user', subject: 'bystander' },
    ['subject', 'subjectType'],
    [
      ['unknown subject type', { subjectType: 'team', subject: 'devs' }],
      ['unknown user', { subjectType: 'user', subject: 'nobody-here' }],
      ['unknown member', { subjectType: 'user', subject: 'bystander', role: 'admin' }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'POST', path: `${K}/` },
    'create API key',
    { name: 'newkey' },
    ['name', 'roles', 'expiresAt'],
    [
      ['unknown member', { name: 'newkey', admin: true }],
      ['unknown role', { name: 'newkey', roles: ['root'] }],
      ['expiresAt not a date', { name: 'newkey', expiresAt: 'tomorrow' }],
      ['expiresAt in the past', { name: 'newkey', expiresAt: '2001-01-01T00:00:00Z' }],
      ['bad name', { name: 'bad name' }],
      ['name too long', { name: 'k'.repeat(64) }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'POST', path: `${C}/` },
    'create cluster',
    validCluster,
    ['name', 'config', 'isDefault', 'prometheusURL'],
    [
      ['no name', { config: targetConfig }],
      ['no config', { name: 'newcluster' }],
      ['config and inCluster', { ...validCluster, inCluster: true }],
      ...['', 'a b', '../x', '-x', 'x'.repeat(254), 'x\u0000'].map(
        (n) => [`name ${JSON.stringify(n).slice(0, 20)}`, { ...validCluster, name: n }] as [string, unknown],
      ),
      ...['javascript:alert(1)', 'ftp://x/metrics', 'not a url', 'file:///etc/passwd'].map(
        (u) => [`prometheusURL ${u}`, { ...validCluster, prometheusURL: u }] as [string, unknown],
      ),
      ['duplicate name', { ...validCluster, name: CLUSTER }],
      ['config too long', { ...validCluster, config: 'a: b\n'.repeat(300_000) }],
      ...KUBECONFIGS.map(
        ([what, config]) => [`kubeconfig: ${what}`, { name: 'newcluster', config }] as [string, unknown],
      ),
    ],
  );
  jsonRoute(
    probes,
    { method: 'PUT', path: `${C}/${clusterId}` },
    'update cluster',
    { description: 'x' },
    ['name', 'enabled', 'config'],
    [
      ['unset the only default', { isDefault: false }],
      ['bad name', { name: 'a b' }],
      ['prometheusURL javascript:', { prometheusURL: 'javascript:alert(1)' }],
      ['inCluster with config', { inCluster: true, config: targetConfig }],
      ...KUBECONFIGS.map(([what, config]) => [`kubeconfig: ${what}`, { config }] as [string, unknown]),
    ],
  );
  jsonRoute(
    probes,
    { method: 'POST', path: '/api/auth/login/password', as: 'none' },
    'login',
    { username: 'x', password: 'y' },
    ['username', 'password'],
    [
      ['no password', { username: 'admin' }],
      ['empty strings', { username: '', password: '' }],
    ],
  );

  // Public bootstrap routes on the empty install namespace.
  jsonRoute(
    probes,
    { method: 'POST', path: `${U}/create_super_user`, as: 'none', onFresh: true },
    'create_super_user',
    validUser,
    ['username', 'password'],
    [
      ['no password', { username: 'root' }],
      ['bad username', { username: 'a/b', password: 'long-enough' }],
      ['password too short', { username: 'root', password: 'short' }],
    ],
  );
  jsonRoute(
    probes,
    { method: 'POST', path: `${C}/import`, as: 'none', onFresh: true },
    'import',
    { config: targetConfig },
    ['config', 'inCluster'],
    [
      ['neither config nor inCluster', {}],
      ['config and inCluster', { config: targetConfig, inCluster: true }],
      ...KUBECONFIGS.map(([what, config]) => [`kubeconfig: ${what}`, { config }] as [string, unknown]),
    ],
  );

  // Ids: every id route with every bad id (400), and unknown ids (404).
  const idRoutes: Array<[string, (id: string) => string, unknown]> = [
    ['PUT', (id) => `${U}/${id}`, { name: 'x' }],
    ['DELETE', (id) => `${U}/${id}`, undefined],
    ['POST', (id) => `${U}/${id}/reset_password`, { password: 'long-enough' }],
    ['POST', (id) => `${U}/${id}/enable`, { enabled: false }],
    ['GET', (id) => `${R}/${id}`, undefined],
    ['PUT', (id) => `${R}/${id}`, { description: 'x' }],
    ['DELETE', (id) => `${R}/${id}`, undefined],
    ['DELETE', (id) => `${K}/${id}`, undefined],
    ['PUT', (id) => `${C}/${id}`, { description: 'x' }],
    ['DELETE', (id) => `${C}/${id}`, undefined],
  ];
  for (const [method, path, body] of idRoutes) {
    for (const id of [...BAD_IDS, '424242'])
      probes.push({ what: `${method} ${path(':id')} with id ${id.slice(0, 20)}`, method, path: path(id), body });
  }
  probes.push({ what: 'delete yourself', method: 'DELETE', path: `${U}/${adminUserId}` });
  probes.push({ what: 'delete the default cluster', method: 'DELETE', path: `${C}/${clusterId}` });
  probes.push({ what: 'delete the built-in viewer role', method: 'DELETE', path: `${R}/${roleIds.viewer}` });
  for (const query of [
    'page=0',
    'page=-1',
    'size=1001',
    'size=abc',
    'sortBy=password',
    'sortOrder=sideways',
    'page=99999999999999999999',
  ]) {
    probes.push({ what: `list users ?${query}`, method: 'GET', path: `${U}/?${query}` });
  }

  // The resource gateway: paths, queries, bodies, patches, content types.
  const CM = `/api/v1/configmaps/${ns}`;
  for (const name of BAD_NAMES) {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
      probes.push({
        what: `${method} configmap named ${name.slice(0, 24)}`,
        method,
        path: `${CM}/${name}`,
        body: method === 'GET' || method === 'DELETE' ? undefined : { metadata: { name: 'keep' } },
      });
    }
  }
  for (const namespace of BAD_NAMESPACES) {
    probes.push({
      what: `list in namespace ${namespace.slice(0, 24)}`,
      method: 'GET',
      path: `/api/v1/configmaps/${namespace}`,
    });
    probes.push({
      what: `create in namespace ${namespace.slice(0, 24)}`,
      method: 'POST',
      path: `/api/v1/configmaps/${namespace}`,
      body: { metadata: { name: 'planted' } },
    });
    probes.push({
      what: `delete in namespace ${namespace.slice(0, 24)}`,
      method: 'DELETE',
      path: `/api/v1/configmaps/${namespace}/keep`,
    });
  }
  for (const resource of BAD_RESOURCES) {
    probes.push({ what: `list resource ${resource.slice(0, 24)}`, method: 'GET', path: `/api/v1/${resource}/${ns}` });
    probes.push({
      what: `create resource ${resource.slice(0, 24)}`,
      method: 'POST',
      path: `/api/v1/${resource}/${ns}`,
      body: { metadata: { name: 'planted' } },
    });
  }
  probes.push({ what: 'unknown resource', method: 'GET', path: `/api/v1/nosuchthings/${ns}` });
  probes.push({
    what: 'unknown custom resource',
    method: 'POST',
    path: `/api/v1/widgets.example.com/${ns}`,
    body: { metadata: { name: 'planted' } },
  });

  const planted = { metadata: { name: 'planted' }, data: { a: 'b' } };
  jsonRoute(
    probes,
    { method: 'POST', path: CM },
    'create configmap',
    planted,
    ['metadata', 'data'],
    [
      [
        'namespace in the body differs from the path',
        { ...planted, metadata: { name: 'planted', namespace: otherNs } },
      ],
      ['namespace kube-system in the body', { ...planted, metadata: { name: 'planted', namespace: 'kube-system' } }],
      ['kind Secret', { ...planted, kind: 'Secret' }],
      ['apiVersion apps/v1', { ...planted, apiVersion: 'apps/v1' }],
      ['kind not a string', { ...planted, kind: 7 }],
      ['no name', { data: { a: 'b' } }],
      ['invalid name (the cluster says 422)', { metadata: { name: 'Not_Valid' } }],
      ['data not a map (the cluster refuses)', { metadata: { name: 'planted' }, data: 'text' }],
      ['name that exists (409)', { metadata: { name: 'keep' } }],
    ],
  );
  probes.push({
    what: 'create configmap: broken YAML',
    method: 'POST',
    path: CM,
    raw: 'metadata: {name: [',
    headers: { 'content-type': 'application/yaml' },
  });
  probes.push({
    what: 'create cluster-scoped with a namespace',
    method: 'POST',
    path: '/api/v1/namespaces/_all',
    body: { metadata: { name: uniqueName('planted'), namespace: ns } },
  });
  probes.push({
    what: 'create namespaced in _all without a namespace',
    method: 'POST',
    path: '/api/v1/configmaps/_all',
    body: planted,
  });
  const keepPath = `${CM}/keep`;
  jsonRoute(
    probes,
    { method: 'PUT', path: keepPath },
    'replace configmap',
    { metadata: { name: 'keep', resourceVersion: '1' } },
    ['metadata'],
    [
      ['no resourceVersion', { metadata: { name: 'keep' }, data: { color: 'red' } }],
      ['name differs from the path', { metadata: { name: 'other', resourceVersion: '1' } }],
      ['namespace differs from the path', { metadata: { name: 'keep', namespace: otherNs, resourceVersion: '1' } }],
      ['stale resourceVersion (409)', { metadata: { name: 'keep', resourceVersion: '1' }, data: { color: 'red' } }],
      ['kind Pod', { kind: 'Pod', metadata: { name: 'keep', resourceVersion: '1' } }],
    ],
  );
  const patch = (what: string, query: string, body: unknown, contentType?: string) =>
    probes.push({
      what: `patch: ${what}`,
      method: 'PATCH',
      path: `${keepPath}${query}`,
      ...(typeof body === 'string' ? { raw: body } : { body }),
      headers: contentType ? { 'content-type': contentType } : undefined,
    });
  for (const [kind, raw] of MALFORMED.slice(0, 6)) patch(kind, '?patchType=merge', raw, 'application/json');
  patch('unknown patchType', '?patchType=xml', { data: { color: 'red' } });
  patch('JSON patch that is an object', '?patchType=json', { op: 'add', path: '/data/x', value: '1' });
  patch('JSON patch with an unknown op', '?patchType=json', [{ op: 'explode', path: '/data' }]);
  patch('JSON patch without a path', '?patchType=json', [{ op: 'add', value: 1 }]);
  patch('JSON patch with a relative path', '?patchType=json', [{ op: 'add', path: 'data/x', value: '1' }]);
  patch('JSON patch replace without a value', '?patchType=json', [{ op: 'replace', path: '/data/color' }]);
  patch('JSON patch whose test fails (the cluster says 422)', '?patchType=json', [
    { op: 'test', path: '/data/color', value: 'red' },
    { op: 'replace', path: '/data/color', value: 'red' },
  ]);
  patch('JSON patch removing what is not there', '?patchType=json', [{ op: 'remove', path: '/data/nothing' }]);
  patch('JSON patch moving the namespace', '?patchType=json', [
    { op: 'replace', path: '/metadata/namespace', value: otherNs },
  ]);
  patch('merge patch moving the namespace', '?patchType=merge', { metadata: { namespace: otherNs } });
  patch('merge patch renaming', '?patchType=merge', { metadata: { name: 'renamed' } });
  patch('merge patch that is an array', '?patchType=merge', [{ data: {} }]);
  patch('strategic patch that is a string', '', 'just text', 'application/strategic-merge-patch+json');
  patch('apply without fieldManager', '?patchType=apply', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'keep' },
  });
  patch('empty body', '?patchType=merge', '', 'application/merge-patch+json');
  patch('content type xml', '', '<data/>', 'application/xml');
  patch('body over the limit', '?patchType=merge', huge(), 'application/json');
  patch('merge patch on a missing object (404)', '?patchType=merge', { data: { a: 'b' } });
  probes[probes.length - 1].path = `${CM}/missing-object`;

  for (const query of ['limit=-1', 'limit=abc', 'watch=maybe', 'timeoutSeconds=-5', 'limit=1.5']) {
    probes.push({ what: `list ?${query}`, method: 'GET', path: `${CM}?${query}` });
  }
  for (const query of [
    'timeoutSeconds=0',
    'timeoutSeconds=601',
    'timeoutSeconds=abc',
    'force=maybe',
    'cascade=sideways',
    'wait=perhaps',
    'dryRun=Some',
  ]) {
    probes.push({ what: `delete ?${query}`, method: 'DELETE', path: `${keepPath}?${query}` });
  }
  for (const query of ['dryRun=Some', 'fieldManager=' + 'f'.repeat(300)]) {
    probes.push({ what: `create ?${query}`, method: 'POST', path: `${CM}?${query}`, body: planted });
  }
  probes.push({ what: 'delete a missing object (404)', method: 'DELETE', path: `${CM}/missing-object` });

  // Cluster selection.
  for (const [what, headers] of [
    ['unknown cluster', { 'x-cluster-name': 'nope' }],
    ['cluster name in another case', { 'x-cluster-name': CLUSTER.toUpperCase() }],
    ['overlong cluster name', { 'x-cluster-name': 'c'.repeat(300) }],
    ['cluster name with a path', { 'x-cluster-name': `${CLUSTER}/../x` }],
    ['malformed cluster cookie', { cookie: 'x-cluster-name=%E0%A4%A' }],
  ] as Array<[string, Record<string, string>]>) {
    probes.push({ what: `list: ${what}`, method: 'GET', path: CM, headers });
    probes.push({ what: `delete: ${what}`, method: 'DELETE', path: `${keepPath}`, headers });
    probes.push({ what: `overview: ${what}`, method: 'GET', path: '/api/v1/overview', headers });
  }
  probes.push({
    what: 'list: unknown cluster in the query',
    method: 'GET',
    path: `${CM}?x-cluster-name=nope`,
    headers: { 'x-cluster-name': '' },
  });

  // Credentials: missing, malformed, forged; and a caller without the right.
  for (const [what, headers] of [
    ['no credentials', {}],
    ['empty Bearer', { authorization: 'Bearer ' }],
    ['short key', { authorization: 'kl_1_short' }],
    ['unknown key id', { authorization: `kl_999999_${'A'.repeat(43)}` }],
    ['Kite-style key', { authorization: 'kite1-' }],
    ['forged session', { cookie: 'auth_token=v1.eyJ1aWQiOjF9.AAAA' }],
    ['basic auth', { authorization: 'Basic YWRtaW46YWRtaW4=' }],
  ] as Array<[string, Record<string, string>]>) {
    for (const [method, path, body] of [
      ['GET', `${U}/`, undefined],
      ['POST', `${U}/`, validUser],
      ['DELETE', `${U}/${userId}`, undefined],
      ['POST', CM, planted],
      ['DELETE', keepPath, undefined],
      ['POST', `${C}/`, validCluster],
    ] as Array<[string, string, unknown]>) {
      probes.push({ what: `${what}: ${method} ${path}`, method, path, body, headers, as: 'none' });
    }
  }
  for (const [method, path, body] of [
    ['GET', `${U}/`, undefined],
    ['POST', `${K}/`, { name: 'escalate', roles: ['admin'] }],
    ['POST', `${R}/${roleId}/assign`, { subjectType: 'user', subject: 'bystander' }],
    ['DELETE', keepPath, undefined],
    ['POST', CM, planted],
    ['GET', `/api/v1/configmaps/${otherNs}`, undefined],
    ['GET', '/api/v1/secrets/_all', undefined],
  ] as Array<[string, string, unknown]>) {
    probes.push({ what: `narrow key: ${method} ${path}`, method, path, body, as: 'narrow' });
  }
  probes.push({ what: 'unknown route', method: 'GET', path: '/api/v2/anything' });
  probes.push({ what: 'unknown admin route', method: 'PATCH', path: `${U}/` });
  return probes;
}

async function send(p: Probe): Promise<HttpResponse> {
  const base = p.onFresh ? fresh.url : main.url;
  const credentials = p.as === 'none' ? {} : p.as === 'narrow' ? narrow.headers : admin.headers;
  const headers: Record<string, string> = { 'x-cluster-name': CLUSTER, ...credentials, ...p.headers };
  if (p.as === 'none' && !p.onFresh) delete headers['x-cluster-name'];
  if (p.headers?.['x-cluster-name'] === undefined && p.headers?.cookie) delete headers['x-cluster-name'];
  if (p.raw !== undefined) headers['content-type'] ??= 'application/json';
  try {
    return await call(base, p.method, p.path, { body: p.body, raw: p.raw, headers });
  } catch (err) {
    // A body over the limit may be refused before it is read: the gateway closes the connection.
    return { status: -1, headers: new Headers(), body: undefined, text: String((err as Error).cause ?? err) };
  }
}

// ---------------------------------------------------------------- the state that must not change

type Snapshot = Record<string, unknown>;

/** What a host object is, without the fields the gateway's own status writers touch. */
function stable(item: any): unknown {
  const { resourceVersion: _rv, managedFields: _mf, generation: _g, ...metadata } = item.metadata ?? {};
  const { status: _status, metadata: _m, ...rest } = item;
  return { ...rest, metadata };
}

function listJson(kubeconfig: string, args: string[]): any[] {
  const res = kubectl(kubeconfig, [...args, '-o', 'json']);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return JSON.parse(res.stdout).items;
}

function hostSnapshot(gw: TestGateway): Snapshot {
  const snapshot: Snapshot = {};
  for (const kind of [
    'users.kiteline.io',
    'clusters.kiteline.io',
    'roles.kiteline.io',
    'apikeys.kiteline.io',
    'secrets',
    'configmaps',
  ]) {
    for (const item of listJson(gw.kubeconfig, ['-n', gw.namespace, 'get', kind]))
      snapshot[`${kind}/${item.metadata.name}`] = stable(item);
  }
  return snapshot;
}

/**
 * The target cluster: its namespaces (except the per-file ones, name-<8 hex>, that other test
 * files create and delete meanwhile) and every ConfigMap in the namespaces the corpus aims at,
 * resourceVersion included (nothing else writes there).
 */
function targetSnapshot(): Snapshot {
  const snapshot: Snapshot = {};
  for (const item of listJson(target, ['get', 'namespaces'])) {
    const name: string = item.metadata.name;
    if (/-[0-9a-f]{8}$/.test(name) && name !== ns && name !== otherNs) continue;
    snapshot[`namespace/${name}`] = item.metadata.uid;
  }
  for (const n of [ns, otherNs, 'default', 'kube-system']) {
    for (const item of listJson(target, ['-n', n, 'get', 'configmaps'])) {
      snapshot[`configmap/${n}/${item.metadata.name}`] = {
        uid: item.metadata.uid,
        rv: item.metadata.resourceVersion,
        data: item.data,
      };
    }
  }
  return snapshot;
}

// ---------------------------------------------------------------- the test

t.test('every hostile request gets a clear 4xx and changes nothing', async (t) => {
  const corpus = buildCorpus();
  t.ok(corpus.length >= 300, `the corpus has ${corpus.length} requests (at least 300)`);
  const before = { main: hostSnapshot(main), fresh: hostSnapshot(fresh), target: targetSnapshot() };

  const failures: string[] = [];
  const BATCH = 8;
  for (let i = 0; i < corpus.length; i += BATCH) {
    const batch = corpus.slice(i, i + BATCH);
    const answers = await Promise.all(batch.map(send));
    batch.forEach((probe, j) => {
      const res = answers[j];
      const body = res.body as { error?: unknown; reason?: unknown; code?: unknown } | undefined;
      const clear =
        res.status >= 400 &&
        res.status < 500 &&
        typeof body?.error === 'string' &&
        body.error.trim() !== '' &&
        body.code === res.status &&
        (body.reason === undefined || typeof body.reason === 'string') &&
        /application\/json/.test(res.headers.get('content-type') ?? '');
      if (!clear)
        failures.push(
          `${probe.what} (${probe.method} ${probe.path.slice(0, 80)}): ${res.status} ${res.text.slice(0, 200)}`,
        );
    });
    for (const gw of [main, fresh]) {
      const health = await call(gw.url, 'GET', '/healthz');
      if (health.status !== 200) failures.push(`after batch ${i / BATCH}: /healthz answered ${health.status}`);
    }
  }
  t.same(failures, [], 'every request: 4xx, JSON {error, reason, code} with a message');

  const after = { main: hostSnapshot(main), fresh: hostSnapshot(fresh), target: targetSnapshot() };
  t.same(after.main, before.main, 'the install namespace in the host cluster is unchanged');
  t.same(after.fresh, before.fresh, 'the empty install namespace is still empty of users and clusters');
  t.same(after.target, before.target, 'the target cluster is unchanged');
  const freshInit = await call(fresh.url, 'GET', '/api/v1/init_check');
  t.same(freshInit.body, { initialized: false, step: 0 }, 'the bootstrap routes are still open on the empty namespace');
  t.equal(
    (
      await call(main.url, 'GET', `/api/v1/configmaps/${ns}/keep`, {
        headers: { ...admin.headers, 'x-cluster-name': CLUSTER },
      })
    ).status,
    200,
    'the gateway still serves the target',
  );
});
