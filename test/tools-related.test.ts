// GET /api/v1/<resource>/<ns>/<name>/related on target-a (it has a node: the Deployment's pods
// really exist). A Deployment whose pod template references ConfigMaps, Secrets, a claim and a
// ServiceAccount in every way a template can (volumes, a projected source, envFrom, env valueFrom,
// imagePullSecrets), a Service selecting its pods and one that does not, an Ingress routing to the
// Service and one routing elsewhere. From the Deployment: exactly its ReplicaSet, its Pod, the
// Service, the Ingress and the references; from the Pod: its owners walked up; the other way
// round from the Service, the Ingress, a ConfigMap, the claim and an autoscaler; a StatefulSet's
// pod and the claim its claim template gives the pod. Then authorization: the
// built-in viewer sees no Secret, a role limited to a few kinds sees only those, a role of another
// namespace gets 403, anonymous 401, a missing object or resource 404.
import t from 'tap';
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

const BUSYBOX = 'kiteline.local/busybox:1';
const gw = await startGateway(t, { logName: 'tools-related' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
const kc = (await testControlPlane('target-a')).kubeconfigPath;
const ns = uniqueName('related');
t.equal(kubectl(kc, ['create', 'namespace', ns]).status, 0);
t.teardown(() => kubectl(kc, ['delete', 'namespace', ns, '--wait=false']));

interface Item {
  type: string;
  name: string;
  namespace?: string;
  apiVersion: string;
}

function k(args: string[], input?: string): string {
  const res = kubectl(kc, ['-n', ns, ...args], input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

const related = (path: string, headers: Record<string, string> = admin.headers) =>
  call<Item[]>(gw.url, 'GET', `/api/v1/${path}/related`, { headers });
/** "type/name apiVersion" of each item, sorted (every item of this test is in ns). */
const summary = (items: Item[]) =>
  items.map((i) => `${i.type}/${i.name} ${i.apiVersion}${i.namespace === ns ? '' : ` in ${i.namespace}`}`).sort();

const objects = [
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'runner' } },
  ...['settings', 'env-cm', 'projected-cm', 'unused-cm'].map((name) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name },
    data: { mode: 'x' },
  })),
  ...['creds', 'env-secret', 'pull'].map((name) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name },
    stringData: { password: 'x' },
  })),
  {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Mi' } } },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web', tier: 'front' } },
        spec: {
          serviceAccountName: 'runner',
          terminationGracePeriodSeconds: 1,
          imagePullSecrets: [{ name: 'pull' }],
          containers: [
            {
              name: 'web',
              image: BUSYBOX,
              imagePullPolicy: 'Never',
              command: ['sleep', '3600'],
              envFrom: [{ configMapRef: { name: 'env-cm' } }],
              env: [{ name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'env-secret', key: 'password' } } }],
            },
          ],
          volumes: [
            { name: 'config', configMap: { name: 'settings' } },
            { name: 'creds', secret: { secretName: 'creds' } },
            { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
            { name: 'projected', projected: { sources: [{ configMap: { name: 'projected-cm' } }] } },
          ],
        },
      },
    },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'db' },
    spec: {
      replicas: 1,
      serviceName: 'db',
      selector: { matchLabels: { app: 'db' } },
      template: {
        metadata: { labels: { app: 'db' } },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'db', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'www' },
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Mi' } } },
        },
      ],
    },
  },
  {
    apiVersion: 'autoscaling/v1',
    kind: 'HorizontalPodAutoscaler',
    metadata: { name: 'web' },
    spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' }, maxReplicas: 2 },
  },
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web' },
    spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
  },
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'other' },
    spec: { selector: { app: 'web', tier: 'back' }, ports: [{ port: 80 }] },
  },
  { apiVersion: 'v1', kind: 'Service', metadata: { name: 'no-selector' }, spec: { ports: [{ port: 80 }] } },
  ...[
    ['web', 'web'],
    ['elsewhere', 'other'],
  ].map(([name, service]) => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name },
    spec: {
      rules: [
        {
          http: {
            paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: service, port: { number: 80 } } } }],
          },
        },
      ],
    },
  })),
];
k(['apply', '-f', '-'], objects.map((o) => JSON.stringify(o)).join('\n'));
const { rs, pod } = await eventually(
  'the ReplicaSet and its Pod',
  () => {
    const rsName = k(['get', 'replicasets', '-l', 'app=web', '-o', 'jsonpath={.items[*].metadata.name}']).trim();
    const podName = k(['get', 'pods', '-l', 'app=web', '-o', 'jsonpath={.items[*].metadata.name}']).trim();
    return rsName && podName && !rsName.includes(' ') && !podName.includes(' ')
      ? { rs: rsName, pod: podName }
      : undefined;
  },
  60_000,
  200,
);

const templateReferences = [
  'configmaps/env-cm v1',
  'configmaps/projected-cm v1',
  'configmaps/settings v1',
  'persistentvolumeclaims/data v1',
  'secrets/creds v1',
  'secrets/env-secret v1',
  'secrets/pull v1',
  'serviceaccounts/runner v1',
];

t.test('from the Deployment: what it owns, its Service and Ingress, what its template references', async (t) => {
  const res = await related(`deployments/${ns}/web`);
  t.equal(res.status, 200, res.text);
  t.same(
    summary(res.body),
    [
      ...templateReferences,
      'ingresses/web networking.k8s.io/v1',
      `pods/${pod} v1`,
      `replicasets/${rs} apps/v1`,
      'services/web v1',
    ].sort(),
  );
  t.ok(
    res.body.every((i) => i.namespace === ns),
    'every item names its namespace',
  );
});

