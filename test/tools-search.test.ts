// GET /api/v1/search on target-a (and on the host plane registered as a cluster of itself): objects
// found by a part of their name, by a label value and by `key=value`, a kind prefix, the namespace
// parameter and the limit; Kite's answer shape with the object's uid; a new object appears and a
// deleted one disappears through the index's watches; a role limited to one namespace sees only
// that namespace's objects, the built-in viewer never a Secret; on the host, nothing of kiteline's
// install namespace; bad q and limit 400, anonymous 401, an unknown cluster 404. Then the index
// itself: at most its limit of objects (and partial then), stopped when idle, started again.
import t from 'tap';
import { createLogger } from '../src/log.js';
import { SearchIndexes } from '../src/tools/search-index.js';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

interface Result {
  id: string;
  name: string;
  namespace?: string;
  resourceType: string;
  createdAt: string;
}
interface Answer {
  results: Result[];
  total: number;
  partial: boolean;
}

const gw = await startGateway(t, { logName: 'tools-search' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
const kc = (await testControlPlane('target-a')).kubeconfigPath;
const ns = uniqueName('search');
const other = uniqueName('search-other');
for (const name of [ns, other]) {
  t.equal(kubectl(kc, ['create', 'namespace', name]).status, 0);
  t.teardown(() => kubectl(kc, ['delete', 'namespace', name, '--wait=false']));
}
/** In every name of this test, so no other test's object matches. */
const tok = uniqueName('needle');
const labelValue = uniqueName('tier');

function k(namespace: string, args: string[], input?: string): string {
  const res = kubectl(kc, ['-n', namespace, ...args], input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}
const uidOf = (namespace: string, kind: string, name: string) =>
  k(namespace, ['get', kind, name, '-o', 'jsonpath={.metadata.uid}']);

const objects = [
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: `${tok}-web`, labels: { tier: labelValue } },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: tok } },
      template: {
        metadata: { labels: { app: tok } },
        spec: { containers: [{ name: 'web', image: 'kiteline.local/busybox:1' }] },
      },
    },
  },
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `${tok}-settings`, labels: { tier: labelValue } },
    data: { a: 'b' },
  },
  { apiVersion: 'v1', kind: 'Secret', metadata: { name: `${tok}-secret` }, stringData: { password: 'x' } },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${tok}-pod` },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'main', image: 'kiteline.local/busybox:1', imagePullPolicy: 'Never', command: ['sleep', '3600'] },
      ],
    },
  },
];
k(ns, ['apply', '-f', '-'], objects.map((o) => JSON.stringify(o)).join('\n'));
k(other, ['create', 'configmap', `${tok}-elsewhere`, '--from-literal=a=b']);

/** GET /api/v1/search?<query> as the caller (null: anonymous), on the cluster (else the default). */
const search = (query: string, caller: Caller | null = admin, cluster?: string) =>
  call<Answer & { code?: number }>(gw.url, 'GET', `/api/v1/search?${query}`, {
    headers: { ...caller?.headers, ...(cluster ? { 'x-cluster-name': cluster } : {}) },
  });
const q = (text: string) => `q=${encodeURIComponent(text)}`;
/** "resourceType namespace/name" of each result, in answer order. */
const found = (answer: Answer) => answer.results.map((r) => `${r.resourceType} ${r.namespace ?? ''}/${r.name}`);
/** Searches until the answer's results (as `found` shows them, sorted) are exactly `expected`. */
async function searchUntil(
  query: string,
  expected: string[],
  caller: Caller = admin,
  cluster?: string,
): Promise<Answer> {
  let last: unknown;
  try {
    return await eventually(
      `search ${query} to find ${expected.join(', ')}`,
      async () => {
        const res = await search(query, caller, cluster);
        last = res.status === 200 ? found(res.body) : res.text;
        return res.status === 200 && JSON.stringify(found(res.body).sort()) === JSON.stringify([...expected].sort())
          ? res.body
          : undefined;
      },
      30_000,
      200,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last answer: ${JSON.stringify(last)}`);
  }
}

const everything = [
  `deployments ${ns}/${tok}-web`,
  `pods ${ns}/${tok}-pod`,
  `configmaps ${ns}/${tok}-settings`,
  `secrets ${ns}/${tok}-secret`,
  `configmaps ${other}/${tok}-elsewhere`,
];

