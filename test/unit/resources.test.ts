// Pure logic of the resource gateway: path segments, scope and upstream paths, query mapping,
// write and patch validation, delete options, cluster selection, impersonation, quantities.
import t from 'tap';
import type { Principal } from '../../src/auth/principal.js';
import type { ClusterConnection, ClusterDirectory, ResolvedResource } from '../../src/clusters/types.js';
import type { HttpError } from '../../src/errors.js';
import { BadRequestError, ForbiddenError, SecondFactorRequiredError } from '../../src/errors.js';
import { requireAccess, verbFor } from '../../src/cluster-access/access.js';
import { parseJsonBody, parseYamlBody } from '../../src/cluster-access/body-parsers.js';
import { cookieValue, requestedClusterName, selectCluster } from '../../src/cluster-access/cluster-select.js';
import { deleteOptions, deletedAtOnce } from '../../src/resources/delete.js';
import { impersonationHeaders } from '../../src/cluster-access/impersonation.js';
import { patchTypeOf, preparePatch } from '../../src/cluster-access/patch.js';
import { milliValue } from '../../src/cluster-access/quantity.js';
import { getSearch, listSearch, objectWatchSearch, withSearch } from '../../src/cluster-access/read-query.js';
import { checkSegments } from '../../src/cluster-access/segments.js';
import { canonicalResourceName, collectionPath, objectPath, planTarget } from '../../src/cluster-access/target.js';
import { prepareWrite } from '../../src/cluster-access/write-body.js';
import { writeSearch } from '../../src/resources/write-query.js';

const configmaps: ResolvedResource = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: [],
};
const nodes: ResolvedResource = {
  group: '',
  version: 'v1',
  resource: 'nodes',
  kind: 'Node',
  namespaced: false,
  verbs: [],
};
const deployments: ResolvedResource = {
  group: 'apps',
  version: 'v1',
  resource: 'deployments',
  kind: 'Deployment',
  namespaced: true,
  verbs: [],
};
const widgets: ResolvedResource = {
  group: 'example.com',
  version: 'v1',
  resource: 'widgets',
  kind: 'Widget',
  namespaced: true,
  verbs: [],
};
const ingresses: ResolvedResource = {
  group: 'networking.k8s.io',
  version: 'v1',
  resource: 'ingresses',
  kind: 'Ingress',
  namespaced: true,
  verbs: [],
};

interface Asserts {
  throws: (...args: any[]) => unknown;
  match: (...args: any[]) => unknown;
}

/** Asserts fn throws a BadRequestError whose message matches pattern. */
const badRequest = (t: Asserts, fn: () => unknown, pattern: RegExp, what: string) => {
  t.throws(fn, BadRequestError, what);
  try {
    fn();
  } catch (err) {
    t.match((err as Error).message, pattern, `${what}: message`);
  }
};

t.test('path segments: names that could leave their place are refused', async (t) => {
  t.ok(checkSegments({ resource: 'deployments', namespace: 'shop', name: 'web' }));
  t.ok(checkSegments({ resource: 'certificates.cert-manager.io', namespace: '_all', name: undefined }));
  t.ok(checkSegments({ resource: 'clusterroles', namespace: '_all', name: 'system:controller:foo' }));
  badRequest(
    t,
    () => checkSegments({ resource: 'Deployments', namespace: undefined, name: undefined }),
    /invalid resource/,
    'upper case resource',
  );
  badRequest(
    t,
    () => checkSegments({ resource: '..', namespace: undefined, name: undefined }),
    /invalid resource/,
    'dot-dot resource',
  );
  badRequest(
    t,
    () => checkSegments({ resource: 'pods', namespace: 'a/b', name: undefined }),
    /invalid namespace/,
    'slash in namespace',
  );
  badRequest(
    t,
    () => checkSegments({ resource: 'pods', namespace: 'All', name: undefined }),
    /invalid namespace/,
    'namespace not a DNS label',
  );
  badRequest(t, () => checkSegments({ resource: 'pods', namespace: 'x', name: '..' }), /invalid name/, 'name ..');
  badRequest(
    t,
    () => checkSegments({ resource: 'pods', namespace: 'x', name: 'a/../b' }),
    /invalid name/,
    'name with slash',
  );
  badRequest(
    t,
    () => checkSegments({ resource: 'pods', namespace: 'x', name: 'a%2fb' }),
    /invalid name/,
    'name with percent',
  );
  badRequest(
    t,
    () => checkSegments({ resource: 'pods', namespace: 'x', name: 'a\nb' }),
    /invalid name "a\?b"/,
    'control characters are not echoed',
  );
});

