// Pure logic: resolving resource segments through a cluster's discovery documents the way kubectl
// does (core and built-in groups win a plural clash, preferred versions, <plural>.<group>,
// subresources skipped, failing group-versions skipped).
import t from 'tap';
import { loadDiscovery } from '../../src/clusters/discovery.js';

const docs: Record<string, unknown> = {
  '/api': { kind: 'APIVersions', versions: ['v1'] },
  '/api/v1': {
    groupVersion: 'v1',
    resources: [
      { name: 'pods', kind: 'Pod', namespaced: true, verbs: ['get', 'list'] },
      { name: 'pods/log', kind: 'Pod', namespaced: true, verbs: ['get'] },
      { name: 'nodes', kind: 'Node', namespaced: false, verbs: ['get', 'list'] },
      { name: 'events', kind: 'Event', namespaced: true, verbs: ['list'] },
    ],
  },
  '/apis': {
    groups: [
      {
        name: 'apps',
        versions: [{ groupVersion: 'apps/v1', version: 'v1' }],
        preferredVersion: { groupVersion: 'apps/v1', version: 'v1' },
      },
      {
        name: 'events.k8s.io',
        versions: [{ version: 'v1' }, { version: 'v1beta1' }],
        preferredVersion: { version: 'v1' },
      },
      {
        name: 'batch',
        versions: [{ version: 'v1' }, { version: 'v1beta1' }],
        preferredVersion: { version: 'v1' },
      },
      {
        name: 'example.com',
        versions: [{ version: 'v1alpha1' }, { version: 'v2' }],
        preferredVersion: { version: 'v2' },
      },
      { name: 'metrics.k8s.io', versions: [{ version: 'v1beta1' }], preferredVersion: { version: 'v1beta1' } },
    ],
  },
  '/apis/apps/v1': {
    resources: [
      { name: 'deployments', kind: 'Deployment', namespaced: true, verbs: ['get'] },
      { name: 'deployments/scale', kind: 'Scale', namespaced: true },
    ],
  },
  '/apis/events.k8s.io/v1': { resources: [{ name: 'events', kind: 'Event', namespaced: true }] },
  '/apis/events.k8s.io/v1beta1': { resources: [{ name: 'events', kind: 'Event', namespaced: true }] },
  '/apis/batch/v1': { resources: [{ name: 'jobs', kind: 'Job', namespaced: true }] },
  '/apis/batch/v1beta1': { resources: [{ name: 'cronjobs', kind: 'CronJob', namespaced: true }] },
  '/apis/example.com/v1alpha1': {
    resources: [
      { name: 'widgets', kind: 'Widget', namespaced: true },
      { name: 'deployments', kind: 'FakeDeployment', namespaced: false },
    ],
  },
  '/apis/example.com/v2': {
    resources: [
      { name: 'widgets', kind: 'Widget', namespaced: true },
      { name: 'gadgets', kind: 'Gadget', namespaced: false },
    ],
  },
  // metrics.k8s.io/v1beta1 is missing: an aggregated API whose backend is down.
};

const getter = async (path: string) => {
  if (!(path in docs)) throw new Error(`503 on ${path}`);
  return docs[path];
};

t.test('plural names resolve like kubectl', async (t) => {
  const { index, failed } = await loadDiscovery(getter);
  t.same(failed, ['metrics.k8s.io/v1beta1'], 'the failing group-version is reported, not fatal');
  t.match(index.resolve('pods'), { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true });
  t.match(index.resolve('nodes'), { group: '', namespaced: false });
  t.match(
    index.resolve('deployments'),
    { group: 'apps', version: 'v1', kind: 'Deployment' },
    'a built-in group wins over a custom one',
  );
  t.match(index.resolve('events'), { group: '', version: 'v1' }, 'core wins over events.k8s.io');
  t.match(index.resolve('widgets'), { group: 'example.com', version: 'v2' }, 'the preferred version');
  t.match(
    index.resolve('cronjobs'),
    { group: 'batch', version: 'v1beta1' },
    'a resource only in a non-preferred version',
  );
  t.equal(index.resolve('pods/log'), undefined, 'subresources are not resources');
  t.equal(index.resolve('nope'), undefined);
});