t.test('finds a Deployment, a ConfigMap, a Pod and a Secret by part of their name, in Kite’s shape', async (t) => {
  const answer = await searchUntil(q(tok.toUpperCase()), everything);
  t.equal(answer.total, 5);
  t.equal(answer.partial, false, 'the index is complete once its first lists are in');
  t.same(
    found(answer),
    [
      `deployments ${ns}/${tok}-web`,
      `pods ${ns}/${tok}-pod`,
      `configmaps ${ns}/${tok}-settings`,
      `configmaps ${other}/${tok}-elsewhere`,
      `secrets ${ns}/${tok}-secret`,
    ],
    'in Kite’s kind order',
  );
  const deployment = answer.results[0];
  t.same(Object.keys(deployment).sort(), ['createdAt', 'id', 'name', 'namespace', 'resourceType']);
  t.equal(deployment.id, uidOf(ns, 'deployment', `${tok}-web`), 'id is the uid');
  t.equal(
    deployment.createdAt,
    k(ns, ['get', 'deployment', `${tok}-web`, '-o', 'jsonpath={.metadata.creationTimestamp}']),
  );

  t.same(found((await search(q(`${tok}-sett`))).body), [`configmaps ${ns}/${tok}-settings`], 'a longer part finds one');
  const pod = (await search(q(`${tok}-pod`))).body.results;
  t.same(
    pod.map((r) => r.id),
    [uidOf(ns, 'pod', `${tok}-pod`)],
    'the Pod by its whole name',
  );
});

t.test('by a label value, by key=value and key:value; a kind prefix; namespace; limit', async (t) => {
  const labelled = [`deployments ${ns}/${tok}-web`, `configmaps ${ns}/${tok}-settings`];
  t.same(found((await search(q(labelValue))).body), labelled, 'a label value');
  t.same(found((await search(q(`tier=${labelValue}`))).body), labelled, 'key=value');
  t.same(found((await search(q(`tier: ${labelValue}`))).body), labelled, 'key:value');
  t.same(found((await search(q(`app=${labelValue}`))).body), [], 'another key with that value matches nothing');
  t.same(
    found((await search(q(`cm ${tok}`))).body),
    [`configmaps ${ns}/${tok}-settings`, `configmaps ${other}/${tok}-elsewhere`],
    'cm: ConfigMaps only',
  );
  t.same(found((await search(q(`deploy ${tok}`))).body), [`deployments ${ns}/${tok}-web`], 'deploy: Deployments only');
  t.same(
    found((await search(`${q(tok)}&namespace=${other}`)).body),
    [`configmaps ${other}/${tok}-elsewhere`],
    'namespace keeps one namespace',
  );
  t.equal((await search(`${q(tok)}&namespace=_all`)).body.total, 5, '_all: every namespace');
  const limited = (await search(`${q(tok)}&limit=2`)).body;
  t.same(found(limited), [`deployments ${ns}/${tok}-web`, `pods ${ns}/${tok}-pod`], 'limit keeps the first results');
  t.equal(limited.total, 5, 'total counts every match');
  const exact = (await search(q(`${tok}-web`))).body;
  t.same(found(exact), [`deployments ${ns}/${tok}-web`], 'an exact name');
});

t.test('a new object appears and a deleted one disappears, through the watch', async (t) => {
  k(ns, ['create', 'configmap', `${tok}-late`, '--from-literal=a=b']);
  await searchUntil(q(`${tok}-late`), [`configmaps ${ns}/${tok}-late`]);
  t.pass('the new ConfigMap is found');
  k(ns, ['label', 'configmap', `${tok}-late`, `tier=${labelValue}`]);
  await searchUntil(q(labelValue), [
    `deployments ${ns}/${tok}-web`,
    `configmaps ${ns}/${tok}-settings`,
    `configmaps ${ns}/${tok}-late`,
  ]);
  t.pass('a new label is found');
  k(ns, ['delete', 'configmap', `${tok}-late`]);
  await searchUntil(q(`${tok}-late`), []);
  t.pass('the deleted ConfigMap is gone');
});

