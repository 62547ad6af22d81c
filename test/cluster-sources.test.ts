// Cluster sources (docs/clusters.md, "Clusters from where they already live") on real control
// planes: an Argo CD cluster Secret, a Cluster API kubeconfig Secret and a ClusterProfile (its CRD
// installed from the published schema in test/fixtures/) are each applied with kubectl in their own
// namespace on the host, served through the gateway by x-cluster-name right after, rotated (a
// broken credential, then a good one, no restart), read-only in the admin API (409 naming the
// source) and gone once the source object is deleted. Then a clash with a REST-registered cluster
// (reported on both objects, the REST one keeps the name) and hostile sources (exec plugins, file
// paths, bad servers, a bad name) that end as a clear status, never as a crash.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { PACKAGE_ROOT } from '../src/config.js';
import { sourcedObjectName } from '../src/host/clusters.js';
import type { ClusterResource, Condition } from '../src/host/resources.js';
import { kubectl, kubectlInBackground, TEST_DIR, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  registerCluster,
  testKubeconfig,
  waitClusterReady,
} from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';

const ADMIN_PREFIX = '/api/v1/admin/clusters';
const CRD = 'clusterprofiles.multicluster.x-k8s.io';

interface Target {
  server: string;
  caData: string;
  token: string;
  kubeconfig: string;
}

function target(name: 'target-a' | 'target-b'): Target {
  const kubeconfig = testKubeconfig(name);
  const doc = parse(kubeconfig);
  return {
    server: doc.clusters[0].cluster.server,
    caData: doc.clusters[0].cluster['certificate-authority-data'],
    token: doc.users[0].user.token,
    kubeconfig,
  };
}

/** Set-up that must work (an assertion at the top level would end tap's root test early). */
function must(res: { status: number; stderr: string }, what: string): void {
  if (res.status !== 0) throw new Error(`${what}: ${res.stderr}`);
}

const hostKubeconfig = (await testControlPlane('host')).kubeconfigPath;
const a = target('target-a');
const b = target('target-b');

// The ClusterProfile CRD as published (its CEL rules are newer than the planes' API server, which
// drops them; kubectl's client-side check would refuse them). Left installed: other runs share it.
must(
  kubectl(hostKubeconfig, [
    'apply',
    '--validate=false',
    '-f',
    join(PACKAGE_ROOT, 'test', 'fixtures', 'clusterprofile-crd.yaml'),
  ]),
  'install the ClusterProfile CRD',
);
must(
  kubectl(hostKubeconfig, ['wait', '--for=condition=Established', `crd/${CRD}`, '--timeout=60s']),
  'the ClusterProfile CRD is established',
);

// A namespace only target-a has: tells which target answered.
const targetAKubeconfig = (await testControlPlane('target-a')).kubeconfigPath;
const onlyOnA = uniqueName('only-a');
must(kubectl(targetAKubeconfig, ['create', 'namespace', onlyOnA]), 'a namespace only target-a has');
t.teardown(() => kubectl(targetAKubeconfig, ['delete', 'namespace', onlyOnA, '--wait=false']));

const argoNs = uniqueName('src-argo');
const capiNs = uniqueName('src-capi');
const profileNs = uniqueName('src-cp');
for (const ns of [argoNs, capiNs, profileNs]) {
  must(kubectl(hostKubeconfig, ['create', 'namespace', ns]), `namespace ${ns}`);
  t.teardown(() => kubectl(hostKubeconfig, ['delete', 'namespace', ns, '--wait=false']));
}

const GATEWAY_ENV = {
  KITELINE_CLUSTER_SOURCES: `argocd=${argoNs};capi=${capiNs};clusterprofile=${profileNs}`,
  // Published into the namespace read as a source too: they must not come back as clusters.
  KITELINE_PUBLISH_CLUSTERPROFILES: profileNs,
  KITELINE_EXTERNAL_URL: 'https://kiteline.example',
  KITELINE_PROBE_INTERVAL_MS: '500',
};
const gw = await startGateway(t, {
  env: GATEWAY_ENV,
  logName: 'cluster-sources',
});
const admin = await bootstrapAdmin(gw);

const hostKc = new k8s.KubeConfig();
hostKc.loadFromFile(hostKubeconfig);
const customObjects = hostKc.makeApiClient(k8s.CustomObjectsApi);

async function apply(obj: object): Promise<void> {
  const res = await kubectlInBackground(hostKubeconfig, ['apply', '-f', '-'], JSON.stringify(obj));
  if (res.status !== 0) throw new Error(`kubectl apply: ${res.stderr}`);
}

