// POST /api/v1/resources/apply on target-b (no pod needs to run): multi-document YAML with a CRD
// and its custom resource in one go, a file with one bad document changes nothing (also when the
// bad one is a custom resource of a CRD of the same file: the CRD is removed again), conflicts with
// another field manager (and force), per-document authorization (a namespace-limited role, the
// viewer, anonymous), bad bodies; then Kite's small routes: /crds, /crds/_all/<crd>, /version,
// and JSON 404s for the /api paths Kite's UI calls that kiteline does not build.
import t from 'tap';
import { stringify } from 'yaml';
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

const gw = await startGateway(t, { logName: 'tools-apply' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b'), isDefault: true });
const kc = (await testControlPlane('target-b')).kubeconfigPath;
const ns = uniqueName('apply');
const other = uniqueName('apply-other');
for (const n of [ns, other]) {
  t.equal(kubectl(kc, ['create', 'namespace', n]).status, 0);
  t.teardown(() => kubectl(kc, ['delete', 'namespace', n, '--wait=false']));
}
const group = `${uniqueName('g')}.example.com`;
const crdName = `gadgets.${group}`;
t.teardown(() => kubectl(kc, ['delete', 'crd', crdName, `sprockets.${group}`, '--ignore-not-found', '--wait=false']));

const yamlOf = (...docs: object[]) => docs.map((d) => stringify(d)).join('---\n');
const apply = (caller: Caller | undefined, body: unknown) =>
  call(gw.url, 'POST', '/api/v1/resources/apply', { headers: caller?.headers ?? {}, body });
const exists = (args: string[]) => kubectl(kc, ['get', ...args, '-o', 'name']).status === 0;
const configMap = (name: string, namespace: string, data: Record<string, string> = { k: 'v' }) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace },
  data,
});

function crd(
  plural: string,
  kind: string,
  schema: object = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema } }],
    },
  };
}

t.test('anonymous: 401 before the body is read', async (t) => {
  const res = await apply(undefined, { yaml: yamlOf(configMap('anon', ns)) });
  t.equal(res.status, 401);
  t.notOk(exists(['configmap', 'anon', '-n', ns]));
});

t.test('bad bodies: 400 (413 when too large), nothing applied', async (t) => {
  const cases: Array<[unknown, number, RegExp]> = [
    [{}, 400, /yaml/],
    [{ yaml: 5 }, 400, /document 1: not an object/],
    [{ yaml: yamlOf(configMap('x1', ns)), extra: true }, 400, /additional/],
    [{ yaml: 'a: [unclosed' }, 400, /document 1: invalid YAML/],
    [{ yaml: `${yamlOf(configMap('x2', ns))}---\n- a list\n` }, 400, /document 2: not an object/],
    [{ yaml: yamlOf({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'x-' } }) }, 400, /metadata.name/],
    [{ yaml: yamlOf({ kind: 'ConfigMap', metadata: { name: 'x3' } }) }, 400, /apiVersion/],
    [{ yaml: '---\n---\n' }, 400, /no document/],
    [
      { yaml: Array.from({ length: 101 }, (_, i) => stringify(configMap(`many-${i}`, ns))).join('---\n') },
      400,
      /more than 100 documents/,
    ],
    [{ yaml: `# ${'x'.repeat(2 * 1024 * 1024)}\n${stringify(configMap('big', ns))}` }, 413, /larger than/],
  ];
  for (const [body, status, message] of cases) {
    const res = await apply(admin, body);
    t.equal(res.status, status, `${JSON.stringify(body).slice(0, 60)}: ${res.text.slice(0, 200)}`);
    t.match(res.body?.error, message);
  }
  t.notOk(exists(['configmap', 'x2', '-n', ns]), 'the good document of a file with a bad one was not applied');
  t.notOk(exists(['configmap', 'many-0', '-n', ns]));
});

