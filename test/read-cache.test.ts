// Cached reads against a real target (src/resources/cache/, docs/read-cache.md): hot resources are
// answered from a watch cache on both doors (/api/v1 and /k8s/clusters), a consistent read is
// never older than a direct read made when it arrived (checked under concurrent writes), what the
// cache cannot honour goes to the cluster, the target's own RBAC decides every cached answer (and a
// revoked RoleBinding takes effect at once), kiteline's host is never cached, the same holds on the
// older minor (target-b), and a cluster's caches stay within their bound (evictions counted).
import t from 'tap';
import { Agent, request } from 'undici';
import { installWidgetCrd, kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

// Reads wait up to 3 s for the cache to be fresh: the target is written by other test files at
// the same time, so the collection's resourceVersion is mostly ahead of a quiet resource's cache
// until the next bookmark (docs/read-cache.md, "The limit of a client-side cache"). Small consistent
// answers are cached too (by default they go to the cluster: checking costs as much).
const gw = await startGateway(t, {
  logName: 'read-cache',
  env: { KITELINE_READ_CACHE_WAIT_MS: '3000', KITELINE_READ_CACHE_MIN_CONSISTENT_KIB: '0' },
});
const admin = await bootstrapAdmin(gw);
const CLUSTER = uniqueName('cached');
await addReadyCluster(gw, admin, { name: CLUSTER, config: testKubeconfig('target-a'), impersonate: true });
const target = await testControlPlane('target-a');
const ns = uniqueName('cached');
const other = uniqueName('cached-other');
// No assertion before the last top-level await: tap would end the file's test at it.
const reader = uniqueName('reader');
const key = await apiKeyWithRoles(gw, admin, reader, ['admin']);
const configMaps = Array.from({ length: 20 }, (_, i) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `cm-${i}`, namespace: ns, labels: { app: 'c' } },
  data: { n: String(i) },
}));
for (const name of [ns, other]) t.equal(kubectl(target.kubeconfigPath, ['create', 'namespace', name]).status, 0);
t.equal(
  kubectl(
    target.kubeconfigPath,
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: configMaps }),
  ).status,
  0,
);
// The cluster impersonates: the reader reads what the target's RBAC gives kiteline:apikey:<name>.
t.equal(
  kubectl(target.kubeconfigPath, [
    'create',
    'clusterrolebinding',
    `${reader}-view`,
    '--clusterrole=view',
    `--user=kiteline:apikey:${reader}`,
  ]).status,
  0,
);
t.teardown(() => {
  kubectl(target.kubeconfigPath, ['delete', 'clusterrolebinding', `${reader}-view`]);
  for (const name of [ns, other]) kubectl(target.kubeconfigPath, ['delete', 'namespace', name, '--wait=false']);
});
const H = { ...key.headers, 'x-cluster-name': CLUSTER };
const PROXY = `/k8s/clusters/${CLUSTER}`;

/** Answers of one outcome on this cluster so far (kiteline_read_cache_reads_total). */
async function outcomes(outcome: string, cluster = CLUSTER): Promise<number> {
  const text = await gw.services.metrics.scrape();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`kiteline_read_cache_reads_total{cluster="${cluster}",outcome="${outcome}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Reads until an answer comes from the cache (the resource turns hot, its cache lists, RBAC watches run). */
async function untilCached(path: string, headers: Record<string, string>): Promise<void> {
  await eventually(
    `${path} answered from the cache`,
    async () => (await call(gw.url, 'GET', path, { headers })).headers.get('x-kiteline-cache') === 'hit',
    30_000,
    100,
  );
}

/** JSON calls straight to a test plane with its admin token (not through kiteline); closed at teardown. */
function directClient(plane: { server: string; token: string; caPem: string }) {
  const agent = new Agent({ connect: { ca: plane.caPem } });
  t.teardown(() => agent.close());
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await request(`${plane.server}${path}`, {
      method,
      dispatcher: agent,
      headers: {
        authorization: `Bearer ${plane.token}`,
        accept: 'application/json',
        ...(body ? { 'content-type': 'application/merge-patch+json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await res.body.json();
    if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode}`);
    return json;
  };
}
const directJson = directClient(target);

