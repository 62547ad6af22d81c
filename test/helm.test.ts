// Helm releases through kiteline (docs/helm.md), with the real helm (scripts/helm/versions) on
// target-a, which has a node: pods really run. Charts come from an OCI registry the test runs
// (Debian's docker-registry, behind htpasswd) and from a classic repository (index.yaml over http
// behind Basic auth), both declared as ChartRepository objects through the admin API.
// A deployer (a signed-in user whose kiteline role and whose RoleBinding on the target reach one
// namespace only; the cluster impersonates) installs the chart from the OCI registry, its pod
// runs, upgrades it with new values and a new version, rolls it back; the history kiteline shows
// equals `helm history` run directly against the cluster; it uninstalls it. Then the attacks: a
// viewer lists releases but cannot install or uninstall (403 before helm runs), the deployer
// cannot install in another namespace, an API key cannot write (Helm acts as a user), anonymous
// callers get 401, bad input a 400, a name in use a 409, a failed hook a 422 naming it, every
// write is audited, and no token minted for helm outlives its run.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { kubectl, TEST_DIR, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  signedInUser,
  testKubeconfig,
} from './helpers/fixtures.js';
import { auditRecordOf, call, startGateway } from './helpers/gateway.js';
import { helm, helmBinary, packageCharts, startChartRepo } from './helpers/helm.js';
import { startRegistry } from './helpers/registry.js';

const LOG = 'helm';
const gw = await startGateway(t, { logName: LOG, env: { KITELINE_HELM: helmBinary() } });
const admin = await bootstrapAdmin(gw);
const kc = (await testControlPlane('target-a')).kubeconfigPath;
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true, impersonate: true });

const ns = uniqueName('helm');
const other = uniqueName('helm-other');
// (No top-level assertion before a later top-level await: tap would end the file there.)
for (const namespace of [ns, other]) {
  const created = kubectl(kc, ['create', 'namespace', namespace]);
  if (created.status !== 0) throw new Error(`create namespace ${namespace}: ${created.stderr}`);
  t.teardown(() => kubectl(kc, ['delete', 'namespace', namespace, '--wait=false']));
}

// Chart sources: the fixture chart at 0.1.0 and 0.2.0 in an OCI registry and a classic repository.
const charts = packageCharts(t, ['0.1.0', '0.2.0']);
const registryUser = { username: 'charts', password: 'registry-secret-1' };
const registry = await startRegistry(t, { users: { [registryUser.username]: registryUser.password } });
for (const version of ['0.1.0', '0.2.0'])
  helm([
    'push',
    `${charts}/hello-${version}.tgz`,
    `oci://${registry.host}/charts`,
    '--plain-http',
    '--username',
    registryUser.username,
    '--password',
    registryUser.password,
  ]);
const repoUser = { username: 'reader', password: 'repository-secret-1' };
const classic = await startChartRepo(t, charts, repoUser);

// Users: a deployer reaching one namespace (kiteline role and the target's RoleBinding), a viewer.
const deployerName = uniqueName('deployer');
const deployerRole = uniqueName('deploy');
await createRole(gw, admin, { name: deployerRole, clusters: ['a'], namespaces: [ns], resources: ['*'], verbs: ['*'] });
const deployer = { cookie: await signedInUser(gw, admin, deployerName, [deployerRole]) };
kubectl(kc, ['-n', ns, 'create', 'rolebinding', 'deployer', '--clusterrole=admin', `--user=kiteline:${deployerName}`]);
// The viewer reads releases: Helm keeps them in Secrets, so reading them takes `get` and `list` on secrets.
const releaseReader = uniqueName('release-reader');
await createRole(gw, admin, {
  name: releaseReader,
  clusters: ['a'],
  namespaces: ['*'],
  resources: ['secrets'],
  verbs: ['get', 'list'],
});
const viewerName = uniqueName('viewer');
const viewer = { cookie: await signedInUser(gw, admin, viewerName, ['viewer', releaseReader]) };
const plainViewer = { cookie: await signedInUser(gw, admin, uniqueName('plain-viewer'), ['viewer']) };
kubectl(kc, ['create', 'clusterrolebinding', viewerName, '--clusterrole=view', `--user=kiteline:${viewerName}`]);
kubectl(kc, [
  '-n',
  ns,
  'create',
  'rolebinding',
  'viewer-secrets',
  '--clusterrole=admin',
  `--user=kiteline:${viewerName}`,
]);
t.teardown(() => kubectl(kc, ['delete', 'clusterrolebinding', viewerName]));

const as = (who: { cookie: string }, requestId?: string) => ({
  headers: { cookie: who.cookie, 'x-cluster-name': 'a', ...(requestId ? { 'x-request-id': requestId } : {}) },
});

