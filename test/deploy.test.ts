// deploy/ on a real host cluster: the kustomization builds (CRDs included), and the gateway,
// started the way a pod runs it (in-cluster environment, the service-account token of deploy/'s
// ServiceAccount, no kubeconfig), works with exactly the RBAC of deploy/rbac.yaml — and that
// RBAC is no broader than needed. The optional in-cluster binding makes the host administrable.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseAllDocuments, stringify } from 'yaml';
import { loadConfig, PACKAGE_ROOT } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startServer } from '../src/server.js';
import { kubectl, TEST_DIR, testControlPlane, testPlaneVersion, uniqueName } from './helpers/clusters.js';
import { call } from './helpers/gateway.js';
import { eventually } from './helpers/eventually.js';

type Doc = { kind: string; metadata: { name: string; namespace?: string }; [k: string]: any };

const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition']);

/** deploy/ manifests moved into namespace ns, cluster-wide names suffixed (so test files run in parallel). */
function relocate(docs: Doc[], ns: string): Doc[] {
  return docs.map((doc) => {
    const d = JSON.parse(JSON.stringify(doc)) as Doc;
    if (d.kind === 'Namespace') d.metadata.name = ns;
    else if (!CLUSTER_SCOPED.has(d.kind)) d.metadata.namespace = ns;
    if (d.kind === 'ClusterRole' || d.kind === 'ClusterRoleBinding') d.metadata.name += `-${ns}`;
    if (d.kind === 'ClusterRoleBinding' && d.roleRef.kind === 'ClusterRole' && d.roleRef.name !== 'cluster-admin')
      d.roleRef.name += `-${ns}`;
    for (const s of d.subjects ?? []) if (s.kind === 'ServiceAccount') s.namespace = ns;
    return d;
  });
}

t.test('the kustomization builds everything, CRDs included', async (t) => {
  const host = await testControlPlane('host');
  const built = kubectl(host.kubeconfigPath, ['kustomize', join(PACKAGE_ROOT, 'deploy')]);
  t.equal(built.status, 0, built.stderr);
  const docs = parseAllDocuments(built.stdout).map((d) => d.toJS() as Doc);
  const kinds = docs.map((d) => d.kind).sort();
  // Every CRD of crds/ is in the build, once.
  const crdFiles = readdirSync(join(PACKAGE_ROOT, 'crds')).filter((f) => f.endsWith('.yaml'));
  t.same(
    docs
      .filter((d) => d.kind === 'CustomResourceDefinition')
      .map((d) => `${d.metadata.name}.yaml`)
      .sort(),
    crdFiles.sort(),
  );
  t.same(kinds, [
    'ClusterRole',
    'ClusterRoleBinding',
    ...crdFiles.map(() => 'CustomResourceDefinition'),
    'Deployment',
    'Namespace',
    'PodDisruptionBudget',
    'Role',
    'RoleBinding',
    'Service',
    'ServiceAccount',
  ]);
  const deployment = docs.find((d) => d.kind === 'Deployment')!;
  t.equal(deployment.spec.replicas, 2);
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  t.equal(container.image, 'kiteline:dev');
  t.equal(container.livenessProbe.httpGet.path, '/healthz');
  t.equal(container.readinessProbe.httpGet.path, '/readyz');
  t.equal(pod.securityContext.runAsNonRoot, true);
  t.equal(container.securityContext.readOnlyRootFilesystem, true);
  t.equal(container.securityContext.allowPrivilegeEscalation, false);
  t.equal(pod.serviceAccountName, 'kiteline');
  const dryRun = kubectl(host.kubeconfigPath, ['apply', '--dry-run=client', '-k', join(PACKAGE_ROOT, 'deploy')]);
  t.equal(dryRun.status, 0, `kubectl apply -k deploy/ accepts it: ${dryRun.stderr}`);
  // The API server decodes strictly (kubectl's default field validation since 1.27): a field the
  // schema does not know, such as a key a YAML slip made of a description, is refused.
  const crds = kubectl(host.kubeconfigPath, ['apply', '--dry-run=server', '-f', join(PACKAGE_ROOT, 'crds')]);
  t.equal(crds.status, 0, `the API server takes every CRD as written: ${crds.stderr}`);
});