async function remove(namespace: string, kind: string, name: string): Promise<void> {
  const res = await kubectlInBackground(hostKubeconfig, ['-n', namespace, 'delete', kind, name]);
  if (res.status !== 0) throw new Error(`kubectl delete: ${res.stderr}`);
}

/** GET a namespace on the cluster named `cluster` through the gateway. */
function namespaceThrough(cluster: string, namespace = 'default') {
  return call(gw.url, 'GET', `/api/v1/namespaces/_all/${namespace}`, {
    headers: { ...admin.headers, 'x-cluster-name': cluster },
  });
}

/** Polls until a request through `cluster` answers 200; returns how long that took after `since`. */
async function servedWithin(cluster: string, since: number): Promise<number> {
  await eventually(`${cluster} to serve`, async () => (await namespaceThrough(cluster)).status === 200, 30_000, 25);
  return Date.now() - since;
}

interface View {
  id: number;
  name: string;
  ready: boolean;
  error: string;
  source?: { kind: string; namespace: string; name: string };
}

async function adminList(): Promise<View[]> {
  const res = await call<View[]>(gw.url, 'GET', `${ADMIN_PREFIX}/`, { headers: admin.headers });
  if (res.status !== 200) throw new Error(`admin list: ${res.status} ${res.text}`);
  return res.body;
}

function clusterObject(objectName: string): ClusterResource | undefined {
  const res = kubectl(hostKubeconfig, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', objectName, '-o', 'json']);
  return res.status === 0 ? (JSON.parse(res.stdout) as ClusterResource) : undefined;
}

function conditionOf(cr: ClusterResource | undefined, type: string): Condition | undefined {
  return cr?.status?.conditions?.find((c) => c.type === type);
}

function argoSecret(name: string, clusterName: string, server: string, config: object, namespace = argoNs) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace, labels: { 'argocd.argoproj.io/secret-type': 'cluster' } },
    stringData: { name: clusterName, server, config: JSON.stringify(config) },
  };
}

/** The admin API refuses to change or delete a sourced cluster: 409 naming its source. */
async function readOnlyInAdminApi(tt: Test, id: number, sourceText: RegExp): Promise<void> {
  const put = await call(gw.url, 'PUT', `${ADMIN_PREFIX}/${id}`, {
    body: { description: 'mine now' },
    headers: admin.headers,
  });
  tt.equal(put.status, 409, 'PUT: 409');
  tt.match(put.body, { reason: 'Conflict', error: sourceText });
  const del = await call(gw.url, 'DELETE', `${ADMIN_PREFIX}/${id}`, { headers: admin.headers });
  tt.equal(del.status, 409, 'DELETE: 409');
  tt.match(del.body, { reason: 'Conflict', error: sourceText });
}

/** Waits until requests through `cluster` no longer succeed (a broken credential took effect). */
async function stopsServing(cluster: string): Promise<number> {
  const res = await eventually(
    `${cluster} to fail`,
    async () => {
      const r = await namespaceThrough(cluster);
      return r.status !== 200 ? r : undefined;
    },
    30_000,
    25,
  );
  return res.status;
}

/** Waits until `cluster` is unknown to the gateway (404) and gone from the admin list. */
async function gone(cluster: string): Promise<void> {
  await eventually(`${cluster} to be gone`, async () => (await namespaceThrough(cluster)).status === 404, 30_000, 50);
  await eventually(`${cluster} to leave the list`, async () => !(await adminList()).some((c) => c.name === cluster));
}

t.test('Argo CD cluster Secret: added, served, rotated, read-only, removed', async (t) => {
  const name = uniqueName('argo');
  const good = { bearerToken: a.token, tlsClientConfig: { caData: a.caData } };
  const applied = Date.now();
  await apply(argoSecret(name, name, a.server, good));
  t.comment(`served ${await servedWithin(name, applied)} ms after kubectl apply returned`);

  const view = (await adminList()).find((c) => c.name === name);
  t.ok(view && view.id > 0, 'listed with an id');
  t.same(view?.source, { kind: 'argocd', namespace: argoNs, name }, 'with its source');
  const objectName = sourcedObjectName('argocd', argoNs, name);
  const cr = await eventually('status written', () => {
    const obj = clusterObject(objectName);
    return obj?.status?.ready ? obj : undefined;
  });
  t.equal(cr.metadata.labels?.['kiteline.io/source'], 'argocd', 'labelled with its source');
  t.equal(cr.metadata.annotations?.['kiteline.io/source-object'], `${argoNs}/${name}`, 'names its source object');
  t.match(conditionOf(cr, 'Ready'), { status: 'True', reason: 'Reachable' }, 'health in its status');

  await readOnlyInAdminApi(t, view!.id, new RegExp(`Argo CD cluster Secret ${argoNs}/${name}`));
  const makeDefault = await call(gw.url, 'PUT', `${ADMIN_PREFIX}/${view!.id}`, {
    body: { isDefault: true },
    headers: admin.headers,
  });
  t.equal(makeDefault.status, 200, `the one change allowed: making it the default (${makeDefault.text})`);
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/namespaces/_all/default', { headers: admin.headers })).status,
    200,
    'requests naming no cluster go to it',
  );

  // Rotation: a revoked token, then the good one again, without a restart.
  await apply(argoSecret(name, name, a.server, { ...good, bearerToken: 'not-a-valid-token' }));
  t.not(await stopsServing(name), 200, 'a broken token stops serving');
  await apply(argoSecret(name, name, a.server, good));
  await servedWithin(name, Date.now());
  t.pass('the good token serves again');
  t.equal((await adminList()).find((c) => c.name === name)?.id, view!.id, 'the id is stable across rotations');

  await remove(argoNs, 'secret', name);
  await gone(name);
  t.equal(clusterObject(objectName), undefined, 'its Cluster object is deleted');
});

