// A role limited to one namespace (and one cluster) cannot read, list, watch, create, update,
// patch or delete anything in another namespace by any route or query trick (issue 8, point 4):
// cluster-wide lists and watches, selectors, encoded path segments, body and patch namespaces,
// client Impersonate-* headers, cluster-name tricks, the overview. Checked against a real target
// cluster: every trick is refused (or confined to namespace A) and namespace B is unchanged.
import t from 'tap';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const gw = await startGateway(t, { logName: 'namespace-isolation' });
const admin = await bootstrapAdmin(gw);
const targetConfig = testKubeconfig('target-a');
const target = gw.kubeconfig.replace(/host\/kubeconfig$/, 'target-a/kubeconfig');
const CLUSTER = uniqueName('iso');
const OTHER_CLUSTER = uniqueName('iso-other');
await addReadyCluster(gw, admin, { name: CLUSTER, config: targetConfig, isDefault: true });
await addReadyCluster(gw, admin, { name: OTHER_CLUSTER, config: targetConfig });
const A = uniqueName('iso-a');
const B = uniqueName('iso-b');
for (const [n, value] of [
  [A, 'mine'],
  [B, 'theirs'],
]) {
  for (const args of [
    ['create', 'namespace', n],
    ['-n', n, 'create', 'configmap', 'cm', `--from-literal=owner=${value}`],
    ['-n', n, 'create', 'secret', 'generic', 'sec', `--from-literal=owner=${value}`],
  ]) {
    const res = kubectl(target, args);
    if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  }
}
t.teardown(() => {
  for (const n of [A, B]) kubectl(target, ['delete', 'namespace', n, '--wait=false']);
});
const role = uniqueName('only-a');
await createRole(gw, admin, { name: role, clusters: [CLUSTER], namespaces: [A], resources: ['*'], verbs: ['*'] });
const alice = await apiKeyWithRoles(gw, admin, uniqueName('alice'), [role]);

const as = (
  method: string,
  path: string,
  options: { body?: unknown; raw?: string; headers?: Record<string, string> } = {},
) =>
  call(gw.url, method, path, {
    ...options,
    headers: { 'x-cluster-name': CLUSTER, ...alice.headers, ...options.headers },
  });

/** Everything in namespace B that a leak could read or change. */
function namespaceB(): unknown {
  const res = kubectl(target, ['-n', B, 'get', 'configmaps,secrets', '-o', 'json']);
  return JSON.parse(res.stdout).items.map((i: any) => [
    i.kind,
    i.metadata.name,
    i.metadata.uid,
    i.metadata.resourceVersion,
  ]);
}

t.test('namespace A works: the role is not simply empty', async (t) => {
  t.equal((await as('GET', `/api/v1/configmaps/${A}/cm`)).body?.data?.owner, 'mine');
  t.equal((await as('GET', `/api/v1/secrets/${A}`)).status, 200);
  t.equal(
    (await as('POST', `/api/v1/configmaps/${A}?dryRun=All`, { body: { metadata: { name: 'probe' } } })).status,
    201,
  );
});