t.test('scope: _all, cluster-scoped kinds and upstream paths', async (t) => {
  t.same(planTarget(configmaps, { resource: 'configmaps', namespace: 'shop', name: 'x' }), {
    resolved: configmaps,
    resource: 'configmaps',
    namespace: 'shop',
    name: 'x',
  });
  t.equal(
    planTarget(configmaps, { resource: 'configmaps', namespace: '_all', name: undefined }).namespace,
    undefined,
    '_all lists across namespaces',
  );
  t.equal(
    planTarget(configmaps, { resource: 'configmaps', namespace: undefined, name: undefined }).namespace,
    undefined,
    'no second segment: all namespaces',
  );
  badRequest(
    t,
    () => planTarget(configmaps, { resource: 'configmaps', namespace: '_all', name: 'x' }),
    /namespaced: use \/api\/v1\/configmaps\/<namespace>\/x/,
    'name under _all',
  );
  t.equal(planTarget(nodes, { resource: 'nodes', namespace: '_all', name: 'n1' }).namespace, undefined);
  badRequest(
    t,
    () => planTarget(nodes, { resource: 'nodes', namespace: 'default', name: 'n1' }),
    /cluster-scoped: use \/api\/v1\/nodes\/_all\/n1/,
    'namespace on a cluster-scoped kind',
  );

  t.equal(collectionPath(configmaps, 'shop'), '/api/v1/namespaces/shop/configmaps');
  t.equal(collectionPath(configmaps, undefined), '/api/v1/configmaps');
  t.equal(collectionPath(nodes, 'ignored'), '/api/v1/nodes', 'cluster-scoped kinds never get a namespace');
  t.equal(objectPath(deployments, 'shop', 'web'), '/apis/apps/v1/namespaces/shop/deployments/web');
  t.equal(objectPath(nodes, undefined, 'node-1'), '/api/v1/nodes/node-1');
  t.equal(
    objectPath(configmaps, 'x', 'system:a@b'),
    '/api/v1/namespaces/x/configmaps/system%3Aa%40b',
    'names are encoded',
  );
});

t.test('canonical resource names: one name per resource for roles', async (t) => {
  t.equal(canonicalResourceName(configmaps), 'configmaps');
  t.equal(
    canonicalResourceName(deployments),
    'deployments',
    'built-in group: bare plural, also when asked as deployments.apps',
  );
  t.equal(canonicalResourceName(ingresses), 'ingresses', '*.k8s.io is built in');
  t.equal(canonicalResourceName(widgets), 'widgets.example.com', 'custom groups keep <plural>.<group>');
  t.equal(
    canonicalResourceName({ ...widgets, group: 'cluster.x-k8s.io' }),
    'widgets.cluster.x-k8s.io',
    'x-k8s.io is not k8s.io',
  );
});