t.test('Cluster API kubeconfig Secret: added, served, rotated, removed; other CAPI Secrets ignored', async (t) => {
  const cluster = uniqueName('capi');
  const secret = (value: string) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'cluster.x-k8s.io/secret',
    metadata: {
      name: `${cluster}-kubeconfig`,
      namespace: capiNs,
      labels: { 'cluster.x-k8s.io/cluster-name': cluster },
    },
    stringData: { value },
  });
  // The cluster's CA Secret carries the label too; it is not a kubeconfig.
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${cluster}-ca`, namespace: capiNs, labels: { 'cluster.x-k8s.io/cluster-name': cluster } },
    stringData: { 'tls.crt': 'x', 'tls.key': 'y' },
  });
  const applied = Date.now();
  await apply(secret(b.kubeconfig));
  t.comment(`served ${await servedWithin(cluster, applied)} ms after kubectl apply returned`);
  const list = await adminList();
  const mine = list.filter((c) => c.source?.namespace === capiNs);
  t.equal(mine.length, 1, 'one cluster: the -ca Secret is not a source');
  t.same(mine[0]?.source, { kind: 'capi', namespace: capiNs, name: `${cluster}-kubeconfig` });
  t.equal(mine[0]?.name, cluster, 'named after the CAPI cluster');
  await readOnlyInAdminApi(t, mine[0].id, new RegExp(`Cluster API kubeconfig Secret ${capiNs}/${cluster}-kubeconfig`));

  await apply(secret(b.kubeconfig.replace(b.token, 'revoked-token')));
  t.not(await stopsServing(cluster), 200, 'a broken token stops serving');
  await apply(secret(b.kubeconfig));
  await servedWithin(cluster, Date.now());
  t.pass('the good kubeconfig serves again');

  await remove(capiNs, 'secret', `${cluster}-kubeconfig`);
  await gone(cluster);
  await remove(capiNs, 'secret', `${cluster}-ca`);
});

t.test('ClusterProfile: server and CA from its status, token from the labelled Secret', async (t) => {
  const name = uniqueName('cp');
  await apply({
    apiVersion: 'multicluster.x-k8s.io/v1alpha1',
    kind: 'ClusterProfile',
    metadata: { name, namespace: profileNs },
    spec: { displayName: name, clusterManager: { name: 'test-manager' } },
  });
  const credentials = (data: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${name}-credentials`, namespace: profileNs, labels: { 'kiteline.io/clusterprofile': name } },
    stringData: data,
  });
  // The Secret pins the server its token is for (issue 32 point 4: clusterprofile-pinning.test.ts).
  await apply(credentials({ token: a.token, server: a.server }));
  const objectName = sourcedObjectName('clusterprofile', profileNs, name);
  const waiting = await eventually('the profile without access providers to be reported', () => {
    const cr = clusterObject(objectName);
    return conditionOf(cr, 'Ready')?.reason === 'SourceInvalid' ? cr : undefined;
  });
  t.match(conditionOf(waiting, 'Ready')?.message, /no status\.accessProviders/, 'no server yet: said so');

  const applied = Date.now();
  await customObjects.patchNamespacedCustomObjectStatus(
    {
      group: 'multicluster.x-k8s.io',
      version: 'v1alpha1',
      namespace: profileNs,
      plural: 'clusterprofiles',
      name,
      body: {
        status: {
          accessProviders: [
            { name: 'kubeconfig', cluster: { server: a.server, 'certificate-authority-data': a.caData } },
          ],
        },
      },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
  t.comment(`served ${await servedWithin(name, applied)} ms after the status was written`);
  const view = (await adminList()).find((c) => c.name === name);
  t.same(view?.source, { kind: 'clusterprofile', namespace: profileNs, name });
  await readOnlyInAdminApi(t, view!.id, new RegExp(`ClusterProfile ${profileNs}/${name}`));
  const profile = (await customObjects.getNamespacedCustomObject({
    group: 'multicluster.x-k8s.io',
    version: 'v1alpha1',
    namespace: profileNs,
    plural: 'clusterprofiles',
    name,
  })) as { status?: { conditions?: unknown } };
  t.equal(profile.status?.conditions, undefined, 'kiteline writes nothing into a ClusterProfile it reads');

  await apply(credentials({ token: 'revoked', server: a.server }));
  t.not(await stopsServing(name), 200, 'a broken token stops serving');
  // The other supported credential form: a kubeconfig whose user is used (its server is the pin).
  await kubectlInBackground(hostKubeconfig, ['-n', profileNs, 'delete', 'secret', `${name}-credentials`]);
  await apply(credentials({ kubeconfig: a.kubeconfig }));
  await servedWithin(name, Date.now());
  t.pass('a kubeconfig credential serves');

  await remove(profileNs, 'clusterprofile', name);
  await gone(name);
  await remove(profileNs, 'secret', `${name}-credentials`);
});