t.test('a gateway running as the deploy/ ServiceAccount: works, and its RBAC is least privilege', async (t) => {
  const host = await testControlPlane('host');
  const ns = uniqueName('kl-pod');
  const docs = parseAllDocuments(kubectl(host.kubeconfigPath, ['kustomize', join(PACKAGE_ROOT, 'deploy')]).stdout).map(
    (d) => d.toJS() as Doc,
  );
  // CRDs are already installed on the shared host; the Deployment's pods run in test/in-cluster.test.ts.
  const manifests = relocate(
    docs.filter((d) => d.kind !== 'CustomResourceDefinition' && d.kind !== 'Deployment'),
    ns,
  );
  const optional = relocate(
    [
      parseAllDocuments(
        readFileSync(join(PACKAGE_ROOT, 'deploy', 'optional', 'in-cluster-admin.yaml'), 'utf8'),
      )[0].toJS() as Doc,
    ],
    ns,
  )[0];
  optional.metadata.name += `-${ns}`;
  t.teardown(() => {
    kubectl(host.kubeconfigPath, [
      'delete',
      'clusterrolebinding',
      `kiteline-crd-reader-${ns}`,
      optional.metadata.name,
      '--ignore-not-found',
    ]);
    kubectl(host.kubeconfigPath, ['delete', 'clusterrole', `kiteline-crd-reader-${ns}`, '--ignore-not-found']);
    kubectl(host.kubeconfigPath, ['delete', 'namespace', ns, '--wait=false']);
  });
  // A long-lived token Secret for the ServiceAccount (since Kubernetes 1.24 none is made on its own;
  // the token controller fills in one that asks for it, as a pod's projected token would be).
  const tokenRequest = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/service-account-token',
    metadata: {
      name: 'kiteline-token',
      namespace: ns,
      annotations: { 'kubernetes.io/service-account.name': 'kiteline' },
    },
  };
  const applied = kubectl(
    host.kubeconfigPath,
    ['apply', '-f', '-'],
    [...manifests, tokenRequest].map((d) => stringify(d)).join('---\n'),
  );
  t.equal(applied.status, 0, applied.stderr);

  // The token controller writes the ServiceAccount's token into that Secret.
  const tokenSecret = await eventually(
    'service-account token',
    () => {
      const res = kubectl(host.kubeconfigPath, ['-n', ns, 'get', 'secrets', '-o', 'json']);
      const items = JSON.parse(res.stdout || '{"items":[]}').items as any[];
      return items.find(
        (s) =>
          s.type === 'kubernetes.io/service-account-token' &&
          s.metadata.annotations?.['kubernetes.io/service-account.name'] === 'kiteline' &&
          s.data?.token,
      );
    },
    60_000,
    100,
  );
  const token = Buffer.from(tokenSecret.data.token, 'base64').toString();
  const saDir = join(mkdtempSync(join(tmpdir(), 'kl-sa-')), 'serviceaccount');
  mkdirSync(saDir);
  writeFileSync(join(saDir, 'token'), token);
  writeFileSync(join(saDir, 'ca.crt'), Buffer.from(tokenSecret.data['ca.crt'], 'base64'));
  writeFileSync(join(saDir, 'namespace'), ns);

  // kubectl as the ServiceAccount, for the "no broader than needed" checks.
  const saKubeconfig = join(saDir, '..', 'kubeconfig');
  writeFileSync(
    saKubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        { name: 'host', cluster: { server: host.server, 'certificate-authority-data': tokenSecret.data['ca.crt'] } },
      ],
      users: [{ name: 'sa', user: { token } }],
      contexts: [{ name: 'sa', context: { cluster: 'host', user: 'sa', namespace: ns } }],
      'current-context': 'sa',
    }),
  );
  const can = (...args: string[]) => kubectl(saKubeconfig, ['auth', 'can-i', ...args]).stdout.trim();
  t.equal(can('list', 'secrets', '-n', ns), 'yes', 'its own namespace: secrets');
  t.equal(can('update', 'clusters.kiteline.io/status', '-n', ns), 'yes');
  t.equal(can('create', 'leases.coordination.k8s.io', '-n', ns), 'yes');
  t.equal(can('get', 'customresourcedefinitions/clusters.kiteline.io'), 'yes');
  t.equal(can('create', 'auditchunks.kiteline.io', '-n', ns), 'yes', 'audit chunks: written');
  t.equal(can('update', 'auditchunks.kiteline.io', '-n', ns), 'no', 'audit chunks: never changed');
  t.equal(can('delete', 'templates.kiteline.io', '-n', ns), 'yes', 'resource templates: written');
  t.equal(can('get', 'customresourcedefinitions/templates.kiteline.io'), 'yes');
  t.equal(can('update', 'oauthproviders.kiteline.io', '-n', ns), 'yes', 'OAuth providers: written');
  t.equal(can('get', 'customresourcedefinitions/oauthproviders.kiteline.io'), 'yes');
  t.equal(can('list', 'secrets', '-n', 'default'), 'no', 'no secrets elsewhere');
  t.equal(can('list', 'secrets', '--all-namespaces'), 'no');
  t.equal(can('get', 'customresourcedefinitions/widgets.example.com'), 'no', 'no other CRDs');
  t.equal(can('create', 'customresourcedefinitions'), 'no', 'cannot install CRDs');
  t.equal(can('create', 'namespaces'), 'no');
  t.equal(can('list', 'pods', '-n', ns), 'no', 'not even pods in its own namespace');
  t.equal(can('create', 'clusterrolebindings'), 'no', 'cannot escalate');
  t.not(kubectl(saKubeconfig, ['get', 'secrets', '-n', 'kube-system']).status, 0, 'reading kube-system Secrets fails');

  // Start the gateway exactly as in a pod: in-cluster environment, no kubeconfig.
  const [apiHost, apiPort] = new URL(host.server).host.split(':');
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  process.env.KUBERNETES_SERVICE_HOST = apiHost!;
  process.env.KUBERNETES_SERVICE_PORT = apiPort!;
  t.teardown(() => {
    process.env.KUBERNETES_SERVICE_HOST = saved.host;
    process.env.KUBERNETES_SERVICE_PORT = saved.port;
  });
  const config = loadConfig([], {
    KUBERNETES_SERVICE_HOST: apiHost,
    KUBERNETES_SERVICE_PORT: apiPort,
    KITELINE_SERVICE_ACCOUNT_DIR: saDir,
    KITELINE_INSTALL_CRDS: 'false',
    KITELINE_PROBE_INTERVAL_MS: '300',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  });
  t.equal(config.inPod, true);
  t.equal(config.kubeconfig, undefined);
  t.equal(config.namespace, ns, 'the namespace comes from the service account');
  mkdirSync(join(TEST_DIR, 'logs'), { recursive: true });
  const server = await startServer(
    config,
    createLogger(
      'info',
      {},
      (await import('pino')).pino.destination({ dest: join(TEST_DIR, 'logs', `${ns}.log`), sync: true }),
    ),
  );
  t.teardown(() => server.close());
  t.equal((await call(server.url, 'GET', '/readyz')).status, 200, 'caches synced with the RBAC given');

  const su = await call(server.url, 'POST', '/api/v1/admin/users/create_super_user', {
    body: { username: 'admin', password: 'correct-horse-1', name: 'Admin' },
  });
  t.ok(su.status === 201 || su.status === 200, `create_super_user: ${su.text}`);
  const login = await call(server.url, 'POST', '/api/auth/login/password', {
    body: { username: 'admin', password: 'correct-horse-1' },
  });
  t.equal(login.status, 204);
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];

  const imported = await call(server.url, 'POST', '/api/v1/admin/clusters/import', {
    body: { inCluster: true },
    headers: { cookie },
  });
  t.equal(imported.status, 201, imported.text);
  t.same(imported.body.clusters, ['in-cluster']);
  const list = await eventually(
    'in-cluster ready, status written by the leader',
    async () => {
      const r = await call(server.url, 'GET', '/api/v1/admin/clusters/', { headers: { cookie } });
      const obj = server.services.host.clusters.list()[0];
      return r.body?.[0]?.ready && obj?.status?.ready ? r : undefined;
    },
    60_000,
    100,
  );
  t.match(list.body[0], {
    name: 'in-cluster',
    inCluster: true,
    isDefault: true,
    ready: true,
    version: testPlaneVersion('host'),
  });
  t.equal(server.services.clusterManager.lease.isLeader, true, 'the lease works with this RBAC');
  const template = await call(server.url, 'POST', '/api/v1/admin/templates/', {
    headers: { cookie },
    body: { name: 'Pod', yaml: 'kind: Pod' },
  });
  t.equal(template.status, 201, `resource templates can be written: ${template.text}`);
  t.equal((await call(server.url, 'GET', '/api/v1/templates/', { headers: { cookie } })).body?.length, 1, 'and listed');

  const targetA = readFileSync((await testControlPlane('target-a')).kubeconfigPath, 'utf8');
  const created = await call(server.url, 'POST', '/api/v1/admin/clusters/', {
    headers: { cookie },
    body: { name: 'a', config: targetA },
  });
  t.equal(created.status, 201, `a kubeconfig Secret owned by the Cluster can be written: ${created.text}`);
  await eventually('a ready', () => server.services.clusters.get('a')?.ready || undefined, 60_000, 100);

  // The in-cluster cluster: discovery works, but nothing else until the optional binding exists.
  const inCluster = server.services.clusters.get('in-cluster')!;
  t.match(await inCluster.resolveResource('pods'), { group: '', resource: 'pods' });
  const denied = await inCluster.request({ method: 'GET', path: '/api/v1/pods?limit=1' });
  t.equal(denied.statusCode, 403, 'without the optional binding the host is not administrable');
  denied.resume();
  t.equal(kubectl(host.kubeconfigPath, ['apply', '-f', '-'], stringify(optional)).status, 0);
  await eventually(
    'optional binding effective',
    async () => {
      const res = await inCluster.request({ method: 'GET', path: '/api/v1/pods?limit=1' });
      res.resume();
      return res.statusCode === 200 || undefined;
    },
    60_000,
    100,
  );
  t.pass('with deploy/optional/in-cluster-admin.yaml the host cluster is administrable');

  // An operator breaks kiteline's own RBAC: its writes to the host are refused (403). Each admin
  // write then answers a clear 503 naming what kiteline may not do (never a 500), and nothing is
  // written; reads keep coming from the caches.
  const binding = manifests.find((d) => d.kind === 'RoleBinding')!;
  t.equal(kubectl(host.kubeconfigPath, ['-n', ns, 'delete', 'rolebinding', binding.metadata.name]).status, 0);
  // (and the optional binding of the step above, which makes kiteline an admin of its host)
  t.equal(kubectl(host.kubeconfigPath, ['delete', 'clusterrolebinding', optional.metadata.name]).status, 0);
  // Restored before the gateway closes (teardowns run last first), so it releases its lease.
  t.teardown(() => void kubectl(host.kubeconfigPath, ['apply', '-f', '-'], stringify(binding)));
  await eventually(
    'the API server to refuse kiteline',
    () => can('create', 'users.kiteline.io', '-n', ns) === 'no' || undefined,
    30_000,
    200,
  );
  const refused = await call(server.url, 'POST', '/api/v1/admin/users/', {
    headers: { cookie },
    body: { username: 'after-rbac', password: 'correct-horse-2' },
  });
  t.equal(refused.status, 503, `a host 403 is a 503: ${refused.text}`);
  t.match(refused.body, {
    reason: 'ServiceUnavailable',
    code: 503,
    error: /kiteline is not allowed to .* on the host cluster/,
  });
  const role = await call(server.url, 'POST', '/api/v1/admin/roles/', {
    headers: { cookie },
    body: { name: 'after-rbac', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get'] },
  });
  t.equal(role.status, 503, `a role write too: ${role.text}`);
  const cluster = await call(server.url, 'PUT', `/api/v1/admin/clusters/${created.body.id}`, {
    headers: { cookie },
    body: { description: 'after rbac' },
  });
  t.equal(cluster.status, 503, `a cluster write too: ${cluster.text}`);
  t.equal(
    kubectl(host.kubeconfigPath, ['-n', ns, 'get', 'users.kiteline.io', '-o', 'name']).stdout.includes('after-rbac'),
    false,
    'nothing was written',
  );
  t.equal(
    (await call(server.url, 'GET', '/api/v1/admin/users/', { headers: { cookie } })).status,
    200,
    'reads are served from the caches',
  );
  const log = readFileSync(join(TEST_DIR, 'logs', `${ns}.log`), 'utf8');
  t.match(
    log,
    /"call":"[a-z]+ [^"]+".*the host cluster refused kiteline its own RBAC/,
    'the log says which call was refused',
  );
});