t.test('read queries: known parameters pass, unknown are dropped', async (t) => {
  const list = listSearch({
    labelSelector: 'app=web',
    fieldSelector: 'metadata.name=x',
    limit: 2,
    continue: 'tok',
    resourceVersion: '5',
  });
  t.same(Object.fromEntries(list), {
    labelSelector: 'app=web',
    fieldSelector: 'metadata.name=x',
    resourceVersion: '5',
    limit: '2',
    continue: 'tok',
  });
  t.same(Object.fromEntries(listSearch({ watch: true, resourceVersion: '7', timeoutSeconds: 30 })), {
    resourceVersion: '7',
    timeoutSeconds: '30',
    watch: 'true',
  });
  t.throws(() => listSearch({ watch: true, limit: 5 }), BadRequestError, 'limit with watch');
  t.same(Object.fromEntries(objectWatchSearch({ watch: true, fieldSelector: 'a=b' }, 'web')), {
    fieldSelector: 'metadata.name=web,a=b',
    watch: 'true',
  });
  t.equal(withSearch('/api/v1/pods', getSearch({})), '/api/v1/pods');
  t.equal(
    withSearch('/api/v1/pods', listSearch({ labelSelector: 'a in (b,c)' })),
    '/api/v1/pods?labelSelector=a+in+%28b%2Cc%29',
  );
  t.same(
    Object.fromEntries(writeSearch({ dryRun: 'All', fieldManager: 'me', force: true })),
    { dryRun: 'All', fieldManager: 'me' },
    'force only for apply',
  );
  t.same(Object.fromEntries(writeSearch({ fieldManager: 'me', force: true }, { apply: true })), {
    fieldManager: 'me',
    force: 'true',
  });
});

t.test('create and replace bodies', async (t) => {
  const created = prepareWrite(
    { metadata: { name: 'a' }, data: { k: 'v' } },
    configmaps,
    'configmaps',
    'shop',
    undefined,
    'POST',
  );
  t.same(
    created.object,
    { metadata: { name: 'a', namespace: 'shop' }, data: { k: 'v' }, kind: 'ConfigMap', apiVersion: 'v1' },
    'namespace, kind, apiVersion filled',
  );
  t.equal(created.namespace, 'shop');
  badRequest(
    t,
    () =>
      prepareWrite(
        { metadata: { name: 'a', namespace: 'other' } },
        configmaps,
        'configmaps',
        'shop',
        undefined,
        'POST',
      ),
    /differs from the namespace in the path/,
    'namespace mismatch',
  );
  t.equal(
    prepareWrite(
      { metadata: { name: 'a', namespace: 'other' } },
      configmaps,
      'configmaps',
      undefined,
      undefined,
      'POST',
    ).namespace,
    'other',
    'POST under _all writes the body namespace',
  );
  badRequest(
    t,
    () => prepareWrite({ metadata: { name: 'a' } }, configmaps, 'configmaps', undefined, undefined, 'POST'),
    /namespaced: put the namespace/,
    'POST under _all without a namespace',
  );
  badRequest(
    t,
    () => prepareWrite({ metadata: { name: 'n', namespace: 'x' } }, nodes, 'nodes', undefined, undefined, 'POST'),
    /cluster-scoped/,
    'namespace on a cluster-scoped kind',
  );
  badRequest(
    t,
    () => prepareWrite([{}], configmaps, 'configmaps', 'shop', undefined, 'POST'),
    /JSON object/,
    'array body',
  );
  badRequest(
    t,
    () => prepareWrite(undefined, configmaps, 'configmaps', 'shop', undefined, 'POST'),
    /body required/,
    'no body',
  );
  badRequest(
    t,
    () => prepareWrite({ metadata: {} }, configmaps, 'configmaps', 'shop', undefined, 'POST'),
    /metadata.name/,
    'no name',
  );
  t.ok(
    prepareWrite({ metadata: { generateName: 'a-' } }, configmaps, 'configmaps', 'shop', undefined, 'POST'),
    'generateName is enough',
  );
  badRequest(
    t,
    () =>
      prepareWrite({ kind: 'Secret', metadata: { name: 'a' } }, configmaps, 'configmaps', 'shop', undefined, 'POST'),
    /kind "Secret" does not match/,
    'wrong kind',
  );
  badRequest(
    t,
    () =>
      prepareWrite(
        { apiVersion: 'example.com/v1', metadata: { name: 'a' } },
        deployments,
        'deployments',
        'shop',
        undefined,
        'POST',
      ),
    /does not belong/,
    'wrong group',
  );
  t.ok(
    prepareWrite(
      { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'a' } },
      deployments,
      'deployments',
      'shop',
      undefined,
      'POST',
    ),
  );

  const put = prepareWrite(
    { metadata: { resourceVersion: '9' }, data: {} },
    configmaps,
    'configmaps',
    'shop',
    'a',
    'PUT',
  );
  t.same(put.object.metadata, { resourceVersion: '9', namespace: 'shop', name: 'a' });
  badRequest(
    t,
    () => prepareWrite({ metadata: { name: 'a' } }, configmaps, 'configmaps', 'shop', 'a', 'PUT'),
    /resourceVersion is required/,
    'PUT without resourceVersion',
  );
  badRequest(
    t,
    () => prepareWrite({ metadata: { name: 'b', resourceVersion: '1' } }, configmaps, 'configmaps', 'shop', 'a', 'PUT'),
    /differs from the name in the path/,
    'PUT name mismatch',
  );
});