t.test('a clash with a REST-registered cluster: the REST one keeps the name, both report it', async (t) => {
  const name = uniqueName('clash');
  // Another default, so that the clashing REST cluster can be deleted later (the default cannot).
  await registerCluster(gw, admin, { name: uniqueName('anchor'), config: b.kubeconfig, isDefault: true });
  const restId = await registerCluster(gw, admin, { name, config: a.kubeconfig });
  await waitClusterReady(gw, admin, name);
  const secret = `${name}-argo`;
  await apply(argoSecret(secret, name, b.server, { bearerToken: b.token, tlsClientConfig: { caData: b.caData } }));
  const sourcedName = sourcedObjectName('argocd', argoNs, secret);
  const restObject = (await adminList()).find((c) => c.id === restId);
  t.ok(restObject, 'the REST cluster is listed');

  const [rest, sourced] = await eventually('both statuses to report the clash', () => {
    const objects = JSON.parse(
      kubectl(hostKubeconfig, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', '-o', 'json']).stdout,
    ).items as ClusterResource[];
    const r = objects.find((o) => o.metadata.labels?.['kiteline.io/id'] === String(restId));
    const s = objects.find((o) => o.metadata.name === sourcedName);
    const settled = conditionOf(s, 'Ready')?.reason === 'NameConflict';
    return settled && conditionOf(r, 'NameConflict') && conditionOf(s, 'NameConflict') ? [r!, s!] : undefined;
  });
  t.match(conditionOf(rest, 'NameConflict'), {
    status: 'True',
    reason: 'ServesName',
    message: new RegExp(`serves the name.*${sourcedName}.*Argo CD cluster Secret ${argoNs}/${secret}`),
  });
  t.match(conditionOf(sourced, 'NameConflict'), {
    status: 'True',
    reason: 'NameTaken',
    message: new RegExp(`served by cluster object "${rest.metadata.name}".*registered through the API`),
  });
  t.match(conditionOf(sourced, 'Ready'), { status: 'False', reason: 'NameConflict' });
  t.equal((await namespaceThrough(name, onlyOnA)).status, 200, 'the name still reaches the REST cluster (target-a)');
  t.equal((await adminList()).filter((c) => c.name === name).length, 2, 'both are listed, by id');

  // The REST cluster disabled (no connection now): the source still does not step into its name.
  const setEnabled = (enabled: boolean) =>
    call(gw.url, 'PUT', `${ADMIN_PREFIX}/${restId}`, { headers: admin.headers, body: { enabled } });
  t.equal((await setEnabled(false)).status, 200);
  t.equal((await namespaceThrough(name)).status, 404, 'a disabled REST cluster: its name is served by nobody');
  t.equal((await setEnabled(true)).status, 200);
  await waitClusterReady(gw, admin, name);

  // The REST cluster goes: the source's cluster takes the name, the conflict is cleared.
  const del = await call(gw.url, 'DELETE', `${ADMIN_PREFIX}/${restId}`, { headers: admin.headers });
  t.equal(del.status, 200, del.text);
  await eventually('the source to serve the name', async () => (await namespaceThrough(name, onlyOnA)).status === 404);
  t.equal((await namespaceThrough(name)).status, 200, 'target-b now answers under the name');
  await eventually('the conflict cleared', () => {
    const cr = clusterObject(sourcedName);
    return cr && !conditionOf(cr, 'NameConflict') && conditionOf(cr, 'Ready')?.status === 'True';
  });
  t.pass('the sourced cluster is ready without a conflict');
  await remove(argoNs, 'secret', secret);
  await gone(name);
});

t.test('a clash where the source came first: a kubectl-registered cluster still takes the name', async (t) => {
  const name = uniqueName('first');
  const secret = `${name}-argo`;
  await apply(argoSecret(secret, name, b.server, { bearerToken: b.token, tlsClientConfig: { caData: b.caData } }));
  await servedWithin(name, Date.now());
  t.equal((await namespaceThrough(name, onlyOnA)).status, 404, 'served by the source (target-b)');
  const sourcedName = sourcedObjectName('argocd', argoNs, secret);
  const rest = await call(gw.url, 'POST', `${ADMIN_PREFIX}/`, {
    body: { name, config: a.kubeconfig },
    headers: admin.headers,
  });
  t.equal(rest.status, 409, 'the API refuses a name a source holds');
  t.match(rest.body, { reason: 'AlreadyExists' });

  // kubectl applies a Cluster of that name: it gets a higher id than the source's, and the name.
  const objectName = uniqueName('kubectl-cluster');
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${objectName}-kubeconfig`, namespace: gw.namespace },
    stringData: { kubeconfig: a.kubeconfig },
  });
  await apply({
    apiVersion: 'kiteline.io/v1alpha1',
    kind: 'Cluster',
    metadata: { name: objectName, namespace: gw.namespace },
    spec: { name, kubeconfigSecretRef: { name: `${objectName}-kubeconfig` } },
  });
  await eventually('the kubectl cluster to take the name', async () => {
    return (await namespaceThrough(name, onlyOnA)).status === 200;
  });
  t.pass('the name reaches target-a: the kubectl-registered cluster serves it');
  // Listed once the id back-fill gave the kubectl cluster its id (it serves before that too).
  const ids = await eventually('both listed', async () => {
    const both = (await adminList()).filter((c) => c.name === name);
    return both.length === 2 ? both : undefined;
  });
  t.ok(ids.find((c) => c.source)!.id < ids.find((c) => !c.source)!.id, 'although the source has the lower id');
  const sourced = await eventually('the clash reported', () => {
    const cr = clusterObject(sourcedName);
    return conditionOf(cr, 'NameConflict')?.reason === 'NameTaken' ? cr : undefined;
  });
  t.match(conditionOf(sourced, 'NameConflict')?.message, new RegExp(`served by cluster object "${objectName}"`));
  await eventually('reported on the kubectl cluster too', () => {
    return conditionOf(clusterObject(objectName), 'NameConflict')?.reason === 'ServesName';
  });
  t.pass('both objects report it');

  await remove(gw.namespace, 'clusters.kiteline.io', objectName);
  await remove(gw.namespace, 'secret', `${objectName}-kubeconfig`);
  await eventually('the source to serve the name again', async () => {
    return (await namespaceThrough(name, onlyOnA)).status === 404 && (await namespaceThrough(name)).status === 200;
  });
  t.pass('the source serves the name again');
  await remove(argoNs, 'secret', secret);
  await gone(name);
});

t.test('hostile sources: a clear status each, no crash, other clusters unaffected', async (t) => {
  const bad: Array<{ obj: object; kind: 'argocd' | 'capi'; namespace: string; source: string; error: RegExp }> = [];
  const exec = uniqueName('exec');
  bad.push({
    obj: argoSecret(exec, exec, a.server, { execProviderConfig: { command: 'sh', args: ['-c', 'touch /tmp/pwned'] } }),
    kind: 'argocd',
    namespace: argoNs,
    source: exec,
    error: /execProviderConfig is not supported/,
  });
  const aws = uniqueName('aws');
  bad.push({
    obj: argoSecret(aws, aws, a.server, { awsAuthConfig: { clusterName: 'x' } }),
    kind: 'argocd',
    namespace: argoNs,
    source: aws,
    error: /awsAuthConfig is not supported/,
  });
  const ftp = uniqueName('ftp');
  bad.push({
    obj: argoSecret(ftp, ftp, 'ftp://127.0.0.1:21', { bearerToken: 'x' }),
    kind: 'argocd',
    namespace: argoNs,
    source: ftp,
    error: /server must be an http\(s\) URL/,
  });
  const badJson = uniqueName('json');
  bad.push({
    obj: {
      ...argoSecret(badJson, badJson, a.server, {}),
      stringData: { name: badJson, server: a.server, config: '{not json' },
    },
    kind: 'argocd',
    namespace: argoNs,
    source: badJson,
    error: /config is not valid JSON/,
  });
  const badName = uniqueName('badname');
  bad.push({
    obj: argoSecret(badName, 'no spaces allowed here', a.server, { bearerToken: a.token }),
    kind: 'argocd',
    namespace: argoNs,
    source: badName,
    error: /cluster name is not usable/,
  });
  const file = uniqueName('file');
  bad.push({
    obj: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `${file}-kubeconfig`, namespace: capiNs, labels: { 'cluster.x-k8s.io/cluster-name': file } },
      stringData: {
        value: a.kubeconfig.replace(/token: .*/, 'tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token'),
      },
    },
    kind: 'capi',
    namespace: capiNs,
    source: `${file}-kubeconfig`,
    error: /tokenFile is a file path/,
  });
  for (const b of bad) await apply(b.obj);
  for (const b of bad) {
    const objectName = sourcedObjectName(b.kind, b.namespace, b.source);
    const cr = await eventually(`the status of ${b.source}`, () => {
      const obj = clusterObject(objectName);
      return conditionOf(obj, 'Ready')?.reason === 'SourceInvalid' ? obj : undefined;
    });
    t.match(conditionOf(cr, 'Ready')?.message, b.error, `${b.source}: ${conditionOf(cr, 'Ready')?.message}`);
    const stored = kubectl(hostKubeconfig, ['-n', gw.namespace, 'get', 'secret', `${objectName}-kubeconfig`]);
    t.not(stored.status, 0, `${b.source}: no kubeconfig stored`);
  }
  const listed = await adminList();
  const execView = listed.find((c) => c.name === exec);
  t.match(execView, { ready: false, error: /execProviderConfig is not supported/ }, 'the admin list shows why');
  t.equal((await namespaceThrough(exec)).status === 200, false, 'an unusable source serves nothing');
  t.notOk(JSON.stringify(listed).includes(a.token), 'no credential in the admin list');
  t.equal((await call(gw.url, 'GET', '/healthz')).status, 200, 'the gateway is up');

  // A hostile source made good is served (it was never stuck).
  await apply(argoSecret(exec, exec, a.server, { bearerToken: a.token, tlsClientConfig: { caData: a.caData } }));
  await servedWithin(exec, Date.now());
  t.pass('fixed in the source: served');
  for (const b of bad) {
    const meta = (b.obj as { metadata: { name: string; namespace: string } }).metadata;
    await remove(meta.namespace, 'secret', meta.name);
  }
  await gone(exec);
});

interface PublishedProfile {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { displayName?: string; clusterManager?: { name?: string } };
  status?: {
    version?: { kubernetes?: string };
    conditions?: Condition[];
    accessProviders?: Array<{ name: string; cluster: { server: string } }>;
  };
}

function publishedProfile(name: string): PublishedProfile | undefined {
  const res = kubectl(hostKubeconfig, ['-n', profileNs, 'get', 'clusterprofiles', name, '-o', 'json']);
  return res.status === 0 ? (JSON.parse(res.stdout) as PublishedProfile) : undefined;
}

t.test('publishing: a ClusterProfile per own cluster, none for sourced ones, never read back', async (t) => {
  const name = uniqueName('pub');
  const id = await registerCluster(gw, admin, { name, config: a.kubeconfig });
  await waitClusterReady(gw, admin, name);
  const profile = await eventually('the published ClusterProfile', () => {
    const p = publishedProfile(`kiteline-${name}`);
    return p?.status?.conditions?.some((c) => c.type === 'ControlPlaneHealthy' && c.status === 'True') ? p : undefined;
  });
  t.same(profile.spec, { displayName: name, clusterManager: { name: 'kiteline' } });
  t.equal(profile.metadata.labels?.['x-k8s.io/cluster-manager'], 'kiteline');
  t.match(profile.status?.version?.kubernetes, /^v1\.\d+/, 'version.kubernetes');
  t.same(profile.status?.accessProviders, [
    { name: 'kiteline', cluster: { server: `https://kiteline.example/k8s/clusters/${name}` } },
  ]);

  // A sourced cluster is not published; the published profiles are not read back as sources.
  const argo = uniqueName('nopub');
  await apply(argoSecret(argo, argo, a.server, { bearerToken: a.token, tlsClientConfig: { caData: a.caData } }));
  await servedWithin(argo, Date.now());
  await new Promise((resolve) => setTimeout(resolve, 1000));
  t.equal(publishedProfile(`kiteline-${argo}`), undefined, 'no ClusterProfile for a sourced cluster');
  t.same(
    (await adminList()).filter((c) => c.source?.kind === 'clusterprofile'),
    [],
    'no cluster made from a published ClusterProfile',
  );

  const del = await call(gw.url, 'DELETE', `${ADMIN_PREFIX}/${id}`, { headers: admin.headers });
  t.equal(del.status, 200, del.text);
  await eventually('the profile to be deleted', () => publishedProfile(`kiteline-${name}`) === undefined);
  t.pass('deleting the cluster deletes its ClusterProfile');
  await remove(argoNs, 'secret', argo);
  await gone(argo);
});

