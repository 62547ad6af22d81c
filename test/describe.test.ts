// GET /api/v1/<resource>/<ns>/<name>/describe against the real `kubectl describe` on target-a
// (which has a node: pods really run). One object of each common kind is created (a Deployment with
// its ReplicaSet and Pod, a StatefulSet with a claim template, a DaemonSet, a Service, a ConfigMap,
// a Secret, a pending PVC, a Job, a CronJob, an Ingress, a custom resource) and kiteline's text
// must equal kubectl's line by line, ages and durations aside (both are normalized). The cluster
// keeps changing (events arrive, other test files run pods on the node), so kubectl runs before
// and after kiteline's answer and kiteline must equal one of them; a few rounds are allowed.
// Then the attacks: a viewer describes a Pod but not a Secret, anonymous 401, unknown resource
// 404, bad name 400; a role without `list` on events, ReplicaSets or pods gets the text kubectl
// shows such a user ("Events: <none>", no ReplicaSet lines, "Pods: not authorized"; a Deployment's
// text equals kubectl's run as a ServiceAccount with the same rights), and kiteline's own
// namespace on the host cluster stays out of reach (403).
import t, { type Test } from 'tap';
import { installWidgetCrd, kubectl, kubectlInBackground, testControlPlane, uniqueName } from './helpers/clusters.js';
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
const gw = await startGateway(t, { logName: 'describe' });
const admin = await bootstrapAdmin(gw);
const kc = (await testControlPlane('target-a')).kubeconfigPath;
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
const ns = uniqueName('describe');
const group = `${uniqueName('d')}.kiteline.test`;
t.equal(kubectl(kc, ['create', 'namespace', ns]).status, 0);
t.teardown(() => kubectl(kc, ['delete', 'namespace', ns, '--wait=false']));

function k(args: string[], input?: string): string {
  const res = kubectl(kc, ['-n', ns, ...args], input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

const container = {
  name: 'web',
  image: BUSYBOX,
  imagePullPolicy: 'Never',
  command: ['httpd', '-f', '-p', '8080', '-h', '/www'],
  ports: [{ containerPort: 8080, name: 'http' }],
  env: [
    { name: 'PLAIN', value: 'one\ntwo' },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'CPU_LIMIT', valueFrom: { resourceFieldRef: { resource: 'limits.cpu' } } },
    { name: 'SETTING', valueFrom: { configMapKeyRef: { name: 'settings', key: 'mode' } } },
    { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'creds', key: 'password', optional: true } } },
  ],
  envFrom: [{ configMapRef: { name: 'settings' }, prefix: 'CFG_' }],
  resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
  readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 2 },
  livenessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 20 },
  volumeMounts: [
    { name: 'config', mountPath: '/config', readOnly: true },
    { name: 'scratch', mountPath: '/scratch', subPath: 'web' },
  ],
};
const podSpec = (extra: object = {}) => ({
  terminationGracePeriodSeconds: 1,
  containers: [container],
  volumes: [
    { name: 'config', configMap: { name: 'settings' } },
    { name: 'scratch', emptyDir: { sizeLimit: '10Mi' } },
  ],
  ...extra,
});
const simple = {
  terminationGracePeriodSeconds: 1,
  containers: [{ name: 'main', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sh', '-c', 'echo done'] }],
};

const objects = [
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'settings', labels: { app: 'web' } },
    data: { mode: 'fast\nand loud' },
  },
  {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'creds', annotations: { note: 'sizes only' } },
    stringData: { password: 'hunter2hunter2' },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: 'web',
      labels: { app: 'web', tier: 'front' },
      annotations: { 'kiteline.test/long': 'x'.repeat(150), 'kiteline.test/short': 'yes' },
    },
    spec: {
      replicas: 1,
      selector: {
        matchLabels: { app: 'web' },
        matchExpressions: [{ key: 'tier', operator: 'In', values: ['front', 'edge'] }],
      },
      template: {
        metadata: { labels: { app: 'web', tier: 'front' }, annotations: { 'kiteline.test/template': 'yes' } },
        spec: podSpec(),
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
      template: { metadata: { labels: { app: 'db' } }, spec: simple },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: { disk: 'yes' } },
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
        },
      ],
    },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'agent' },
    spec: {
      selector: { matchLabels: { app: 'agent' } },
      template: {
        metadata: { labels: { app: 'agent' } },
        spec: {
          ...simple,
          containers: [{ ...simple.containers[0], command: ['sleep', '3600'] }],
          tolerations: [{ operator: 'Exists' }, { key: 'dedicated', value: 'x', effect: 'NoSchedule' }],
        },
      },
    },
  },
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web' },
    spec: {
      selector: { app: 'web' },
      ports: [
        { name: 'http', port: 80, targetPort: 'http' },
        { name: 'alt', port: 81, targetPort: 8080 },
      ],
    },
  },
  {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'claim' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  },
  {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'once' },
    spec: { backoffLimit: 1, template: { spec: { ...simple, restartPolicy: 'Never' } } },
  },
  {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: 'nightly' },
    spec: {
      schedule: '0 3 * * *',
      successfulJobsHistoryLimit: 2,
      jobTemplate: { spec: { template: { spec: { ...simple, restartPolicy: 'OnFailure' } } } },
    },
  },
  {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: 'site', annotations: { 'kiteline.test/ingress': 'yes' } },
    spec: {
      tls: [{ hosts: ['site.example'], secretName: 'creds' }],
      rules: [
        {
          host: 'site.example',
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { name: 'http' } } } },
              { path: '/alt', pathType: 'Prefix', backend: { service: { name: 'missing', port: { number: 80 } } } },
            ],
          },
        },
      ],
    },
  },
];