t.test('a role limited to one namespace sees only that namespace; the viewer never a Secret', async (t) => {
  const role = uniqueName('search-ns');
  await createRole(gw, admin, {
    name: role,
    clusters: ['*'],
    namespaces: [other],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const limited = await apiKeyWithRoles(gw, admin, role, [role]);
  const mine = await search(q(tok), limited);
  t.equal(mine.status, 200);
  t.same(found(mine.body), [`configmaps ${other}/${tok}-elsewhere`], `only ${other}`);
  t.equal(mine.body.total, 1);
  t.same(
    found((await search(q('kube-system'), limited)).body),
    [],
    'not even the Namespace objects (cluster-scoped: not granted)',
  );

  const viewer = await apiKeyWithRoles(gw, admin, uniqueName('search-viewer'), ['viewer']);
  const seen = found((await search(q(tok), viewer)).body);
  t.same(
    seen,
    [
      `deployments ${ns}/${tok}-web`,
      `pods ${ns}/${tok}-pod`,
      `configmaps ${ns}/${tok}-settings`,
      `configmaps ${other}/${tok}-elsewhere`,
    ],
    'all but the Secret',
  );
  t.same(found((await search(q(`secret ${tok}`), viewer)).body), [], 'asking for secrets by name finds none');
  t.same(found((await search(q(`secret ${tok}`))).body), [`secrets ${ns}/${tok}-secret`], 'the admin finds it');

  const noList = uniqueName('search-get');
  await createRole(gw, admin, { name: noList, clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] });
  const getter = await apiKeyWithRoles(gw, admin, noList, [noList]);
  t.same(found((await search(q(tok), getter)).body), [], 'get without list finds nothing');
});

t.test('on the host cluster: nothing of kiteline’s install namespace', async (t) => {
  const self = uniqueName('self');
  await addReadyCluster(gw, admin, { name: self, config: testKubeconfig('host') });
  const tenant = uniqueName('tenant');
  for (const args of [
    ['create', 'namespace', tenant],
    ['-n', tenant, 'create', 'secret', 'generic', 'kiteline-session-key', '--from-literal=a=b'],
    ['-n', tenant, 'create', 'configmap', 'kiteline-id-counters'],
  ]) {
    t.equal(kubectl(gw.kubeconfig, args).status, 0, `kubectl ${args.join(' ')}`);
  }
  t.teardown(() => kubectl(gw.kubeconfig, ['delete', 'namespace', tenant, '--wait=false']));
  // The install namespace really holds objects of these names (so the search could show them).
  t.equal(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'secret', 'kiteline-session-key']).status, 0);
  t.equal(kubectl(gw.kubeconfig, ['-n', gw.namespace, 'get', 'configmap', 'kiteline-id-counters']).status, 0);

  // Every test gateway's install namespace holds objects of these names: look in one namespace at a time.
  for (const name of ['kiteline-session-key', 'kiteline-id-counters']) {
    await eventually(
      `${name} of the tenant`,
      async () => {
        const res = await search(`${q(name)}&namespace=${tenant}`, admin, self);
        return res.status === 200 && res.body.total === 1;
      },
      30_000,
      200,
    );
    const install = await search(`${q(name)}&namespace=${gw.namespace}`, admin, self);
    t.equal(install.status, 200);
    t.same(install.body.results, [], `no ${name} of the install namespace, even for an admin`);
    t.equal(install.body.total, 0);
    const everywhere = await search(`${q(name)}&limit=100`, admin, self);
    t.same(
      everywhere.body.results.filter((r) => r.namespace === gw.namespace),
      [],
      `nor among all namespaces' ${name}`,
    );
  }
  const anything = (await search(`${q('-')}&namespace=${gw.namespace}`, admin, self)).body;
  t.equal(
    anything.total,
    0,
    'no object of the install namespace at all (its user-admin-password, kube-root-ca.crt, ...)',
  );
  t.ok(
    (await search(`${q('-')}&namespace=${tenant}`, admin, self)).body.total >= 2,
    'while the same query finds the tenant’s',
  );
  const namespaces = (await search(q(`ns ${gw.namespace}`), admin, self)).body;
  t.same(namespaces.results, [], 'nor its Namespace object');
  t.same(
    found((await search(q(`ns ${tenant}`), admin, self)).body),
    [`namespaces /${tenant}`],
    'another Namespace object is found',
  );
});

t.test('400 on bad q and limit, 401 anonymous, 404 unknown cluster', async (t) => {
  for (const query of [
    '',
    'q=',
    `q=${encodeURIComponent('   ')}`,
    q('x'.repeat(101)),
    `${q(tok)}&limit=0`,
    `${q(tok)}&limit=101`,
    `${q(tok)}&limit=ten`,
    `${q(tok)}&namespace=Bad_NS`,
  ]) {
    const res = await search(query);
    t.equal(res.status, 400, `?${query.slice(0, 40)}: ${res.text.slice(0, 120)}`);
    t.equal(res.body?.code, 400);
  }
  t.equal((await search(q('x'.repeat(100)))).status, 200, '100 characters are fine');
  t.equal((await search(`${q(tok)}&limit=100`)).status, 200, 'limit 100 is fine');
  const anonymous = await search(q(tok), null);
  t.equal(anonymous.status, 401);
  t.equal((await search(q(tok), admin, 'nope')).status, 404);
});

t.test('the index: at most its limit of objects (then partial), stopped when idle, started again', async (t) => {
  const { clusters, hostGuard } = gw.app.services;
  const conn = clusters.get('a')!;
  const log = createLogger('silent');
  const small = new SearchIndexes({ hostGuard, log, maxObjects: 10, idleMs: 60_000 });
  const roomy = new SearchIndexes({ hostGuard, log, idleMs: 60_000 });
  t.teardown(() => {
    small.stopAll();
    roomy.stopAll();
  });
  const full = roomy.forCluster(conn);
  await full.settle(AbortSignal.timeout(30_000));
  t.equal(full.partial, false, 'with room for everything the index is complete');
  t.ok(full.held > 10, `target-a has more than 10 objects (${full.held})`);

  const index = small.forCluster(conn);
  await index.settle(AbortSignal.timeout(30_000));
  t.ok(index.held <= 10 && index.held >= 9, `the limit holds while all kinds list at once (${index.held})`);
  t.equal([...index.objects()].length, index.held);
  t.equal(index.partial, true, 'and the index says it is partial');

  t.equal(small.forCluster(conn), index, 'searches share the running index');
  small.stopIdle(Date.now() + 30_000);
  t.same(small.clusters(), ['a'], 'not idle yet');
  small.stopIdle(Date.now() + 60_001);
  t.same(small.clusters(), [], 'stopped once idle');
  t.not(small.forCluster(conn), index, 'the next search starts a new index');
});