t.test(
  'deploy/optional/cluster-sources.yaml grants the reads (and publishing) the sources need, no more',
  async (t) => {
    const saNs = uniqueName('kl-sa');
    type Doc = {
      kind: string;
      metadata: { name: string; namespace?: string };
      roleRef?: { name: string };
      subjects?: Array<{ namespace: string }>;
    };
    const docs = parseAllDocuments(
      readFileSync(join(PACKAGE_ROOT, 'deploy', 'optional', 'cluster-sources.yaml'), 'utf8'),
    ).map((d) => d.toJS() as Doc);
    // The example namespaces become this file's; cluster-wide names get a suffix (parallel runs).
    const namespaces: Record<string, string> = { argocd: argoNs, 'capi-system': capiNs, fleet: profileNs };
    for (const d of docs) {
      if (d.kind === 'ClusterRole') d.metadata.name += `-${saNs}`;
      if (d.kind !== 'RoleBinding') continue;
      d.metadata.namespace = namespaces[d.metadata.namespace!];
      d.roleRef!.name += `-${saNs}`;
      for (const s of d.subjects ?? []) s.namespace = saNs;
    }
    t.same(
      docs.map((d) => d.kind),
      ['ClusterRole', 'ClusterRole', 'RoleBinding', 'RoleBinding', 'RoleBinding', 'RoleBinding'],
    );
    t.teardown(() => {
      kubectl(hostKubeconfig, ['delete', 'namespace', saNs, '--wait=false']);
      for (const d of docs.filter((x) => x.kind === 'ClusterRole'))
        kubectl(hostKubeconfig, ['delete', 'clusterrole', d.metadata.name, '--ignore-not-found']);
    });
    t.equal(kubectl(hostKubeconfig, ['create', 'namespace', saNs]).status, 0);
    t.equal(kubectl(hostKubeconfig, ['-n', saNs, 'create', 'serviceaccount', 'kiteline']).status, 0);
    const applied = kubectl(hostKubeconfig, ['apply', '-f', '-'], docs.map((d) => stringify(d)).join('---\n'));
    t.equal(applied.status, 0, applied.stderr);

    const as = `system:serviceaccount:${saNs}:kiteline`;
    const can = (verb: string, resource: string, namespace: string, subresource?: string) =>
      kubectl(hostKubeconfig, [
        'auth',
        'can-i',
        verb,
        resource,
        ...(namespace === '*' ? ['--all-namespaces'] : ['-n', namespace]),
        '--as',
        as,
        ...(subresource ? [`--subresource=${subresource}`] : []),
      ]).status === 0;
    for (const ns of [argoNs, capiNs, profileNs]) {
      for (const verb of ['get', 'list', 'watch']) t.ok(can(verb, 'secrets', ns), `${verb} secrets in ${ns}`);
      t.notOk(can('create', 'secrets', ns), `no Secret writes in ${ns}`);
    }
    t.ok(can('watch', 'clusterprofiles.multicluster.x-k8s.io', profileNs), 'watch ClusterProfiles');
    t.ok(can('create', 'clusterprofiles.multicluster.x-k8s.io', profileNs), 'publish ClusterProfiles');
    t.ok(can('patch', 'clusterprofiles.multicluster.x-k8s.io', profileNs, 'status'), 'write their status');
    t.notOk(can('list', 'secrets', 'kube-system'), 'no Secrets of namespaces not listed');
    t.notOk(can('list', 'secrets', saNs), 'not even its own namespace (that is rbac.yaml)');
    t.notOk(can('create', 'clusterprofiles.multicluster.x-k8s.io', argoNs), 'no ClusterProfile writes elsewhere');
    t.notOk(can('list', 'secrets', '*'), 'nothing cluster-wide');
  },
);