t.test('<plural>.<group> resolves within the group', async (t) => {
  const { index } = await loadDiscovery(getter);
  t.match(index.resolve('deployments.example.com'), {
    group: 'example.com',
    version: 'v1alpha1',
    kind: 'FakeDeployment',
  });
  t.match(index.resolve('deployments.apps'), { group: 'apps', kind: 'Deployment' });
  t.match(index.resolve('events.events.k8s.io'), { group: 'events.k8s.io', version: 'v1' });
  t.match(index.resolve('gadgets.example.com'), { group: 'example.com', version: 'v2', namespaced: false });
  t.equal(index.resolve('gadgets.other.io'), undefined);
  t.equal(index.resolve('.example.com'), undefined);
});

t.test('a cluster whose /apis fails is a failed discovery', async (t) => {
  await t.rejects(
    loadDiscovery(async (path) => {
      if (path === '/apis') throw new Error('down');
      return docs[path];
    }),
  );
});

/** The same cluster as aggregated discovery (APIGroupDiscoveryList at /api and /apis), as 1.30+ answers it. */
function aggregatedDocs(): Record<string, unknown> {
  const group = (name: string, versions: string[]) => ({
    metadata: name === '' ? {} : { name }, // as the API server sends it: an empty name is left out
    versions: versions.map((version) => {
      const list = docs[name === '' ? `/api/${version}` : `/apis/${name}/${version}`] as
        { resources: Array<{ name: string; kind: string; namespaced: boolean }> } | undefined;
      if (!list) return { version, resources: [], freshness: 'Stale' };
      return {
        version,
        freshness: 'Current',
        resources: list.resources
          .filter((r) => !r.name.includes('/'))
          .map((r) => ({
            resource: r.name,
            responseKind: { group: name, version, kind: r.kind },
            scope: r.namespaced ? 'Namespaced' : 'Cluster',
            verbs: ['get', 'list'],
          })),
      };
    }),
  });
  const apis = docs['/apis'] as {
    groups: Array<{ name: string; versions: Array<{ version: string }>; preferredVersion: { version: string } }>;
  };
  return {
    '/api': { kind: 'APIGroupDiscoveryList', items: [group('', ['v1'])] },
    '/apis': {
      kind: 'APIGroupDiscoveryList',
      items: apis.groups.map((g) =>
        group(g.name, [
          g.preferredVersion.version,
          ...g.versions.map((v) => v.version).filter((v) => v !== g.preferredVersion.version),
        ]),
      ),
    },
  };
}

t.test('aggregated discovery: two documents, the same answers', async (t) => {
  const aggregated = aggregatedDocs();
  const asked: string[] = [];
  const { index, failed } = await loadDiscovery(async (path, accept) => {
    asked.push(path);
    t.match(accept, /g=apidiscovery\.k8s\.io;v=v2;as=APIGroupDiscoveryList/, 'asks for the aggregated form');
    return aggregated[path];
  });
  t.same(asked.sort(), ['/api', '/apis'], 'no request per group-version');
  t.same(failed, ['metrics.k8s.io/v1beta1'], 'a stale group-version is reported, not fatal');
  t.match(index.resolve('deployments'), { group: 'apps', version: 'v1', kind: 'Deployment' });
  t.match(index.resolve('events'), { group: '', version: 'v1' }, 'core wins over events.k8s.io');
  t.match(index.resolve('widgets'), { group: 'example.com', version: 'v2' }, 'the preferred version');
  t.match(index.resolve('cronjobs'), { group: 'batch', version: 'v1beta1' }, 'only in a non-preferred version');
  t.match(index.resolve('gadgets.example.com'), { group: 'example.com', namespaced: false });
  t.equal(index.resolve('pods/log'), undefined, 'subresources are not resources');
});

t.test('clusters that answer the same aggregated discovery share one snapshot', async (t) => {
  const aggregated = aggregatedDocs();
  const asText = (docs: Record<string, unknown>) => async (path: string) => JSON.stringify(docs[path]);
  const first = await loadDiscovery(asText(aggregated));
  const second = await loadDiscovery(asText(aggregated));
  t.equal(second, first, 'the same bytes: the same snapshot, not parsed again');
  const withCrd = structuredClone(aggregated) as { '/apis': { items: Array<{ metadata: { name: string } }> } };
  withCrd['/apis'].items[0].metadata.name = 'other.example.com';
  const third = await loadDiscovery(asText(withCrd));
  t.not(third, first, 'other bytes: a snapshot of their own');
  t.match(third.index.resolve('widgets.other.example.com') ?? third.index.resolve('deployments.other.example.com'), {
    group: 'other.example.com',
  });
});