t.test('admins declare chart repositories; everyone reads their charts', async (t) => {
  const oci = await call(gw.url, 'POST', '/api/v1/admin/chart-repositories', {
    headers: admin.headers,
    body: {
      name: 'local-oci',
      url: `oci://${registry.host}/charts`,
      charts: ['hello'],
      plainHttp: true,
      ...registryUser,
    },
  });
  t.equal(oci.status, 201, oci.text);
  t.match(oci.body, { name: 'local-oci', type: 'oci', hasCredentials: true });
  t.notOk(JSON.stringify(oci.body).includes(registryUser.password), 'the password is never shown');
  const http = await call(gw.url, 'POST', '/api/v1/admin/chart-repositories', {
    headers: admin.headers,
    body: { name: 'local-http', url: classic.url, ...repoUser },
  });
  t.equal(http.status, 201, http.text);
  const again = await call(gw.url, 'POST', '/api/v1/admin/chart-repositories', {
    headers: admin.headers,
    body: { name: 'local-http', url: classic.url },
  });
  t.equal(again.status, 409, 'a repository name is unique');
  const badUrl = await call(gw.url, 'POST', '/api/v1/admin/chart-repositories', {
    headers: admin.headers,
    body: { name: 'bad', url: 'ftp://example.test/charts' },
  });
  t.equal(badUrl.status, 400, 'only https, http and oci URLs');
  const byViewer = await call(gw.url, 'POST', '/api/v1/admin/chart-repositories', {
    headers: { cookie: viewer.cookie },
    body: { name: 'mine', url: classic.url },
  });
  t.equal(byViewer.status, 403, 'only admins declare repositories');

  const listed = await call(gw.url, 'GET', '/api/v1/charts?q=hel', as(viewer));
  t.equal(listed.status, 200, listed.text);
  t.same(
    listed.body.items.map((c: { repository: string; name: string; version: string }) => [
      c.repository,
      c.name,
      c.version,
    ]),
    [
      ['local-http', 'hello', '0.2.0'],
      ['local-oci', 'hello', ''],
    ],
  );
  t.ok(
    classic.requests.some((r) => r.path === '/charts/index.yaml' && r.authorized),
    'the classic index was read with its credentials',
  );
  for (const repository of ['local-oci', 'local-http']) {
    const versions = await call(gw.url, 'GET', `/api/v1/charts/${repository}/hello/versions`, as(viewer));
    t.equal(versions.status, 200, versions.text);
    t.same(
      versions.body.map((v: { version: string }) => v.version),
      ['0.2.0', '0.1.0'],
      `${repository}: both versions, newest first`,
    );
    const values = await call(gw.url, 'GET', `/api/v1/charts/${repository}/hello/values?version=0.1.0`, as(viewer));
    t.equal(values.status, 200, values.text);
    t.match(values.body.values, /greeting: hello/, `${repository}: helm show values`);
    const content = await call(gw.url, 'GET', `/api/v1/charts/${repository}/hello/content/values`, as(viewer));
    t.match(content.body.content, /greeting: hello/, `${repository}: Kite's spelling`);
  }
  const missing = await call(gw.url, 'GET', '/api/v1/charts/local-http/nothing/versions', as(viewer));
  t.equal(missing.status, 404);
  const unlisted = await call(gw.url, 'GET', '/api/v1/charts/local-oci/other/values', as(viewer));
  t.equal(unlisted.status, 404, 'an OCI repository offers only the charts it lists, never another under its path');
  const repos = await call(gw.url, 'GET', '/api/v1/chart-repositories', as(viewer));
  t.equal(repos.status, 200);
  t.notOk(repos.text.includes(repoUser.password) || repos.text.includes(registryUser.password), 'no credentials');
});

/** The greeting and chart version the release's ConfigMap holds on the cluster. */
function configMap(release: string): { greeting?: string; chartVersion?: string } {
  const res = kubectl(kc, ['-n', ns, 'get', 'configmap', `${release}-greeting`, '-o', 'jsonpath={.data}']);
  return res.status === 0 ? (JSON.parse(res.stdout) as { greeting?: string; chartVersion?: string }) : {};
}