t.test(
  'attackers: roles still decide, other namespaces and kinds are not sources, no secret in the logs',
  async (t) => {
    const name = uniqueName('guarded');
    await apply(argoSecret(name, name, a.server, { bearerToken: a.token, tlsClientConfig: { caData: a.caData } }));
    await servedWithin(name, Date.now());

    await createRole(gw, admin, {
      name: `${name}-viewer`,
      clusters: [name],
      namespaces: ['*'],
      resources: ['*'],
      verbs: ['get', 'list'],
    });
    await createRole(gw, admin, {
      name: `${name}-other`,
      clusters: ['some-other-cluster'],
      namespaces: ['*'],
      resources: ['*'],
      verbs: ['get', 'list'],
    });
    const viewer = await apiKeyWithRoles(gw, admin, `${name}-viewer-key`, [`${name}-viewer`]);
    const other = await apiKeyWithRoles(gw, admin, `${name}-other-key`, [`${name}-other`]);
    const through = (
      caller: { headers: Record<string, string> },
      method = 'GET',
      path = '/api/v1/namespaces/_all/default',
    ) => call(gw.url, method, path, { headers: { ...caller.headers, 'x-cluster-name': name } });
    t.equal((await through(viewer)).status, 200, 'a role naming the sourced cluster reaches it');
    t.equal((await through(other)).status, 404, 'a role naming another cluster does not (404, as for any cluster)');
    const visible = await call<Array<{ name: string }>>(gw.url, 'GET', '/api/v1/clusters', { headers: other.headers });
    t.notOk(
      visible.body.some((c) => c.name === name),
      'not listed for a role that does not reach it',
    );
    const cr = (await adminList()).find((c) => c.name === name)!;
    for (const caller of [viewer, { headers: {} }]) {
      const put = await call(gw.url, 'PUT', `${ADMIN_PREFIX}/${cr.id}`, {
        body: { isDefault: true },
        headers: caller.headers,
      });
      t.ok([401, 403].includes(put.status), `a non-admin cannot even make it the default (${put.status})`);
      const list = await call(gw.url, 'GET', `${ADMIN_PREFIX}/`, { headers: caller.headers });
      t.ok([401, 403].includes(list.status), `nor list the admin view (${list.status})`);
    }

    // An Argo CD Secret in a namespace configured only for Cluster API, and a Secret without the label.
    const stray = uniqueName('stray');
    await apply(argoSecret(stray, stray, a.server, { bearerToken: a.token }, capiNs));
    const unlabelled = uniqueName('unlabelled');
    await apply({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: unlabelled, namespace: argoNs },
      stringData: { name: unlabelled, server: a.server, config: JSON.stringify({ bearerToken: a.token }) },
    });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const names = (await adminList()).map((c) => c.name);
    t.notOk(names.includes(stray), 'an Argo CD Secret outside the Argo CD namespaces is not a source');
    t.notOk(names.includes(unlabelled), 'a Secret without the Argo CD label is not a source');
    await remove(capiNs, 'secret', stray);
    await remove(argoNs, 'secret', unlabelled);
    await remove(argoNs, 'secret', name);
    await gone(name);

    const log = readFileSync(join(TEST_DIR, 'logs', 'cluster-sources.log'), 'utf8');
    t.ok(log.includes('cluster added from its source'), 'the log tells what happened');
    for (const token of [a.token, b.token]) t.notOk(log.includes(token), 'no credential of a source in the log');
  },
);