t.test('no route or query reaches namespace B', async (t) => {
  const before = namespaceB();
  const refused: Array<[string, string, { body?: unknown; raw?: string; headers?: Record<string, string> }?]> = [
    // reads, lists and watches
    ['GET', `/api/v1/configmaps/${B}/cm`],
    ['GET', `/api/v1/secrets/${B}/sec`],
    ['GET', `/api/v1/configmaps/${B}`],
    ['GET', `/api/v1/configmaps/${B}?watch=true`],
    ['GET', `/api/v1/configmaps/${B}/cm?watch=true`],
    ['GET', '/api/v1/configmaps'],
    ['GET', '/api/v1/configmaps/_all'],
    ['GET', '/api/v1/configmaps?watch=true'],
    ['GET', '/api/v1/configmaps/_all?watch=true'],
    ['GET', '/api/v1/pods'],
    ['GET', '/api/v1/pods/_all'],
    ['GET', '/api/v1/secrets'],
    ['GET', `/api/v1/configmaps/_all?fieldSelector=metadata.namespace%3D${A}`],
    ['GET', `/api/v1/configmaps/_all?labelSelector=owner%3Dmine`],
    ['GET', `/api/v1/configmaps?fieldSelector=metadata.namespace%3D${B}`],
    ['GET', `/api/v1/namespaces/_all/${B}`],
    ['GET', '/api/v1/namespaces/_all'],
    ['GET', `/api/v1/configmaps.v1/${B}`],
    ['GET', `/api/v1/configmap/${B}/cm`],
    ['GET', `/api/v1/events/${B}`],
    ['GET', `/api/v1/events.events.k8s.io/${B}`],
    // encoded and dotted path segments
    ['GET', `/api/v1/configmaps/${A}%2F..%2F${B}/cm`],
    ['GET', `/api/v1/configmaps/${A}/..%2F..%2F${B}%2Fconfigmaps%2Fcm`],
    ['GET', `/api/v1/configmaps/${A}/%2E%2E%2F${B}`],
    ['GET', `/api/v1/configmaps/%2E%2E/${B}`],
    ['GET', `/api/v1/configmaps/${A}%00${B}`],
    ['GET', `/api/v1/configmaps/${B.toUpperCase()}/cm`],
    // writes
    ['POST', `/api/v1/configmaps/${B}`, { body: { metadata: { name: 'planted' } } }],
    ['POST', `/api/v1/configmaps/${B}?dryRun=All`, { body: { metadata: { name: 'planted' } } }],
    ['POST', `/api/v1/configmaps/${A}`, { body: { metadata: { name: 'planted', namespace: B } } }],
    ['POST', '/api/v1/configmaps/_all', { body: { metadata: { name: 'planted', namespace: B } } }],
    [
      'POST',
      `/api/v1/configmaps/${A}`,
      { raw: `metadata: {name: planted, namespace: ${B}}`, headers: { 'content-type': 'application/yaml' } },
    ],
    [
      'PUT',
      `/api/v1/configmaps/${B}/cm`,
      { body: { metadata: { name: 'cm', resourceVersion: '1' }, data: { owner: 'alice' } } },
    ],
    [
      'PUT',
      `/api/v1/configmaps/${A}/cm`,
      { body: { metadata: { name: 'cm', namespace: B, resourceVersion: '1' }, data: { owner: 'alice' } } },
    ],
    ['PATCH', `/api/v1/configmaps/${B}/cm?patchType=merge`, { body: { data: { owner: 'alice' } } }],
    [
      'PATCH',
      `/api/v1/configmaps/${A}/cm?patchType=merge`,
      { body: { metadata: { namespace: B }, data: { owner: 'alice' } } },
    ],
    [
      'PATCH',
      `/api/v1/configmaps/${A}/cm?patchType=json`,
      { body: [{ op: 'replace', path: '/metadata/namespace', value: B }] },
    ],
    [
      'PATCH',
      `/api/v1/configmaps/${A}/cm?patchType=apply&fieldManager=alice`,
      {
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: B }, data: { owner: 'alice' } },
      },
    ],
    [
      'PATCH',
      `/api/v1/configmaps/${B}/cm?patchType=apply&fieldManager=alice`,
      { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm' }, data: { owner: 'alice' } } },
    ],
    ['DELETE', `/api/v1/configmaps/${B}/cm`],
    ['DELETE', `/api/v1/configmaps/${B}/cm?dryRun=All`],
    ['DELETE', `/api/v1/namespaces/_all/${B}`],
    // client Impersonate-* headers do not change who is asking
    [
      'GET',
      `/api/v1/configmaps/${B}/cm`,
      { headers: { 'impersonate-user': 'system:admin', 'impersonate-group': 'system:masters' } },
    ],
    [
      'DELETE',
      `/api/v1/configmaps/${B}/cm`,
      { headers: { 'impersonate-user': 'system:admin', 'impersonate-group': 'system:masters' } },
    ],
    // cluster-name tricks: another cluster, other spellings, other carriers
    ['GET', `/api/v1/configmaps/${A}/cm`, { headers: { 'x-cluster-name': OTHER_CLUSTER } }],
    ['GET', `/api/v1/configmaps/${A}/cm`, { headers: { 'x-cluster-name': CLUSTER.toUpperCase() } }],
    ['GET', `/api/v1/configmaps/${A}/cm`, { headers: { 'x-cluster-name': `${CLUSTER}%20` } }],
    ['GET', `/api/v1/configmaps/${A}/cm?x-cluster-name=${OTHER_CLUSTER}`, { headers: { 'x-cluster-name': '' } }],
    [
      'GET',
      `/api/v1/configmaps/${A}/cm`,
      { headers: { 'x-cluster-name': '', cookie: `x-cluster-name=${OTHER_CLUSTER}` } },
    ],
    // the overview counts every namespace
    ['GET', '/api/v1/overview'],
    ['GET', '/api/v1/overview', { headers: { 'x-cluster-name': OTHER_CLUSTER } }],
  ];
  for (const [method, path, options] of refused) {
    const res = await as(method, path, options);
    const shownHeaders = options?.headers ? ` ${JSON.stringify(options.headers)}` : '';
    const shownBody = options?.body ? ` ${JSON.stringify(options.body).slice(0, 80)}` : '';
    const label = `${method} ${path}${shownHeaders}${shownBody}`;
    t.ok(res.status >= 400 && res.status < 500, `refused (${res.status}): ${label}`);
    t.notOk(res.text.includes('theirs'), `nothing of B in the answer: ${label}`);
  }
  t.same(namespaceB(), before, 'namespace B is unchanged');
  t.equal(
    kubectl(target, ['-n', A, 'get', 'configmap', 'planted']).status === 0,
    false,
    'nothing planted in A either (the mismatched bodies were refused)',
  );
});

t.test('selectors stay inside namespace A', async (t) => {
  for (const query of [
    `fieldSelector=metadata.namespace%3D${B}`,
    'labelSelector=owner%3Dtheirs',
    `fieldSelector=metadata.namespace!%3D${A}`,
  ]) {
    const res = await as('GET', `/api/v1/configmaps/${A}?${query}`);
    t.equal(res.status, 200, query);
    t.ok(
      res.body.items.every((i: any) => i.metadata.namespace === A),
      `only A's objects for ${query}`,
    );
    t.notOk(res.text.includes('theirs'), `nothing of B for ${query}`);
  }
  const clusters = await as('GET', '/api/v1/clusters');
  t.same(
    clusters.body.map((c: { name: string }) => c.name),
    [CLUSTER],
    "the cluster list shows only the role's cluster",
  );
});