let viewer: Caller;
let nodeName = '';
let podName = '';
let replicaSetName = '';

/** Ages, durations and the node's lease renewal change as time passes: both texts lose them. */
const AGE = String.raw`(?:<invalid>|<unknown>|(?:\d+[smhdy])+)`;
function normalize(text: string): string[] {
  let inEvents = false;
  return text.split('\n').map((line) => {
    if (/^Events:/.test(line)) inEvents = true;
    let out = line.replace(/^( {2}RenewTime:\s+).*$/, '$1<time>').replace(new RegExp(`( {2,})${AGE}$`), '$1<age>');
    // The Age column of the events table: its width follows the ages, so its padding goes too.
    if (inEvents)
      out = out.replace(
        new RegExp(String.raw`^(  \S+ +\S+ +)(?:${AGE}(?: \(x\d+ over ${AGE}\))?|Age|----) +`),
        '$1<age> ',
      );
    return out;
  });
}

/** The first line where the two texts differ, for the assertion message. */
function firstDifference(kiteline: string, kubectlText: string): string | undefined {
  const a = normalize(kiteline);
  const b = normalize(kubectlText);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i])
      return `line ${i + 1}:\n  kiteline: ${JSON.stringify(a[i])}\n  kubectl:  ${JSON.stringify(b[i])}`;
  }
  return undefined;
}

/** Who describes: kiteline's caller, and the identity kubectl runs as (none: the cluster admin). */
interface Describer {
  headers: Record<string, string>;
  kubectlAs?: string;
}

async function kubectlDescribe(kind: string, name: string, namespaced: boolean, as?: string): Promise<string> {
  const args = ['describe', kind, name, ...(namespaced ? ['-n', ns] : []), ...(as ? [`--as=${as}`] : [])];
  const res = await kubectlInBackground(kc, args);
  if (res.status !== 0) throw new Error(`kubectl describe ${kind} ${name}: ${res.stderr}`);
  return res.stdout;
}

/** kiteline's text equals kubectl's (before or after it), within a few rounds. */
async function compare(
  t: Test,
  resource: string,
  kind: string,
  name: string,
  namespaced = true,
  by: Describer = { headers: admin.headers },
): Promise<void> {
  let difference = '';
  for (let round = 0; round < 4; round++) {
    const before = await kubectlDescribe(kind, name, namespaced, by.kubectlAs);
    const res = await call(gw.url, 'GET', `/api/v1/${resource}/${namespaced ? ns : '_all'}/${name}/describe`, {
      headers: by.headers,
    });
    t.equal(res.status, 200, `describe ${kind} ${name}: ${res.status === 200 ? 'answered' : res.text}`);
    const after = await kubectlDescribe(kind, name, namespaced, by.kubectlAs);
    const text = res.body.result as string;
    const diffBefore = firstDifference(text, before);
    if (!diffBefore || !firstDifference(text, after)) {
      t.pass(`${kind} ${name}: the same text as kubectl describe`);
      return;
    }
    difference = diffBefore;
    await new Promise((r) => setTimeout(r, 1000));
  }
  t.fail(`${kind} ${name}: kiteline's text differs from kubectl describe at ${difference}`);
}