t.test('hot lists and objects are answered from the cache on both doors, as the cluster answers them', async (t) => {
  await untilCached(`/api/v1/configmaps/${ns}`, H);
  const cached = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}?labelSelector=app%3Dc`, { headers: H });
  const fromCluster = await directJson('GET', `/api/v1/namespaces/${ns}/configmaps?labelSelector=app%3Dc`);
  t.equal(cached.headers.get('x-kiteline-cache'), 'hit');
  t.equal(cached.body.kind, 'ConfigMapList');
  t.same(
    cached.body.items.map((o: any) => [o.metadata.name, o.metadata.resourceVersion, o.data.n]),
    fromCluster.items.map((o: any) => [o.metadata.name, o.metadata.resourceVersion, o.data.n]),
    'the same objects, versions and data, in the same order',
  );
  t.match(cached.body.metadata.resourceVersion, /^[0-9]+$/, 'the list carries the resourceVersion it is current at');
  const byName = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}?fieldSelector=metadata.name%3Dcm-3`, {
    headers: H,
  });
  t.same(
    byName.body.items.map((o: any) => o.metadata.name),
    ['cm-3'],
    'a field selector on the name',
  );
  const one = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}/cm-7`, { headers: H });
  t.equal(one.headers.get('x-kiteline-cache'), 'hit', 'a GET of one object too');
  t.equal(one.body.kind, 'ConfigMap');
  t.equal(one.body.data.n, '7');
  const missing = await call(gw.url, 'GET', `/api/v1/configmaps/${ns}/no-such`, { headers: H });
  t.equal(missing.status, 404, 'a missing object is a 404 as the cluster says it');

  await untilCached(`${PROXY}/api/v1/namespaces/${ns}/configmaps`, key.headers);
  const proxied = await call(gw.url, 'GET', `${PROXY}/api/v1/namespaces/${ns}/configmaps/cm-2`, {
    headers: key.headers,
  });
  t.equal(proxied.headers.get('x-kiteline-cache'), 'hit', '/k8s/clusters GETs too');
  t.equal(proxied.body.metadata.name, 'cm-2');
  const notFound = await call(gw.url, 'GET', `${PROXY}/api/v1/namespaces/${ns}/configmaps/no-such`, {
    headers: key.headers,
  });
  t.equal(notFound.status, 404);
  t.equal(notFound.body.kind, 'Status', 'a Kubernetes Status, as kubectl expects it');
  t.equal(notFound.body.reason, 'NotFound');
});

t.test("a custom resource's list has the kind its CRD names (listKind), as the cluster's", async (t) => {
  const group = `${uniqueName('lk')}.example.com`;
  installWidgetCrd(t, target.kubeconfigPath, group, 'WidgetCollection');
  const role = `${reader}-widgets`;
  const rbac = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: role },
      rules: [{ apiGroups: [group], resources: ['widgets'], verbs: ['get', 'list', 'watch'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: `kiteline:apikey:${reader}` }],
    },
    ...['w1', 'w2'].map((name) => ({ apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name, namespace: ns } })),
  ];
  t.teardown(() => kubectl(target.kubeconfigPath, ['delete', 'clusterrole,clusterrolebinding', role]));
  const applied = kubectl(
    target.kubeconfigPath,
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: rbac }),
  );
  t.equal(applied.status, 0, applied.stderr);
  const path = `${PROXY}/apis/${group}/v1/namespaces/${ns}/widgets`;
  await untilCached(path, key.headers);
  const cached = await call(gw.url, 'GET', path, { headers: key.headers });
  t.equal(cached.headers.get('x-kiteline-cache'), 'hit');
  t.equal(cached.body.kind, 'WidgetCollection', "the list's kind is the CRD's listKind");
  t.equal(cached.body.apiVersion, `${group}/v1`);
  t.same(
    cached.body.items.map((o: any) => o.metadata.name),
    ['w1', 'w2'],
  );
});

t.test('what the cache cannot honour goes to the cluster', async (t) => {
  const base = `${PROXY}/api/v1/namespaces/${ns}/configmaps`;
  await untilCached(base, key.headers);
  const paged = await call(gw.url, 'GET', `${base}?limit=5`, { headers: key.headers });
  t.equal(paged.headers.get('x-kiteline-cache'), null, 'a page smaller than the list');
  t.ok(paged.body.metadata.continue, 'comes from the cluster, with its continue token');
  const next = await call(
    gw.url,
    'GET',
    `${base}?limit=5&continue=${encodeURIComponent(paged.body.metadata.continue)}`,
    {
      headers: key.headers,
    },
  );
  t.equal(next.status, 200);
  t.equal(next.headers.get('x-kiteline-cache'), null, 'a continue token too');
  const exact = await call(
    gw.url,
    'GET',
    `${base}?resourceVersion=${paged.body.metadata.resourceVersion}&resourceVersionMatch=Exact`,
    { headers: key.headers },
  );
  t.equal(exact.headers.get('x-kiteline-cache'), null, 'an Exact read too');
  const table = await call(gw.url, 'GET', base, {
    headers: { ...key.headers, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
  });
  t.equal(table.headers.get('x-kiteline-cache'), null, "kubectl get's Table too");
  t.equal(table.body.kind, 'Table');
  const whole = await call(gw.url, 'GET', `${base}?limit=500`, { headers: key.headers });
  t.equal(whole.headers.get('x-kiteline-cache'), 'hit', 'a limit the whole list fits in is answered (no continue)');
  t.notOk(whole.body.metadata.continue);
  const any = await call(gw.url, 'GET', `${base}?resourceVersion=0`, { headers: key.headers });
  t.equal(any.headers.get('x-kiteline-cache'), 'hit', 'resourceVersion=0 at once');
  const badSelector = await call(gw.url, 'GET', `${base}?labelSelector=${encodeURIComponent('a in (b')}`, {
    headers: key.headers,
  });
  t.equal(badSelector.status, 400, "a selector the cache does not read gets the cluster's own answer");
});

t.test('a consistent read is never older than a direct read made when it arrived (concurrent writes)', async (t) => {
  const objectPath = `/api/v1/namespaces/${ns}/configmaps/cm-0`;
  await untilCached(`/api/v1/configmaps/${ns}/cm-0`, H);
  let stop = false;
  let written = 0;
  const writer = (async () => {
    while (!stop) await directJson('PATCH', objectPath, { data: { n: String(++written + 1000) } });
  })();
  let hits = 0;
  let checked = 0;
  try {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (hits < 40 || checked < 200)) {
      const before = Number((await directJson('GET', objectPath)).data.n);
      const [viaGet, viaList, viaProxy] = await Promise.all([
        call(gw.url, 'GET', `/api/v1/configmaps/${ns}/cm-0`, { headers: H }),
        call(gw.url, 'GET', `/api/v1/configmaps/${ns}?fieldSelector=metadata.name%3Dcm-0`, { headers: H }),
        call(gw.url, 'GET', `${PROXY}${objectPath}`, { headers: key.headers }),
      ]);
      const seen = [viaGet.body.data.n, viaList.body.items[0].data.n, viaProxy.body.data.n].map(Number);
      for (const [i, answer] of [viaGet, viaList, viaProxy].entries()) {
        if (answer.headers.get('x-kiteline-cache') === 'hit') hits++;
        if (seen[i] < before) t.fail(`an answer (n=${seen[i]}) older than a direct read before it (n=${before})`);
      }
      checked += 3;
    }
  } finally {
    stop = true;
    await writer;
  }
  t.ok(written > 20, `the object was written meanwhile (${written} writes)`);
  t.ok(hits > 0, `${hits} of ${checked} answers came from the cache, none older than the direct read`);
});

t.test('a write that finished before a read began is always seen, also when the read is cached', async (t) => {
  // Without the freshness rule the cache answers before the write's watch event reaches it
  // (checked: with fresh() skipped, this fails).
  const objectPath = `/api/v1/namespaces/${ns}/configmaps/cm-1`;
  await untilCached(`/api/v1/configmaps/${ns}/cm-1`, H);
  let hits = 0;
  let stale = 0;
  for (let n = 1; n <= 40; n++) {
    await directJson('PATCH', objectPath, { data: { n: `w${n}` } });
    const got = await call(gw.url, 'GET', n % 2 ? `/api/v1/configmaps/${ns}/cm-1` : `${PROXY}${objectPath}`, {
      headers: n % 2 ? H : key.headers,
    });
    if (got.headers.get('x-kiteline-cache') === 'hit') hits++;
    if (got.body.data?.n !== `w${n}`) stale++;
  }
  t.equal(stale, 0, 'no answer missed the write before it');
  t.ok(hits >= 10, `${hits} of 40 came from the cache (each waited until the cache was fresh)`);
});

t.test("the target's RBAC decides every cached answer; a revoked binding takes effect at once", async (t) => {
  const name = uniqueName('limited');
  const limited = await apiKeyWithRoles(gw, admin, name, ['admin']);
  const LH = { ...limited.headers, 'x-cluster-name': CLUSTER };
  const list = `/api/v1/configmaps/${ns}`;
  await untilCached(list, H);
  t.equal((await call(gw.url, 'GET', list, { headers: LH })).status, 403, 'no binding on the target: 403');
  t.equal((await call(gw.url, 'GET', `${list}/cm-1`, { headers: LH })).status, 403);
  t.equal(
    (await call(gw.url, 'GET', `${PROXY}/api/v1/namespaces/${ns}/configmaps`, { headers: limited.headers })).status,
    403,
    'on /k8s/clusters too',
  );
  const binding = `${name}-view`;
  t.equal(
    kubectl(target.kubeconfigPath, [
      'create',
      'rolebinding',
      binding,
      '--clusterrole=view',
      `--user=kiteline:apikey:${name}`,
      '-n',
      ns,
    ]).status,
    0,
  );
  await untilCached(list, LH);
  t.pass('bound: answered from the cache');
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/configmaps/${other}`, { headers: LH })).status,
    403,
    'the binding is for one namespace: another is still refused',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/configmaps/_all`, { headers: LH })).status,
    403,
    'and all namespaces too',
  );
  t.equal(kubectl(target.kubeconfigPath, ['delete', 'rolebinding', binding, '-n', ns]).status, 0);
  await eventually(
    'the revoked binding to refuse',
    async () => (await call(gw.url, 'GET', list, { headers: LH })).status === 403,
    3000,
    20,
  );
  t.pass('refused within a few seconds of the delete (decisions are dropped on RBAC changes)');
  t.ok((await outcomes('target_denied')) > 0, 'counted as target_denied');
});

t.test('a one-namespace role never gets a cluster-scoped list through a namespace path', async (t) => {
  // Registered without impersonation: kiteline's roles alone decide, the strictest case.
  const plainCluster = uniqueName('cached-plain');
  await addReadyCluster(gw, admin, { name: plainCluster, config: testKubeconfig('target-a') });
  const role = uniqueName('one-ns');
  await createRole(gw, admin, {
    name: role,
    clusters: ['*'],
    namespaces: [ns],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const narrow = await apiKeyWithRoles(gw, admin, uniqueName('one-ns-key'), [role]);
  // The admin makes nodes hot, so a cache exists.
  await untilCached(`/k8s/clusters/${plainCluster}/api/v1/nodes`, key.headers);
  for (const path of [`/api/v1/namespaces/${ns}/nodes`, `/api/v1/namespaces/${ns}/nodes/target-a-node`]) {
    for (let i = 0; i < 4; i++) {
      const res = await call(gw.url, 'GET', `/k8s/clusters/${plainCluster}${path}`, { headers: narrow.headers });
      t.equal(res.status, 404, `${path}: the cluster's 404, not the cluster's nodes`);
      t.equal(res.headers.get('x-kiteline-cache'), null);
    }
  }
  const direct = await call(gw.url, 'GET', `/k8s/clusters/${plainCluster}/api/v1/nodes`, { headers: narrow.headers });
  t.equal(direct.status, 403, 'and the nodes themselves are refused by the role');
});

t.test('a caller the target gives nothing cannot make a resource hot', async (t) => {
  const stranger = await apiKeyWithRoles(gw, admin, uniqueName('stranger'), ['admin']);
  const headers = { ...stranger.headers, 'x-cluster-name': CLUSTER };
  const before = await outcomes('cold');
  for (let i = 0; i < 6; i++) {
    const res = await call(gw.url, 'GET', '/api/v1/limitranges/_all', { headers });
    t.equal(res.status, 403, "the target's own 403");
  }
  t.ok((await outcomes('cold')) >= before + 6, 'every read found no cache: none was started for them');
  const res = await call(gw.url, 'GET', '/api/v1/limitranges/_all', { headers: H });
  t.equal(res.headers.get('x-kiteline-cache'), null, 'the next read of a caller the target allows still finds none');
});

t.test("kiteline's own host cluster is never answered from the cache", async (t) => {
  const host = uniqueName('host-cached');
  await addReadyCluster(gw, admin, { name: host, config: testKubeconfig('host') });
  const headers = { ...H, 'x-cluster-name': host };
  for (let i = 0; i < 5; i++) {
    const res = await call(gw.url, 'GET', '/api/v1/configmaps/default', { headers });
    t.equal(res.headers.get('x-kiteline-cache'), null);
  }
  t.ok((await outcomes('host', host)) >= 5, 'counted as host');
});

t.test('on the older minor (target-b): the same answers, and a write before a read is seen', async (t) => {
  // target-b runs scripts/kubernetes/versions' OLDER release: its watch bookmarks and list
  // resourceVersions are what the cache relies on too.
  const older = await testControlPlane('target-b');
  const name = uniqueName('cached-older');
  await addReadyCluster(gw, admin, { name, config: testKubeconfig('target-b') });
  const olderNs = uniqueName('cached-older');
  t.equal(kubectl(older.kubeconfigPath, ['create', 'namespace', olderNs]).status, 0);
  t.teardown(() => kubectl(older.kubeconfigPath, ['delete', 'namespace', olderNs, '--wait=false']));
  const items = configMaps.slice(0, 5).map((cm) => ({ ...cm, metadata: { ...cm.metadata, namespace: olderNs } }));
  const applied = kubectl(
    older.kubeconfigPath,
    ['apply', '-f', '-'],
    JSON.stringify({ kind: 'List', apiVersion: 'v1', items }),
  );
  t.equal(applied.status, 0, applied.stderr);
  const headers = { ...key.headers, 'x-cluster-name': name };
  await untilCached(`/api/v1/configmaps/${olderNs}`, headers);

  const directOlder = directClient(older);
  const cached = await call(gw.url, 'GET', `/api/v1/configmaps/${olderNs}`, { headers });
  const fromCluster = await directOlder('GET', `/api/v1/namespaces/${olderNs}/configmaps?labelSelector=app%3Dc`);
  t.equal(cached.headers.get('x-kiteline-cache'), 'hit');
  t.same(
    cached.body.items
      .filter((o: any) => o.metadata.labels?.app === 'c')
      .map((o: any) => [o.metadata.name, o.metadata.resourceVersion]),
    fromCluster.items.map((o: any) => [o.metadata.name, o.metadata.resourceVersion]),
    'the objects and versions the cluster has',
  );
  let stale = 0;
  let hits = 0;
  for (let n = 1; n <= 10; n++) {
    await directOlder('PATCH', `/api/v1/namespaces/${olderNs}/configmaps/cm-1`, { data: { n: `older${n}` } });
    const got = await call(gw.url, 'GET', `/api/v1/configmaps/${olderNs}/cm-1`, { headers });
    if (got.headers.get('x-kiteline-cache') === 'hit') hits++;
    if (got.body.data?.n !== `older${n}`) stale++;
  }
  t.equal(stale, 0, 'no answer missed the write before it');
  t.ok(hits >= 1, `${hits} of 10 came from the cache`);
});

t.test("a cluster's caches stay within their bound; evictions are counted and reads still answered", async (t) => {
  const small = await startGateway(t, {
    logName: 'read-cache-small',
    env: { KITELINE_READ_CACHE_MAX_OBJECTS: '25', KITELINE_READ_CACHE_MIN_CONSISTENT_KIB: '0' },
  });
  const smallAdmin = await bootstrapAdmin(small);
  const name = uniqueName('bounded');
  await addReadyCluster(small, smallAdmin, { name, config: testKubeconfig('target-a') });
  const headers = { ...smallAdmin.headers, 'x-cluster-name': name };
  const evictions = async () => {
    const text = await small.services.metrics.scrape();
    const line = text.split('\n').find((l) => l.startsWith(`kiteline_read_cache_evictions_total{cluster="${name}"}`));
    return line ? Number(line.split(' ').pop()) : 0;
  };
  // The cache of ConfigMaps holds every namespace's: more than 25 on this cluster (21 in ns alone).
  await eventually(
    'the ConfigMaps cache to be evicted',
    async () => {
      const res = await call(small.url, 'GET', `/api/v1/configmaps/${ns}`, { headers });
      if (res.status !== 200 || res.body.items.length !== 21) throw new Error(`bad answer ${res.status}`);
      if (res.headers.get('x-kiteline-cache') === 'hit') throw new Error('answered from a cache over its bound');
      return (await evictions()) > 0;
    },
    15_000,
    100,
  );
  t.pass('counted in kiteline_read_cache_evictions_total');
  for (let i = 0; i < 3; i++) {
    const res = await call(small.url, 'GET', `/api/v1/configmaps/${ns}`, { headers });
    t.equal(res.body.items.length, 21, 'and the list is still answered, by the cluster');
    t.equal(res.headers.get('x-kiteline-cache'), null);
  }
  await eventually(
    'a small resource to be cached within the bound',
    async () =>
      (await call(small.url, 'GET', '/api/v1/priorityclasses/_all', { headers })).headers.get('x-kiteline-cache') ===
      'hit',
    15_000,
    100,
  );
  t.pass('a small resource of the same cluster is still cached');
});