t.test('a kind the cluster does not serve: 404, nothing applied', async (t) => {
  const res = await apply(admin, {
    yaml: yamlOf(configMap('before-unknown', ns), {
      apiVersion: `${group}/v1`,
      kind: 'Nothing',
      metadata: { name: 'n', namespace: ns },
    }),
  });
  t.equal(res.status, 404, res.text);
  t.match(res.body.error, /document 2 \(Nothing .*serves no kind Nothing/);
  t.notOk(exists(['configmap', 'before-unknown', '-n', ns]));
});

t.test('a CRD, its custom resource, an Ingress and a ConfigMap in one file', async (t) => {
  const gadget = {
    apiVersion: `${group}/v1`,
    kind: 'Gadget',
    metadata: { name: 'g1', namespace: ns },
    spec: { size: 3 },
  };
  const ingress = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: 'web', namespace: ns },
    spec: { defaultBackend: { service: { name: 'web', port: { number: 80 } } } },
  };
  // The custom resource comes first in the file: the CRD is applied first anyway.
  const file = yamlOf(gadget, crd('gadgets', 'Gadget'), ingress, configMap('settings', ns));
  const res = await apply(admin, { yaml: file });
  t.equal(res.status, 200, res.text);
  t.equal(res.body.message, 'applied 4 documents');
  t.match(res.body, { kind: 'Gadget', name: 'g1', namespace: ns, dryRun: false }, "Kite's members: the first document");
  t.same(
    res.body.documents.map((d: { kind: string; resource: string; result: string; status: number }) => [
      d.kind,
      d.resource,
      d.result,
      d.status,
    ]),
    [
      ['Gadget', `gadgets.${group}`, 'created', 201],
      ['CustomResourceDefinition', 'customresourcedefinitions', 'created', 201],
      ['Ingress', 'ingresses', 'created', 201],
      ['ConfigMap', 'configmaps', 'created', 201],
    ],
    'each document resolved through discovery (ingresses, not "ingresss") and created',
  );
  const g = JSON.parse(
    kubectl(kc, ['get', `gadgets.${group}`, 'g1', '-n', ns, '-o', 'json', '--show-managed-fields']).stdout,
  );
  t.equal(g.spec.size, 3);
  t.ok(
    g.metadata.managedFields.some(
      (m: { manager: string; operation: string }) => m.manager === 'kiteline' && m.operation === 'Apply',
    ),
    'server-side apply, field manager kiteline',
  );
  t.ok(exists(['ingress', 'web', '-n', ns]));

  const listed = await call(gw.url, 'GET', `/api/v1/gadgets.${group}/${ns}`, { headers: admin.headers });
  t.equal(listed.status, 200, 'the new kind is served through the resource routes at once');
  t.same(
    listed.body.items.map((i: { metadata: { name: string } }) => i.metadata.name),
    ['g1'],
  );

  const again = await apply(admin, { yaml: file });
  t.equal(again.status, 200, again.text);
  t.same(
    again.body.documents.map((d: { result: string }) => d.result),
    ['configured', 'configured', 'configured', 'configured'],
    'a second apply configures',
  );
});

t.test('one bad document in a file changes nothing', async (t) => {
  const badDeployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'broken', namespace: ns },
    spec: { template: { spec: { containers: [] } } },
  };
  const res = await apply(admin, { yaml: yamlOf(configMap('good-1', ns), badDeployment, configMap('good-2', ns)) });
  t.equal(res.status, 422, res.text);
  t.match(res.body.error, /document 2 \(Deployment .*\/broken\).*nothing was applied/);
  t.same(
    res.body.details.documents.map((d: { result: string }) => d.result),
    ['not-applied', 'failed', 'not-applied'],
  );
  t.notOk(exists(['configmap', 'good-1', '-n', ns]), 'the document before the bad one was not applied');
  t.notOk(exists(['configmap', 'good-2', '-n', ns]));
});