t.test('install, upgrade, roll back and uninstall as the user', async (t) => {
  const release = 'web';
  const installId = uniqueName('install');
  const installed = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    ...as(deployer, installId),
    body: { name: release, repository: 'local-oci', chart: 'hello', version: '0.1.0', values: 'greeting: hi\n' },
  });
  t.equal(installed.status, 201, installed.text);
  t.match(installed.body, {
    kind: 'HelmRelease',
    metadata: { name: release, namespace: ns },
    spec: { revision: 1, chart: 'hello-0.1.0', values: { greeting: 'hi' }, defaultValues: { greeting: 'hello' } },
    status: { status: 'deployed' },
  });
  t.match(installed.body.spec.manifest, /kind: Deployment/);
  t.same(configMap(release), { greeting: 'hi', chartVersion: '0.1.0' });
  await eventually(
    "the release's pod to run",
    () => {
      const res = kubectl(kc, [
        '-n',
        ns,
        'get',
        'pods',
        '-l',
        `app.kubernetes.io/instance=${release}`,
        '-o',
        'jsonpath={.items[*].status.phase}',
      ]);
      return res.stdout.trim() === 'Running';
    },
    120_000,
    500,
  );
  // Every call helm made went through kiteline's Kubernetes API as the deployer.
  const proxied = readFileSync(join(TEST_DIR, 'logs', `${LOG}.log`), 'utf8')
    .split('\n')
    .filter((line) => line.includes(`/k8s/clusters/a/apis/apps/v1/namespaces/${ns}/deployments`));
  t.ok(proxied.length > 0, 'the Deployment was written through /k8s/clusters');
  t.ok(
    proxied.every((line) => line.includes(`"user":"${deployerName}"`)),
    'as the deployer',
  );
  const audited = await eventually('the install audit record', () => auditRecordOf(LOG, installId), 10_000, 100);
  t.match(audited, { verb: 'install', resource: 'helmreleases', name: release, namespace: ns, cluster: 'a' });

  const upgraded = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}/${release}/upgrade`, {
    ...as(deployer),
    body: { repository: 'local-oci', chart: 'hello', version: '0.2.0', values: 'greeting: bonjour\n' },
  });
  t.equal(upgraded.status, 200, upgraded.text);
  t.match(upgraded.body, {
    spec: { revision: 2, chart: 'hello-0.2.0', values: { greeting: 'bonjour' } },
    status: { status: 'deployed' },
  });
  t.same(configMap(release), { greeting: 'bonjour', chartVersion: '0.2.0' });

  // PUT, as Kite's newest UI sends it.
  const rolledBack = await call(gw.url, 'PUT', `/api/v1/helmrelease/${ns}/${release}/rollback`, {
    ...as(deployer),
    body: { revision: 1 },
  });
  t.equal(rolledBack.status, 200, rolledBack.text);
  t.match(rolledBack.body, {
    spec: { revision: 3, chart: 'hello-0.1.0', values: { greeting: 'hi' } },
    status: { status: 'deployed' },
  });
  t.same(configMap(release), { greeting: 'hi', chartVersion: '0.1.0' });

  // The history kiteline shows is helm's own.
  const history = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}/${release}/history`, as(viewer));
  t.equal(history.status, 200, history.text);
  const direct = JSON.parse(helm(['history', release, '-n', ns, '-o', 'json'], { KUBECONFIG: kc })) as Array<{
    revision: number;
    status: string;
    chart: string;
    app_version: string;
    description: string;
  }>;
  t.same(
    [...history.body.items]
      .reverse()
      .map((r: { revision: number; status: string; chart: string; appVersion: string; description: string }) => [
        r.revision,
        r.status,
        r.chart,
        r.appVersion,
        r.description,
      ]),
    direct.map((r) => [r.revision, r.status, r.chart, r.app_version, r.description]),
    'the history equals `helm history` (newest first, as Kite lists it)',
  );
  t.same(
    direct.map((r) => r.status),
    ['superseded', 'superseded', 'deployed'],
  );

  const everywhere = await call(gw.url, 'GET', `/api/v1/helmrelease/_all`, as(viewer));
  t.equal(everywhere.status, 403, "the target's RBAC decides too: the viewer may not list Secrets cluster-wide there");
  const listed = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}`, as(viewer));
  t.equal(listed.status, 200, listed.text);
  t.match(
    listed.body,
    {
      kind: 'HelmReleaseList',
      items: [
        { metadata: { name: release }, spec: { revision: 3, chartVersion: '0.1.0' }, status: { status: 'deployed' } },
      ],
    },
    'the viewer lists the release',
  );
  t.equal(listed.body.items.length, 1);
  t.notOk('values' in listed.body.items[0].spec, 'a list carries no values');
  const noSecrets = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}`, as(plainViewer));
  t.equal(noSecrets.status, 403, 'who may not read Secrets may not read releases');
  const revisionOne = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}/${release}?revision=2`, as(viewer));
  t.match(revisionOne.body, {
    spec: { revision: 2, values: { greeting: 'bonjour' } },
    status: { status: 'superseded' },
  });

  // A classic repository's chart installs too (kiteline downloads the archive with the credentials).
  const fromHttp = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    ...as(deployer),
    body: { name: 'classic', repository: 'local-http', chart: 'hello', values: 'replicaCount: 0\n' },
  });
  t.equal(fromHttp.status, 201, fromHttp.text);
  t.match(fromHttp.body, { spec: { chart: 'hello-0.2.0' }, status: { status: 'deployed' } });
  t.ok(classic.requests.some((r) => r.path === '/charts/hello-0.2.0.tgz' && r.authorized));

  // The attacks on writes.
  const taken = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    ...as(deployer),
    body: { name: release, repository: 'local-oci', chart: 'hello', version: '0.1.0' },
  });
  t.equal(taken.status, 409, 'a name in use');
  t.match(taken.body.error, /cannot reuse a name/);
  const byViewer = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    ...as(viewer),
    body: { name: 'mine', repository: 'local-oci', chart: 'hello', version: '0.1.0' },
  });
  t.equal(byViewer.status, 403, 'a viewer cannot install');
  const viewerUninstall = await call(gw.url, 'DELETE', `/api/v1/helmrelease/${ns}/${release}`, as(viewer));
  t.equal(viewerUninstall.status, 403, 'nor uninstall');
  const elsewhere = await call(gw.url, 'POST', `/api/v1/helmrelease/${other}`, {
    ...as(deployer),
    body: { name: 'escape', repository: 'local-oci', chart: 'hello', version: '0.1.0' },
  });
  t.equal(elsewhere.status, 403, 'a namespace-limited role cannot install elsewhere');
  t.equal(kubectl(kc, ['-n', other, 'get', 'secrets', '-l', 'owner=helm', '-o', 'name']).stdout.trim(), '');
  const key = await apiKeyWithRoles(gw, admin, uniqueName('helm-key'), [deployerRole]);
  const byKey = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    headers: { ...key.headers, 'x-cluster-name': 'a' },
    body: { name: 'bykey', repository: 'local-oci', chart: 'hello', version: '0.1.0' },
  });
  t.equal(byKey.status, 403, 'Helm acts as a signed-in user');
  const anonymous = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}`, { headers: { 'x-cluster-name': 'a' } });
  t.equal(anonymous.status, 401);
  for (const [what, body] of [
    ['values that are not YAML', { name: 'bad', repository: 'local-oci', chart: 'hello', values: 'a: [' }],
    ['values that are a list', { name: 'bad', repository: 'local-oci', chart: 'hello', values: '- a' }],
    ['a release name helm refuses', { name: 'Bad_Name', repository: 'local-oci', chart: 'hello' }],
    ['an unknown field', { name: 'bad', repository: 'local-oci', chart: 'hello', extra: 1 }],
  ] as const) {
    const res = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, { ...as(deployer), body });
    t.equal(res.status, 400, what);
  }
  const allNamespaces = await call(gw.url, 'POST', `/api/v1/helmrelease/_all`, {
    ...as(deployer),
    body: { name: 'bad', repository: 'local-oci', chart: 'hello' },
  });
  t.equal(allNamespaces.status, 400, 'a release lives in one namespace');
  const unknownRepo = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    ...as(deployer),
    body: { name: 'bad', repository: 'nowhere', chart: 'hello' },
  });
  t.equal(unknownRepo.status, 404);

  // A failed hook: a clear 422 naming it, the release marked failed.
  const hooked = await call(gw.url, 'POST', `/api/v1/helmrelease/${ns}`, {
    ...as(deployer),
    body: {
      name: 'hooked',
      repository: 'local-oci',
      chart: 'hello',
      version: '0.1.0',
      values: 'failingHook: true\n',
      timeoutSeconds: 90,
    },
  });
  t.equal(hooked.status, 422, hooked.text);
  t.match(hooked.body.error, /failed pre-install: resource Job\/.*hooked-hook/);
  const failed = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}/hooked`, as(viewer));
  t.match(failed.body, { spec: { revision: 1 }, status: { status: 'failed' } });

  // Uninstall: the release and its objects go.
  const uninstalled = await call(gw.url, 'DELETE', `/api/v1/helmrelease/${ns}/${release}`, as(deployer));
  t.equal(uninstalled.status, 200, uninstalled.text);
  const gone = await call(gw.url, 'GET', `/api/v1/helmrelease/${ns}/${release}`, as(viewer));
  t.equal(gone.status, 404);
  t.equal(kubectl(kc, ['-n', ns, 'get', 'deployment', release]).status, 1, 'its Deployment is gone');

  // Every token minted for a helm run was revoked when it ended.
  const tokens = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'get',
    'apikeys.kiteline.io',
    '-o',
    'jsonpath={.items[*].spec.audience}',
  ]);
  t.notOk(/console/.test(tokens.stdout), 'no helm token is left');
});
