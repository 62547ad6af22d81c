// Pure parts of issue 32's host rules: which NoExecute taints a node write adds (by key and value,
// as the dry run's result is compared with the node), and which names claim the kiteline.io group.
import t from 'tap';
import { isKitelineGroupName, namedByGroup } from '../../src/cluster-access/host-guard.js';
import { addedNoExecuteTaints } from '../../src/cluster-access/kiteline-node.js';

const node = (...taints: object[]) => ({ spec: { taints } });

t.test('a write adds a NoExecute taint only when the result has one the node lacks', async (t) => {
  const unreachable = { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' };
  t.same(addedNoExecuteTaints(node(), node({ key: 'a', value: 'x', effect: 'NoExecute' })), [
    { key: 'a', value: 'x', effect: 'NoExecute' },
  ]);
  t.same(addedNoExecuteTaints(node(unreachable), node(unreachable)), [], 'a NoExecute taint kept is no new one');
  t.same(addedNoExecuteTaints(node(unreachable), node()), [], 'removing one is fine');
  t.same(addedNoExecuteTaints(node(), node({ key: 'a', effect: 'NoSchedule' })), [], 'other effects are fine');
  t.equal(
    addedNoExecuteTaints(
      node({ key: 'a', value: '1', effect: 'NoExecute' }),
      node({ key: 'a', value: '2', effect: 'NoExecute' }),
    ).length,
    1,
    'a changed value is a new taint',
  );
  t.same(addedNoExecuteTaints({}, { spec: { taints: 'nonsense' } }), [], 'no taints list: none added');
});

t.test('names that claim kiteline.io', async (t) => {
  t.ok(isKitelineGroupName('v1alpha1.kiteline.io'));
  t.ok(isKitelineGroupName('gadgets.sub.kiteline.io'));
  t.notOk(isKitelineGroupName('kiteline.io'), 'a bare group is no <plural>.<group>');
  t.notOk(isKitelineGroupName('gadgets.notkiteline.io'));
  t.ok(namedByGroup({ group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' }));
  t.ok(namedByGroup({ group: 'apiregistration.k8s.io', resource: 'apiservices' }));
  t.notOk(namedByGroup({ group: '', resource: 'configmaps' }));
});