t.test('a CRD whose custom resource of the same file is invalid is removed again', async (t) => {
  const strict = crd('sprockets', 'Sprocket', {
    type: 'object',
    properties: { spec: { type: 'object', properties: { teeth: { type: 'integer', minimum: 1 } } } },
  });
  const bad = {
    apiVersion: `${group}/v1`,
    kind: 'Sprocket',
    metadata: { name: 's1', namespace: ns },
    spec: { teeth: 0 },
  };
  const res = await apply(admin, { yaml: yamlOf(strict, configMap('with-sprocket', ns), bad) });
  t.equal(res.status, 422, res.text);
  t.same(
    res.body.details.documents.map((d: { kind: string; result: string }) => [d.kind, d.result]),
    [
      ['CustomResourceDefinition', 'removed'],
      ['ConfigMap', 'not-applied'],
      ['Sprocket', 'failed'],
    ],
  );
  t.notOk(exists(['configmap', 'with-sprocket', '-n', ns]));
  await eventually('the CRD to be gone', () => !exists(['crd', `sprockets.${group}`]), 30_000, 200);
});

t.test('a field another manager owns: 409 conflict, then force takes it', async (t) => {
  t.equal(kubectl(kc, ['-n', ns, 'create', 'configmap', 'owned', '--from-literal=k=kubectl']).status, 0);
  const res = await apply(admin, { yaml: yamlOf(configMap('owned', ns, { k: 'kiteline' })) });
  t.equal(res.status, 409, res.text);
  t.equal(res.body.reason, 'Conflict');
  t.match(res.body.details.documents[0], { result: 'failed', status: 409, reason: 'Conflict', error: /conflict/i });
  t.equal(
    JSON.parse(kubectl(kc, ['-n', ns, 'get', 'configmap', 'owned', '-o', 'json']).stdout).data.k,
    'kubectl',
    'unchanged',
  );
  const forced = await apply(admin, { yaml: yamlOf(configMap('owned', ns, { k: 'kiteline' })), force: true });
  t.equal(forced.status, 200, forced.text);
  t.equal(
    JSON.parse(kubectl(kc, ['-n', ns, 'get', 'configmap', 'owned', '-o', 'json']).stdout).data.k,
    'kiteline',
    'force took the field',
  );
});

t.test('dry run: every document checked, nothing written', async (t) => {
  const res = await apply(admin, { yaml: yamlOf(configMap('dry', ns)), dryRun: true });
  t.equal(res.status, 200, res.text);
  t.match(res.body, { dryRun: true, documents: [{ result: 'created', status: 201 }] });
  t.notOk(exists(['configmap', 'dry', '-n', ns]));
});

t.test('authorization per document: a namespace-limited role, the viewer', async (t) => {
  await createRole(gw, admin, {
    name: 'apply-ns-editor',
    clusters: ['*'],
    namespaces: [ns],
    resources: ['*'],
    verbs: ['*'],
  });
  const editor = await apiKeyWithRoles(gw, admin, 'apply-editor', ['apply-ns-editor']);
  const viewer = await apiKeyWithRoles(gw, admin, 'apply-viewer', ['viewer']);

  const mine = await apply(editor, { yaml: yamlOf(configMap('editor-own', ns)) });
  t.equal(mine.status, 200, `allowed in its namespace: ${mine.text}`);
  const mixed = await apply(editor, { yaml: yamlOf(configMap('editor-mixed', ns), configMap('editor-other', other)) });
  t.equal(mixed.status, 403, mixed.text);
  t.match(mixed.body.error, new RegExp(`document 2 .*may not create configmaps in namespace ${other}`));
  t.notOk(exists(['configmap', 'editor-mixed', '-n', ns]), 'the allowed document of the file was not applied either');
  t.notOk(exists(['configmap', 'editor-other', '-n', other]));
  const cluster = await apply(editor, {
    yaml: yamlOf({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: uniqueName('nope') } }),
  });
  t.equal(cluster.status, 403, 'a cluster-scoped kind needs the role across all namespaces');

  const viewed = await apply(viewer, { yaml: yamlOf(configMap('viewer-cm', ns)) });
  t.equal(viewed.status, 403);
  t.notOk(exists(['configmap', 'viewer-cm', '-n', ns]));
  const crds = await call(gw.url, 'GET', '/api/v1/crds', { headers: editor.headers });
  t.equal(crds.status, 403, 'listing CRDs needs customresourcedefinitions across all namespaces');
});