t.before(async () => {
  installWidgetCrd(t, kc, group);
  k(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
  k(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      metadata: { name: 'gadget', labels: { size: 'big' } },
      spec: { size: 3, ratio: 0.5, tags: ['a', 'b'], nested: { enabled: true, list: [{ name: 'x' }] } },
    }),
  );
  viewer = await apiKeyWithRoles(gw, admin, 'describe-viewer', ['viewer']);
  nodeName = k(['get', 'nodes', '-o', 'jsonpath={.items[0].metadata.name}']);
  await eventually(
    'the deployment is available',
    () => /1/.test(k(['get', 'deployment', 'web', '-o', 'jsonpath={.status.availableReplicas}'])),
    60_000,
    500,
  );
  await eventually(
    'the job completed',
    () => k(['get', 'job', 'once', '-o', 'jsonpath={.status.succeeded}']) === '1',
    60_000,
    500,
  );
  await eventually(
    'the daemonset pod runs',
    () => k(['get', 'daemonset', 'agent', '-o', 'jsonpath={.status.numberAvailable}']) === '1',
    60_000,
    500,
  );
  await eventually(
    'the statefulset pod exists',
    () => k(['get', 'pods', '-l', 'app=db', '-o', 'name']).trim() !== '',
    60_000,
    500,
  );
  podName = k(['get', 'pods', '-l', 'app=web', '-o', 'jsonpath={.items[0].metadata.name}']);
  replicaSetName = k(['get', 'replicasets', '-l', 'app=web', '-o', 'jsonpath={.items[0].metadata.name}']);
});

t.test('each common kind: the same text as kubectl describe', async (t) => {
  const cases: Array<[string, string, string, boolean?]> = [
    ['pods', 'pod', podName],
    ['deployments', 'deployment', 'web'],
    ['replicasets', 'replicaset', replicaSetName],
    ['statefulsets', 'statefulset', 'db'],
    ['daemonsets', 'daemonset', 'agent'],
    ['services', 'service', 'web'],
    ['configmaps', 'configmap', 'settings'],
    ['secrets', 'secret', 'creds'],
    ['persistentvolumeclaims', 'persistentvolumeclaim', 'claim'],
    ['jobs', 'job', 'once'],
    ['cronjobs', 'cronjob', 'nightly'],
    ['ingresses', 'ingress', 'site'],
    [`widgets.${group}`, `widgets.${group}`, 'gadget'],
    ['nodes', 'node', nodeName, false],
    ['namespaces', 'namespace', ns, false],
  ];
  await Promise.all(
    cases.map(([resource, kind, name, namespaced]) => compare(t, resource, kind, name, namespaced ?? true)),
  );
});

t.test('a Secret shows sizes, never values', async (t) => {
  const res = await call(gw.url, 'GET', `/api/v1/secrets/${ns}/creds/describe`, { headers: admin.headers });
  t.match(res.body.result, /password:\s+14 bytes/);
  t.notMatch(res.text, /hunter2/, 'the value is not in the answer');
});