t.test('patch types and documents', async (t) => {
  t.equal(patchTypeOf(undefined, 'application/json'), 'strategic');
  t.equal(patchTypeOf(undefined, undefined), 'strategic');
  t.equal(patchTypeOf('merge', 'application/json'), 'merge');
  t.equal(patchTypeOf('json', undefined), 'json');
  t.equal(patchTypeOf('apply', undefined), 'apply');
  t.equal(
    patchTypeOf(undefined, 'application/merge-patch+json; charset=utf-8'),
    'merge',
    'a specific patch media type counts when patchType is absent',
  );
  badRequest(t, () => patchTypeOf('strategic-ish', undefined), /unknown patchType/, 'unknown patchType');
  const ctx = { resource: 'configmaps', namespace: 'shop', name: 'a', fieldManager: undefined };
  t.equal(
    preparePatch('json', [{ op: 'replace', path: '/data/k', value: 'v' }], ctx),
    '[{"op":"replace","path":"/data/k","value":"v"}]',
  );
  badRequest(
    t,
    () => preparePatch('json', [{ op: 'replace', path: 'data' }], ctx),
    /invalid JSON patch: operation 0/,
    'path without slash',
  );
  badRequest(
    t,
    () => preparePatch('json', [{ op: 'add', path: '/a' }], ctx),
    /invalid JSON patch/,
    'add without value',
  );
  badRequest(
    t,
    () => preparePatch('json', [{ op: 'frobnicate', path: '/a' }], ctx),
    /invalid JSON patch/,
    'unknown op',
  );
  badRequest(t, () => preparePatch('json', { op: 'add' }, ctx), /must be an array/, 'json patch not an array');
  badRequest(t, () => preparePatch('merge', [{ op: 'add' }], ctx), /use patchType=json/, 'array as merge patch');
  badRequest(
    t,
    () => preparePatch('apply', { apiVersion: 'v1' }, ctx),
    /requires the fieldManager/,
    'apply without fieldManager',
  );
  t.ok(
    preparePatch(
      'apply',
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'shop' } },
      { ...ctx, fieldManager: 'me' },
    ),
  );
  badRequest(
    t,
    () => preparePatch('strategic', { metadata: { namespace: 'other' } }, ctx),
    /differs from the path/,
    'namespace moved by a patch',
  );
  badRequest(
    t,
    () => preparePatch('merge', { metadata: { name: 'b' } }, ctx),
    /differs from the name/,
    'rename by a patch',
  );
  badRequest(t, () => preparePatch('merge', undefined, ctx), /body required/, 'no body');
});

