// The one order of "which cluster is the default" (host/clusters.ts preferDefault), used by the
// store when it settles defaults, by the leader's repair and by the ClusterRegistry serving
// requests that name no cluster: the cluster marked default last wins, then the lower id, then
// the object name, so every replica and every step agree.
import t from 'tap';
import { clusterOf, DEFAULT_SINCE_ANNOTATION, pickDefault, preferDefault } from '../../src/host/clusters.js';
import { ID_LABEL, type ClusterResource } from '../../src/host/resources.js';

function cr(
  name: string,
  id: number | undefined,
  isDefault: boolean,
  since?: string,
  created = '2024-01-01T00:00:00Z',
): ClusterResource {
  return {
    metadata: {
      name,
      creationTimestamp: created as unknown as Date,
      labels: id === undefined ? {} : { [ID_LABEL]: String(id) },
      ...(since ? { annotations: { [DEFAULT_SINCE_ANNOTATION]: since } } : {}),
    },
    spec: { name, isDefault },
  };
}

t.test('the newest default-since wins, then the lower id, then the object name', async (t) => {
  const older = clusterOf(cr('a', 1, true, '2024-05-01T00:00:00Z'));
  const newer = clusterOf(cr('b', 2, true, '2024-06-01T00:00:00Z'));
  t.ok(preferDefault(newer, older), 'marked later wins');
  t.notOk(preferDefault(older, newer));
  const tieLow = clusterOf(cr('z', 3, true, '2024-06-01T00:00:00Z'));
  const tieHigh = clusterOf(cr('c', 7, true, '2024-06-01T00:00:00Z'));
  t.ok(preferDefault(tieLow, tieHigh), 'same stamp: the lower id');
  t.notOk(preferDefault(tieHigh, tieLow));
  const noId = clusterOf(cr('y', undefined, true, '2024-06-01T00:00:00Z'));
  t.ok(preferDefault(tieHigh, noId), 'an id beats none yet');
  const x = clusterOf(cr('x', undefined, true, '2024-06-01T00:00:00Z'));
  t.ok(preferDefault(x, noId) !== preferDefault(noId, x), 'the object name decides the rest, one way');
});

t.test("without default-since the creation time counts; the leader's own pick (the epoch) loses to any", async (t) => {
  const applied = clusterOf(cr('applied', 1, true, undefined, '2020-01-01T00:00:00Z'));
  const fallback = clusterOf(cr('fallback', 2, true, new Date(0).toISOString()));
  t.ok(preferDefault(applied, fallback));
});

t.test('pickDefault: only claimants count, the preferred one is picked whatever the order', async (t) => {
  const items = [
    cr('a', 1, true, '2024-05-01T00:00:00Z'),
    cr('b', 2, false, '2025-01-01T00:00:00Z'),
    cr('c', 3, true, '2024-06-01T00:00:00Z'),
  ];
  for (const order of [items, [...items].reverse()]) {
    t.equal(pickDefault(order, clusterOf)?.metadata.name, 'c');
  }
  t.equal(pickDefault([cr('a', 1, false)], clusterOf), undefined, 'no claimant: none');
});
