// The role rules of CONTRACT section 6 as pure logic: anchored globs, "!" exclusions, empty lists
// matching nothing, "_all" and the one authorization function.
import t from 'tap';
import { roleAllows, rolesAllow, rolesReachCluster } from '../../src/auth/authorize.js';
import { globMatches, patternsMatch } from '../../src/auth/patterns.js';
import type { AccessRequest } from '../../src/auth/principal.js';
import { BUILTIN_ROLES } from '../../src/host/roles.js';

const access = (over: Partial<AccessRequest> = {}): AccessRequest => ({
  cluster: 'prod-eu',
  namespace: 'shop',
  resource: 'deployments',
  verb: 'get',
  ...over,
});

t.test('globs are anchored and case-sensitive', async (t) => {
  t.ok(globMatches('*', 'anything'));
  t.ok(globMatches('prod-*', 'prod-eu'));
  t.notOk(globMatches('prod-*', 'my-prod-eu'), 'anchored at the start (Kite matched unanchored)');
  t.notOk(globMatches('dev', 'mydev-2'), 'anchored: a plain name is an exact match');
  t.notOk(globMatches('prod', 'Prod'), 'case-sensitive');
  t.ok(globMatches('p?od', 'prod'));
  t.notOk(globMatches('a.b', 'axb'), 'a dot is a dot, not a regexp wildcard');
  t.ok(globMatches('*.cert-manager.io', 'certificates.cert-manager.io'));
  t.notOk(globMatches('(a|b)', 'a'), 'regexp syntax is literal');
});

t.test('pattern lists: empty matches nothing, exclusions win regardless of order', async (t) => {
  t.notOk(patternsMatch([], 'x'), 'empty list matches nothing');
  t.notOk(patternsMatch(undefined, 'x'));
  t.ok(patternsMatch(['*', '!kube-system'], 'default'));
  t.notOk(patternsMatch(['*', '!kube-system'], 'kube-system'));
  t.notOk(patternsMatch(['!kube-system', '*'], 'kube-system'), 'order does not matter');
  t.notOk(patternsMatch(['*', '!kube-*'], 'kube-public'), 'exclusions are globs too');
  t.ok(patternsMatch(['!kube-system'], 'default'), 'only exclusions: everything else');
  t.notOk(patternsMatch(['!kube-system'], 'kube-system'));
  t.notOk(patternsMatch(['a', 'b'], 'c'));
  t.ok(patternsMatch(['a', 'b'], 'b'));
});

t.test('"_all" needs a list without exclusions', async (t) => {
  t.ok(patternsMatch(['*'], '_all'));
  t.notOk(patternsMatch(['*', '!kube-system'], '_all'), 'a role hiding kube-system cannot list all namespaces');
  t.notOk(patternsMatch(['shop'], '_all'));
});

t.test('a role allows when all four lists match', async (t) => {
  const role = {
    clusters: ['prod-*'],
    namespaces: ['shop'],
    resources: ['deployments', 'pods'],
    verbs: ['get', 'list'],
  };
  t.ok(roleAllows(role, access()));
  t.notOk(roleAllows(role, access({ cluster: 'dev' })));
  t.notOk(roleAllows(role, access({ namespace: 'other' })));
  t.notOk(roleAllows(role, access({ resource: 'secrets' })));
  t.notOk(roleAllows(role, access({ verb: 'delete' })));
  t.notOk(roleAllows({ ...role, namespaces: [] }, access()), 'an empty list denies (Kite allowed)');
});

t.test('several roles: any one suffices', async (t) => {
  const reader = { clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] };
  const writer = { clusters: ['dev'], namespaces: ['*'], resources: ['*'], verbs: ['*'] };
  t.ok(rolesAllow([reader, writer], access({ verb: 'get' })));
  t.ok(rolesAllow([reader, writer], access({ cluster: 'dev', verb: 'delete' })));
  t.notOk(rolesAllow([reader, writer], access({ verb: 'delete' })));
  t.notOk(rolesAllow([], access()));
});

t.test('built-in roles', async (t) => {
  const { admin, viewer } = BUILTIN_ROLES;
  for (const verb of ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] as const) {
    t.ok(roleAllows(admin, access({ verb, namespace: '_all' })), `admin may ${verb}`);
    t.equal(roleAllows(viewer, access({ verb })), ['get', 'list', 'watch'].includes(verb), `viewer and ${verb}`);
  }
  // Issue 13 point 2: like Kubernetes' `view`, the viewer reads everything but Secrets.
  for (const verb of ['get', 'list', 'watch'] as const) {
    t.notOk(roleAllows(viewer, access({ verb, resource: 'secrets' })), `viewer may not ${verb} secrets`);
    t.notOk(
      roleAllows(viewer, access({ verb, resource: 'secrets', namespace: '_all' })),
      `viewer may not ${verb} secrets across namespaces`,
    );
    t.ok(
      roleAllows(viewer, access({ verb, resource: 'configmaps', namespace: '_all' })),
      `viewer may ${verb} configmaps across namespaces`,
    );
  }
});

t.test('cluster reach', async (t) => {
  t.ok(rolesReachCluster([{ clusters: ['prod-*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] }], 'prod-eu'));
  t.notOk(rolesReachCluster([{ clusters: ['prod-*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] }], 'dev'));
  t.notOk(
    rolesReachCluster([{ clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: [] }], 'dev'),
    'a role that grants nothing reaches nothing',
  );
});