t.test('bodies: JSON and YAML parse errors are 400', async (t) => {
  t.same(parseJsonBody('{"a":1}'), { a: 1 });
  t.equal(parseJsonBody('  '), undefined, 'empty body');
  badRequest(t, () => parseJsonBody('{"a":'), /not valid JSON/, 'truncated JSON');
  t.same(parseYamlBody('a: 1\nb: [x]\n'), { a: 1, b: ['x'] });
  badRequest(t, () => parseYamlBody('a: 1\n---\nb: 2\n'), /not valid YAML/, 'two documents');
});

t.test('delete options', async (t) => {
  t.same(deleteOptions({}), { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' });
  t.same(deleteOptions({ cascade: false, force: true, dryRun: 'All' }), {
    kind: 'DeleteOptions',
    apiVersion: 'v1',
    propagationPolicy: 'Orphan',
    gracePeriodSeconds: 0,
    dryRun: ['All'],
  });
  t.ok(deletedAtOnce({ kind: 'Status', status: 'Success' }));
  t.notOk(deletedAtOnce({ kind: 'ConfigMap', metadata: { deletionTimestamp: 'x' } }));
});

t.test('cluster selection: header, query, cookie, default; 404 and 503', async (t) => {
  t.equal(requestedClusterName({ headers: { 'x-cluster-name': 'h' }, query: { 'x-cluster-name': 'q' } }), 'h');
  t.equal(requestedClusterName({ headers: { cookie: 'x-cluster-name=c' }, query: { 'x-cluster-name': 'q' } }), 'q');
  t.equal(requestedClusterName({ headers: { cookie: 'a=b; x-cluster-name=my%20c' }, query: {} }), 'my c');
  t.equal(requestedClusterName({ headers: {}, query: {} }), undefined);
  t.equal(cookieValue('x-cluster-name-2=a; x-cluster-name="b"', 'x-cluster-name'), 'b');
  badRequest(
    t,
    () => requestedClusterName({ headers: { 'x-cluster-name': 'a\u0001' }, query: {} }),
    /invalid x-cluster-name/,
    'control characters',
  );

  const demandProbes: string[] = [];
  const conn = (name: string, over: Partial<ClusterConnection> = {}) =>
    ({
      name,
      enabled: true,
      ready: true,
      lastError: '',
      probeOnDemand: () => demandProbes.push(name),
      firstProbe: async () => undefined,
      ...over,
    }) as ClusterConnection;
  // Issue 23: "fresh" is ready once its first probe (still running when the request comes) ends.
  const fresh = conn('fresh', { ready: false, lastError: 'not probed yet' });
  Object.assign(fresh, { firstProbe: async () => Object.assign(fresh, { ready: true, lastError: '' }) });
  const all = [
    conn('a'),
    conn('down', { ready: false, lastError: 'connection refused' }),
    conn('off', { enabled: false }),
    fresh,
  ];
  const directory: ClusterDirectory = {
    get: (n) => all.find((c) => c.name === n),
    defaultCluster: () => all[0],
    list: () => all,
  };
  const anyone = () => true;
  t.equal((await selectCluster(directory, { headers: {}, query: {} }, anyone)).name, 'a', 'default cluster');
  const statusOf = async (name: string, mayUse: (cluster: string) => boolean = anyone) => {
    try {
      await selectCluster(directory, { headers: { 'x-cluster-name': name }, query: {} }, mayUse);
      return 200;
    } catch (err) {
      return [(err as HttpError).status, (err as Error).message];
    }
  };
  t.same(await statusOf('nope'), [404, 'cluster not found: nope']);
  t.same(await statusOf('off'), [404, 'cluster not found: off'], 'disabled is not found');
  t.same(
    await statusOf('down'),
    [503, 'cluster down is not ready: connection refused'],
    'not ready: 503 with the last error',
  );
  t.same(await statusOf('fresh'), 200, 'a cluster whose first probe is running is waited for, not a 503');
  t.same(demandProbes, ['down'], 'a request for a not-ready cluster asks for a probe (and only then)');
  // Issue 13 point 7: a cluster the caller may not use looks exactly like a missing one.
  t.same(
    await statusOf('down', (c) => c !== 'down'),
    [404, 'cluster not found: down'],
    'not usable by the caller: the 404 of a missing cluster',
  );
  t.same(demandProbes, ['down'], 'a caller who may not use the cluster triggers no probe');
  const empty: ClusterDirectory = { get: () => undefined, defaultCluster: () => undefined, list: () => [] };
  await t.rejects(
    selectCluster(empty, { headers: {}, query: {} }, anyone),
    /no clusters available/,
    'no default cluster: 404',
  );
});

t.test('verbs, authorization message and impersonation headers', async (t) => {
  t.equal(verbFor('GET', true, false), 'get');
  t.equal(verbFor('GET', false, false), 'list');
  t.equal(verbFor('GET', false, true), 'watch');
  t.equal(verbFor('POST', false, false), 'create');
  t.equal(verbFor('PUT', true, false), 'update');
  t.equal(verbFor('PATCH', true, false), 'patch');
  t.equal(verbFor('DELETE', true, false), 'delete');

  const alice: Principal = {
    kind: 'user',
    id: 3,
    name: 'alice',
    roles: ['viewer'],
    groups: ['kiteline:authenticated', 'kiteline:role:viewer'],
  };
  const seen: unknown[] = [];
  const denyAll = {
    authorize: (_p: Principal, a: unknown) => (seen.push(a), false),
    requireFreshFactor: () => undefined,
  };
  t.throws(() => requireAccess(denyAll, alice, 'prod', 'secrets', 'shop', 'get'), ForbiddenError);
  try {
    requireAccess(denyAll, alice, 'prod', 'pods', undefined, 'list');
  } catch (err) {
    t.equal((err as Error).message, 'user alice may not list pods across all namespaces on cluster prod');
  }
  t.same(
    seen[1],
    { cluster: 'prod', namespace: '_all', resource: 'pods', verb: 'list' },
    'all namespaces are authorized as _all',
  );
  t.doesNotThrow(() =>
    requireAccess({ authorize: () => true, requireFreshFactor: () => undefined }, alice, 'prod', 'pods', 'x', 'get'),
  );
  const asked: unknown[] = [];
  const stale = {
    authorize: () => true,
    requireFreshFactor: (_p: Principal, a: unknown) => {
      asked.push(a);
      throw new SecondFactorRequiredError('too old', { maxAgeSeconds: 60 });
    },
  };
  t.throws(
    () => requireAccess(stale, alice, 'prod', 'pods/exec', 'shop', 'create'),
    SecondFactorRequiredError,
    'an allowed access still asks for a fresh second factor',
  );
  t.same(asked, [{ cluster: 'prod', resource: 'pods/exec', verb: 'create' }], 'with what it is');

  t.same(impersonationHeaders({ impersonate: false }, alice), {});
  t.same(impersonationHeaders({ impersonate: true }, alice), {
    'impersonate-user': 'kiteline:alice',
    'impersonate-group': ['kiteline:authenticated', 'kiteline:role:viewer'],
  });
});

t.test('quantities in milli-units', async (t) => {
  t.equal(milliValue('500m'), 500);
  t.equal(milliValue('2'), 2000);
  t.equal(milliValue('1Ki'), 1024000);
  t.equal(milliValue('1Gi'), 1073741824000);
  t.equal(milliValue('1.5'), 1500);
  t.equal(milliValue('1e3'), 1000000);
  t.equal(milliValue('100M'), 100e9);
  t.equal(milliValue('1n'), 1, 'rounded up like MilliValue');
  t.equal(milliValue(undefined), 0);
  t.equal(milliValue('lots'), 0);
});