t.test('a Namespace and the objects in it, in one file', async (t) => {
  const fresh = uniqueName('apply-fresh');
  t.teardown(() => kubectl(kc, ['delete', 'namespace', fresh, '--ignore-not-found', '--wait=false']));
  const res = await apply(admin, {
    yaml: yamlOf(configMap('inside', fresh), { apiVersion: 'v1', kind: 'Namespace', metadata: { name: fresh } }),
  });
  t.equal(res.status, 200, res.text);
  t.ok(exists(['configmap', 'inside', '-n', fresh]));
  const defaulted = await apply(admin, {
    yaml: yamlOf({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'no-namespace' } }),
    namespace: ns,
  });
  t.equal(defaulted.status, 200, defaulted.text);
  t.ok(
    exists(['configmap', 'no-namespace', '-n', ns]),
    'a document without a namespace goes to the one the request names',
  );
});

t.test("kiteline's own namespace on its host cluster: 403 for every document, admins included", async (t) => {
  await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });
  const hostKc = (await testControlPlane('host')).kubeconfigPath;
  const res = await call(gw.url, 'POST', '/api/v1/resources/apply', {
    headers: { ...admin.headers, 'x-cluster-name': 'h' },
    body: { yaml: yamlOf(configMap('planted', gw.namespace)) },
  });
  t.equal(res.status, 403, res.text);
  t.equal(kubectl(hostKc, ['-n', gw.namespace, 'get', 'configmap', 'planted']).status, 1, 'nothing planted');
});

t.test("Kite's CRD routes", async (t) => {
  const list = await call(gw.url, 'GET', '/api/v1/crds', { headers: admin.headers });
  t.equal(list.status, 200);
  t.ok(list.body.items.some((c: { metadata: { name: string } }) => c.metadata.name === crdName));
  const all = await call(gw.url, 'GET', '/api/v1/crds/_all', { headers: admin.headers });
  t.equal(all.status, 200);
  const one = await call(gw.url, 'GET', `/api/v1/crds/_all/${crdName}`, { headers: admin.headers });
  t.equal(one.status, 200);
  t.equal(one.body.spec.names.kind, 'Gadget');
  const missing = await call(gw.url, 'GET', `/api/v1/crds/_all/nothing.${group}`, { headers: admin.headers });
  t.equal(missing.status, 404);
  t.equal((await call(gw.url, 'GET', '/api/v1/crds')).status, 401);
});

t.test('GET /api/v1/version', async (t) => {
  const res = await call(gw.url, 'GET', '/api/v1/version', { headers: admin.headers });
  t.equal(res.status, 200);
  t.match(res.body, { version: /^\d+\.\d+\.\d+/, buildDate: '', commitId: '', hasNewVersion: false, releaseUrl: '' });
  t.equal((await call(gw.url, 'GET', '/api/v1/version')).status, 401);
});

t.test('what kiteline does not build answers a JSON 404, never HTML', async (t) => {
  for (const [method, path] of [
    ['GET', '/api/v1/no-such-thing'],
    ['POST', '/api/v1/no/such/route/at/all'],
    ['GET', '/api/nothing-here'],
  ] as const) {
    const res = await call(gw.url, method, path, { headers: admin.headers });
    t.equal(res.status, 404, `${method} ${path}: ${res.text.slice(0, 120)}`);
    t.match(res.headers.get('content-type'), /^application\/json/);
    t.type(res.body?.error, 'string');
  }
});