t.test('from the Pod: its owners walked up, and its own references', async (t) => {
  const res = await related(`pods/${ns}/${pod}`);
  t.equal(res.status, 200, res.text);
  const got = summary(res.body);
  for (const expected of [
    `replicasets/${rs} apps/v1`,
    'deployments/web apps/v1',
    'services/web v1',
    'ingresses/web networking.k8s.io/v1',
    ...templateReferences,
  ]) {
    t.ok(got.includes(expected), `has ${expected}`);
  }
  for (const absent of [
    'services/other v1',
    'services/no-selector v1',
    'ingresses/elsewhere networking.k8s.io/v1',
    'configmaps/unused-cm v1',
    `pods/${pod} v1`,
  ]) {
    t.notOk(got.includes(absent), `not ${absent}`);
  }
});

t.test('the other way round: Service, Ingress, ConfigMap, claim', async (t) => {
  const service = await related(`services/${ns}/web`);
  t.equal(service.status, 200, service.text);
  t.same(
    summary(service.body),
    ['ingresses/web networking.k8s.io/v1', `pods/${pod} v1`],
    'a Service: the pods it selects and the Ingresses routing to it',
  );
  const ingress = await related(`ingresses/${ns}/web`);
  t.same(summary(ingress.body), ['services/web v1'], 'an Ingress: its Services');
  const configMap = await related(`configmaps/${ns}/projected-cm`);
  t.same(
    summary(configMap.body),
    ['deployments/web apps/v1'],
    'a ConfigMap: the workload using it (not its ReplicaSet or Pod, which a controller made)',
  );
  t.same(summary((await related(`configmaps/${ns}/unused-cm`)).body), [], 'an unused ConfigMap: nothing');
  t.same(
    summary((await related(`persistentvolumeclaims/${ns}/data`)).body),
    ['deployments/web apps/v1'],
    'a claim: its user (no volume bound yet)',
  );
  t.same(
    summary((await related(`horizontalpodautoscalers/${ns}/web`)).body),
    ['deployments/web apps/v1'],
    'an autoscaler: its target',
  );
  const statefulSet = await eventually(
    "the StatefulSet's pod",
    async () => {
      const res = await related(`statefulsets/${ns}/db`);
      return summary(res.body).includes('pods/db-0 v1') ? res : undefined;
    },
    60_000,
    200,
  );
  t.same(
    summary(statefulSet.body),
    ['persistentvolumeclaims/www-db-0 v1', 'pods/db-0 v1', 'serviceaccounts/default v1'],
    "a StatefulSet: its pod, the pod's claim from the claim template, the default ServiceAccount",
  );
});

t.test('authorization: only what the caller may read', async (t) => {
  const viewer: Caller = await apiKeyWithRoles(gw, admin, 'related-viewer', ['viewer']);
  const seen = await related(`deployments/${ns}/web`, viewer.headers);
  t.equal(seen.status, 200, seen.text);
  t.same(
    summary(seen.body).filter((s) => s.startsWith('secrets/')),
    [],
    'the viewer: no Secret',
  );
  t.ok(summary(seen.body).includes('configmaps/settings v1'), 'but the ConfigMaps');
  t.ok(summary(seen.body).includes(`pods/${pod} v1`), 'and the Pod');

  await createRole(gw, admin, {
    name: 'related-limited',
    clusters: ['a'],
    namespaces: [ns],
    resources: ['deployments', 'pods', 'configmaps'],
    verbs: ['get', 'list'],
  });
  const limited = await apiKeyWithRoles(gw, admin, 'related-limited', ['related-limited']);
  const few = await related(`deployments/${ns}/web`, limited.headers);
  t.equal(few.status, 200, few.text);
  t.same(
    summary(few.body),
    ['configmaps/env-cm v1', 'configmaps/projected-cm v1', 'configmaps/settings v1'],
    'only ConfigMaps: no ReplicaSet, so not its Pod either; no Service, Secret, claim or ServiceAccount',
  );
  const fromPod = await related(`pods/${ns}/${pod}`, limited.headers);
  t.notOk(
    summary(fromPod.body).some((s) => s.startsWith('deployments/') || s.startsWith('replicasets/')),
    'owners are not walked through a ReplicaSet the caller may not read',
  );

  await createRole(gw, admin, {
    name: 'related-elsewhere',
    clusters: ['a'],
    namespaces: ['default'],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const elsewhere = await apiKeyWithRoles(gw, admin, 'related-elsewhere', ['related-elsewhere']);
  t.equal((await related(`deployments/${ns}/web`, elsewhere.headers)).status, 403, 'a role of another namespace: 403');
  t.equal((await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/related`)).status, 401, 'anonymous: 401');
  t.equal((await related(`deployments/${ns}/nothing-here`)).status, 404, 'a missing object: 404');
  t.equal((await related(`nosuchthings/${ns}/web`)).status, 404, 'an unknown resource: 404');
  t.equal((await related(`deployments/_all/web`)).status, 400, 'a namespaced kind under _all: 400');
  const node = kubectl(kc, ['get', 'nodes', '-o', 'jsonpath={.items[0].metadata.name}']).stdout;
  const nodeRelated = await related(`nodes/_all/${node}`);
  t.equal(nodeRelated.status, 200, `a cluster-scoped kind under _all: ${nodeRelated.text}`);
});