t.test('authorization and bad input', async (t) => {
  const pod = await call(gw.url, 'GET', `/api/v1/pods/${ns}/${podName}/describe`, { headers: viewer.headers });
  t.equal(pod.status, 200, 'a viewer describes a Pod');
  t.match(pod.body.result, /^Name:\s+/);
  t.match(pod.body.result, /\nEvents:\n/, 'with its events (the viewer may list events)');
  const secret = await call(gw.url, 'GET', `/api/v1/secrets/${ns}/creds/describe`, { headers: viewer.headers });
  t.equal(secret.status, 403, 'but not a Secret');
  t.notMatch(secret.text, /bytes/);
  t.equal((await call(gw.url, 'GET', `/api/v1/pods/${ns}/${podName}/describe`)).status, 401, 'anonymous: 401');
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/nosuchthings/${ns}/x/describe`, { headers: admin.headers })).status,
    404,
    'an unknown resource: 404',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/pods/${ns}/nothing-here/describe`, { headers: admin.headers })).status,
    404,
    'a missing object: 404',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/pods/${ns}/Bad..Name/describe`, { headers: admin.headers })).status,
    400,
    'a bad name: 400',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/pods/_all/${podName}/describe`, { headers: admin.headers })).status,
    400,
    'a namespaced kind under _all: 400',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/nodes/${ns}/${nodeName}/describe`, { headers: admin.headers })).status,
    400,
    'a cluster-scoped kind in a namespace: 400',
  );
});

t.test('related objects only as far as the caller may list them', async (t) => {
  await createRole(gw, admin, {
    name: 'describe-limited',
    clusters: ['a'],
    namespaces: [ns],
    resources: ['deployments', 'pods'],
    verbs: ['get', 'list'],
  });
  await createRole(gw, admin, {
    name: 'describe-nodes',
    clusters: ['a'],
    namespaces: ['_all'],
    resources: ['nodes'],
    verbs: ['get'],
  });
  const limited = await apiKeyWithRoles(gw, admin, 'describe-limited', ['describe-limited', 'describe-nodes']);
  const d = await call(gw.url, 'GET', `/api/v1/deployments/${ns}/web/describe`, { headers: limited.headers });
  t.equal(d.status, 200, d.text);
  t.match(d.body.result, /^Name:\s+web\n/);
  t.notMatch(d.body.result, /NewReplicaSet:|OldReplicaSets:/, 'no ReplicaSet lines without list on replicasets');
  t.match(d.body.result, /\nEvents:\s+<none>\n$/, 'no events without list on events: "Events: <none>", as kubectl');
  // The same rights in the cluster's RBAC, for a ServiceAccount kubectl runs as.
  k(['create', 'serviceaccount', 'describe-limited']);
  k(['create', 'role', 'describe-limited', '--verb=get,list', '--resource=deployments,pods']);
  k([
    'create',
    'rolebinding',
    'describe-limited',
    '--role=describe-limited',
    `--serviceaccount=${ns}:describe-limited`,
  ]);
  await compare(t, 'deployments', 'deployment', 'web', true, {
    headers: limited.headers,
    kubectlAs: `system:serviceaccount:${ns}:describe-limited`,
  });
  const n = await call(gw.url, 'GET', `/api/v1/nodes/_all/${nodeName}/describe`, { headers: limited.headers });
  t.equal(n.status, 200, n.text);
  t.match(n.body.result, /\nPods:\s+not authorized\n/, "the node's pods need list on pods in all namespaces");
  t.notMatch(n.body.result, /Non-terminated Pods/);
  t.match(n.body.result, /\nLease:\s+Failed to get lease: .*forbidden/, 'the Lease needs get on leases');
  t.notMatch(n.body.result, new RegExp(podName), 'no pod of the node is named');
  const svc = await call(gw.url, 'GET', `/api/v1/services/${ns}/web/describe`, { headers: limited.headers });
  t.equal(svc.status, 403, 'no get on services: 403');
});

t.test("kiteline's own namespace on the host cluster: 403", async (t) => {
  await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });
  const headers = { ...admin.headers, 'x-cluster-name': 'self' };
  // An object that really is there: the guard, not a 404, must be what refuses it.
  const own = kubectl(gw.kubeconfig, [
    '-n',
    gw.namespace,
    'get',
    'configmaps',
    '-o',
    'jsonpath={.items[0].metadata.name}',
  ]).stdout;
  t.ok(own, `a ConfigMap in kiteline's namespace (${own})`);
  const res = await call(gw.url, 'GET', `/api/v1/configmaps/${gw.namespace}/${own}/describe`, { headers });
  t.equal(res.status, 403, res.text);
  const nsDescribe = await call(gw.url, 'GET', `/api/v1/namespaces/_all/${gw.namespace}/describe`, { headers });
  t.equal(nsDescribe.status, 403, 'its quotas and limit ranges are not read either');
  const other = await call(gw.url, 'GET', `/api/v1/namespaces/_all/kube-system/describe`, { headers });
  t.equal(other.status, 200, 'another namespace of the host is described');
});
