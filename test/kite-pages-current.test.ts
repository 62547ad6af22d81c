// Kite's pages on the Kubernetes of today, through /api/v1 on two API server versions at once
// (target-a on the current release, target-b one minor older): CronJobs (batch/v1), HPAs
// (autoscaling/v2), PodDisruptionBudgets (policy/v1), EndpointSlices, Ingresses, each created,
// listed, read and described in the version the cluster prefers; and the object subresources
// (status, scale, resize) authorized as what they are.
import t from 'tap';
import { kubernetesVersions } from '../src/controlplane/binaries.js';
import { kubectl, testControlPlane, uniqueName, type TestClusterName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const BUSYBOX = 'kiteline.local/busybox:1';
const gw = await startGateway(t, { logName: 'kite-pages-current' });
const admin = await bootstrapAdmin(gw);
const clusters: Record<string, TestClusterName> = { a: 'target-a', b: 'target-b' };
for (const [name, plane] of Object.entries(clusters)) {
  await addReadyCluster(gw, admin, { name, config: testKubeconfig(plane), isDefault: name === 'a' });
}
const ns = uniqueName('pages');
for (const plane of Object.values(clusters)) {
  const cp = await testControlPlane(plane);
  t.equal(kubectl(cp.kubeconfigPath, ['create', 'namespace', ns]).status, 0, `namespace on ${plane}`);
  t.teardown(() => kubectl(cp.kubeconfigPath, ['delete', 'namespace', ns, '--wait=false']));
}

const on = (cluster: string, headers = admin.headers) => ({ headers: { ...headers, 'x-cluster-name': cluster } });
const podSpec = (name: string) => ({
  terminationGracePeriodSeconds: 1,
  containers: [
    {
      name,
      image: BUSYBOX,
      imagePullPolicy: 'Never',
      command: ['sleep', '3600'],
      resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
    },
  ],
});

/** What Kite's pages show, as the current API has them: resource, the apiVersion it answers in, an object. */
const PAGES: { resource: string; apiVersion: string; object: Record<string, unknown> }[] = [
  {
    resource: 'deployments',
    apiVersion: 'apps/v1',
    object: {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: podSpec('web') },
      },
    },
  },
  {
    resource: 'cronjobs',
    apiVersion: 'batch/v1',
    object: {
      metadata: { name: 'nightly' },
      spec: {
        schedule: '0 3 * * *',
        timeZone: 'Etc/UTC',
        jobTemplate: { spec: { template: { spec: { ...podSpec('job'), restartPolicy: 'OnFailure' } } } },
      },
    },
  },
  {
    resource: 'horizontalpodautoscalers',
    apiVersion: 'autoscaling/v2',
    object: {
      metadata: { name: 'web' },
      spec: {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
        minReplicas: 1,
        maxReplicas: 3,
        metrics: [
          { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 80 } } },
        ],
        behavior: { scaleDown: { stabilizationWindowSeconds: 60 } },
      },
    },
  },
  {
    resource: 'poddisruptionbudgets',
    apiVersion: 'policy/v1',
    object: {
      metadata: { name: 'web' },
      spec: { minAvailable: 1, selector: { matchLabels: { app: 'web' } }, unhealthyPodEvictionPolicy: 'AlwaysAllow' },
    },
  },
  {
    resource: 'endpointslices',
    apiVersion: 'discovery.k8s.io/v1',
    object: {
      metadata: { name: 'web-manual', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.251.9.9'], conditions: { ready: true } }],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    },
  },
  {
    resource: 'ingresses',
    apiVersion: 'networking.k8s.io/v1',
    object: {
      metadata: { name: 'site' },
      spec: {
        rules: [
          {
            host: 'site.example',
            http: {
              paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { number: 80 } } } }],
            },
          },
        ],
      },
    },
  },
];

for (const cluster of Object.keys(clusters)) {
  t.test(`Kite's pages on ${cluster} (${clusters[cluster]})`, async (t) => {
    const version = await call(gw.url, 'GET', '/api/v1/clusters', { headers: admin.headers });
    const { current, older } = kubernetesVersions();
    t.equal(
      (version.body as { name: string; version: string }[]).find((c) => c.name === cluster)?.version,
      cluster === 'a' ? current : older,
      'the cluster list shows its version',
    );
    for (const page of PAGES) {
      const created = await call(gw.url, 'POST', `/api/v1/${page.resource}/${ns}`, {
        ...on(cluster),
        body: page.object,
      });
      t.equal(created.status, 201, `create ${page.resource}: ${created.text.slice(0, 200)}`);
      t.equal(created.body.apiVersion, page.apiVersion, `${page.resource} in ${page.apiVersion}`);
      const name = (page.object.metadata as { name: string }).name;
      const list = await call(gw.url, 'GET', `/api/v1/${page.resource}/${ns}`, on(cluster));
      t.equal(list.status, 200);
      t.equal(list.body.apiVersion, page.apiVersion, `the list of ${page.resource} too`);
      t.ok(
        (list.body.items as { metadata: { name: string } }[]).some((i) => i.metadata.name === name),
        `${page.resource}/${name} listed`,
      );
      const described = await call(gw.url, 'GET', `/api/v1/${page.resource}/${ns}/${name}/describe`, on(cluster));
      t.equal(described.status, 200, `describe ${page.resource}`);
      t.match(described.body.result, new RegExp(`Name:\\s+${name}`), `${page.resource} described`);
    }
    const hpa = await call(gw.url, 'GET', `/api/v1/horizontalpodautoscalers/${ns}/web`, on(cluster));
    t.match(hpa.body.spec.metrics[0].resource.target, { type: 'Utilization', averageUtilization: 80 }, 'v2 metrics');
  });
}