t.test('a second replica and a restart: the same id, served, rotated and removed by the new leader', async (t) => {
  const name = uniqueName('replica');
  const good = { bearerToken: b.token, tlsClientConfig: { caData: b.caData } };
  await apply(argoSecret(name, name, b.server, good));
  await servedWithin(name, Date.now());
  const id = (await adminList()).find((c) => c.name === name)!.id;

  const gw2: TestGateway = await startGateway(t, {
    namespace: gw.namespace,
    env: GATEWAY_ENV,
    logName: 'cluster-sources',
  });
  const viaGw2 = (path = '/api/v1/namespaces/_all/default') =>
    call(gw2.url, 'GET', path, { headers: { ...admin.headers, 'x-cluster-name': name } });
  await eventually('the second replica to serve it', async () => (await viaGw2()).status === 200);
  const list2 = await call<View[]>(gw2.url, 'GET', `${ADMIN_PREFIX}/`, { headers: admin.headers });
  t.equal(list2.body.find((c) => c.name === name)?.id, id, 'the same id on the other replica');

  await gw.close(); // the first replica (the leader) stops: the lease is released, gw2 takes over
  await eventually('the second replica to lead', () => gw2.services.clusterManager.lease.isLeader);
  await apply(argoSecret(name, name, b.server, { ...good, bearerToken: 'revoked' }));
  await eventually('the broken token to take effect', async () => (await viaGw2()).status !== 200);
  await apply(argoSecret(name, name, b.server, good));
  await eventually('the good token again', async () => (await viaGw2()).status === 200);
  t.pass('rotated under the new leader, without a restart');
  const again = await call<View[]>(gw2.url, 'GET', `${ADMIN_PREFIX}/`, { headers: admin.headers });
  t.equal(again.body.find((c) => c.name === name)?.id, id, 'still the same id');

  await remove(argoNs, 'secret', name);
  await eventually('removed by the new leader', async () => (await viaGw2()).status === 404);
  t.pass('deleting the source removes it');
});