t.test('subresources through /api/v1: scale and status of a Deployment, in-place resize of a pod', async (t) => {
  const scale = await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/scale`, on('a'));
  t.equal(scale.status, 200);
  t.match(scale.body, { kind: 'Scale', apiVersion: 'autoscaling/v1', spec: { replicas: 1 } });
  const scaled = await call(gw.url, 'PATCH', `/api/v1/deployments/${ns}/web/scale`, {
    ...on('a'),
    body: { spec: { replicas: 2 } },
    headers: { ...on('a').headers, 'content-type': 'application/merge-patch+json' },
  });
  t.equal(scaled.status, 200, scaled.text);
  t.equal(scaled.body.spec.replicas, 2, 'scaled through deployments/scale');
  const status = await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/status`, on('a'));
  t.equal(status.status, 200);
  t.equal(status.body.spec.replicas, 2, 'the status subresource reads the whole object');

  const pod = await call(gw.url, 'POST', `/api/v1/pods/${ns}`, {
    ...on('a'),
    body: { metadata: { name: 'resizable' }, spec: podSpec('resizable') },
  });
  t.equal(pod.status, 201);
  await eventually(
    'the pod to run',
    async () => (await call(gw.url, 'GET', `/api/v1/pods/${ns}/resizable`, on('a'))).body.status?.phase === 'Running',
    120_000,
    500,
  );
  const resize = { spec: { containers: [{ name: 'resizable', resources: { limits: { cpu: '200m' } } }] } };
  const resized = await call(gw.url, 'PATCH', `/api/v1/pods/${ns}/resizable/resize`, { ...on('a'), body: resize });
  t.equal(resized.status, 200, resized.text);
  t.equal(resized.body.spec.containers[0].resources.limits.cpu, '200m', 'resized in place');
  const direct = await call(gw.url, 'PATCH', `/api/v1/pods/${ns}/resizable`, {
    ...on('a'),
    body: { spec: { containers: [{ name: 'resizable', resources: { limits: { cpu: '300m' } } }] } },
  });
  t.equal(direct.status, 422, 'the pod itself still refuses a resource change (only pods/resize takes it)');
});

t.test('subresources are authorized as what they are', async (t) => {
  await createRole(gw, admin, {
    name: 'pages-pods',
    clusters: ['a'],
    namespaces: [ns],
    resources: ['pods', 'deployments'],
    verbs: ['*'],
  });
  const podsOnly = await apiKeyWithRoles(gw, admin, 'pages-pods', ['pages-pods']);
  const viewer = await apiKeyWithRoles(gw, admin, 'pages-viewer', ['viewer']);
  const resize = { spec: { containers: [{ name: 'resizable', resources: { limits: { cpu: '250m' } } }] } };
  for (const [who, caller] of [
    ['a role over pods and deployments', podsOnly],
    ['a viewer', viewer],
  ] as const) {
    const res = await call(gw.url, 'PATCH', `/api/v1/pods/${ns}/resizable/resize`, {
      ...on('a', caller.headers),
      body: resize,
    });
    t.equal(res.status, 403, `${who}: pods/resize refused`);
    const scale = await call(gw.url, 'PATCH', `/api/v1/deployments/${ns}/web/scale`, {
      ...on('a', caller.headers),
      body: { spec: { replicas: 0 } },
    });
    t.equal(scale.status, 403, `${who}: deployments/scale refused`);
  }
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/pods/${ns}/resizable`, on('a', podsOnly.headers))).status,
    200,
    'the role reads the pod itself',
  );
  const viewed = await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/scale`, on('a', viewer.headers));
  t.equal(viewed.status, 200, "a viewer reads a Deployment's scale");
  const after = await call(gw.url, 'GET', `/api/v1/pods/${ns}/resizable`, on('a'));
  t.equal(after.body.spec.containers[0].resources.limits.cpu, '200m', 'nothing changed');
  t.equal((await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web`, on('a'))).body.spec.replicas, 2);

  const anonymous = await call(gw.url, 'PATCH', `/api/v1/pods/${ns}/resizable/resize`, {
    body: resize,
    headers: { 'x-cluster-name': 'a' },
  });
  t.equal(anonymous.status, 401, 'an anonymous caller: 401');
  t.equal((await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/scale`)).status, 401, 'anonymous read: 401');
  const unknown = await call(gw.url, 'PATCH', `/api/v1/pods/${ns}/resizable/exec`, { ...on('a'), body: {} });
  t.equal(unknown.status, 400, 'a subresource that is not an object subresource: 400');
  await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });
  for (const path of [`/api/v1/pods/${gw.namespace}/x/status`, `/api/v1/deployments/${gw.namespace}/x/scale`]) {
    const res = await call(gw.url, 'GET', path, on('h'));
    t.equal(res.status, 403, `the host guard: ${path}`);
  }
});
