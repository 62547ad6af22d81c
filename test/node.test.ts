// The shared target-a control plane has a real node: pods run. Everything here is plain kubectl
// against the control plane, so it proves the node itself before any kiteline route relies on it.
import { get } from 'node:http';
import t from 'tap';
import { kubectl, kubectlPortForward, testControlPlane, uniqueName } from './helpers/clusters.js';

const BUSYBOX = 'kiteline.local/busybox:1';
const cp = await testControlPlane('target-a');
const kc = cp.kubeconfigPath;
const ns = uniqueName('node');
t.equal(kubectl(kc, ['create', 'namespace', ns]).status, 0, 'a namespace of our own');
t.teardown(() => kubectl(kc, ['delete', 'namespace', ns, '--wait=false']));

/** kubectl in our namespace; fails the test with kubectl's stderr when it fails. */
function k(args: string[], input?: string): string {
  const res = kubectl(kc, ['-n', ns, ...args], input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr || res.stdout}`);
  return res.stdout;
}

function apply(manifest: object): void {
  k(['apply', '-f', '-'], JSON.stringify(manifest));
}

/** A busybox container spec; short grace period, since busybox as PID 1 ignores SIGTERM. */
function podSpec(name: string, command: string[], extra: object = {}): object {
  return { terminationGracePeriodSeconds: 1, containers: [{ name, image: BUSYBOX, command, ...extra }] };
}

const httpd = ['httpd', '-f', '-p', '8080', '-h', '/www'];

function httpGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

t.test('the node is registered with its own credential and Ready', async (t) => {
  const node = JSON.parse(kubectl(kc, ['get', 'node', cp.node!.name, '-o', 'json']).stdout);
  t.equal(node.status.conditions.find((c: { type: string }) => c.type === 'Ready').status, 'True');
  const address = node.status.addresses.find((a: { type: string }) => a.type === 'InternalIP').address;
  t.match(address, /^10\.250\.\d+\.2$/, 'its InternalIP is the node end of its own link, not loopback');
  t.equal(node.metadata.labels['kubernetes.io/hostname'], cp.node!.name);
});

t.test("a Deployment's pods become Ready", async (t) => {
  apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: podSpec('web', httpd, { readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 1 } }),
      },
    },
  });
  const rollout = kubectl(kc, ['-n', ns, 'rollout', 'status', 'deployment/web', '--timeout=180s']);
  t.equal(rollout.status, 0, rollout.stderr);
  const pods = JSON.parse(k(['get', 'pods', '-l', 'app=web', '-o', 'json'])).items;
  t.equal(pods.length, 2);
  for (const pod of pods) {
    t.equal(pod.status.phase, 'Running');
    t.equal(pod.spec.nodeName, cp.node!.name, 'scheduled on the node');
    t.match(pod.status.podIP, /^10\.251\.\d+\.\d+$/, 'an address from the node’s pod subnet');
  }
});

t.test('kubectl logs and exec', async (t) => {
  const marker = uniqueName('hello');
  apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'talker' },
    spec: podSpec('talker', ['sh', '-c', `echo ${marker}; exec sleep 3600`]),
  });
  t.equal(kubectl(kc, ['-n', ns, 'wait', '--for=condition=Ready', 'pod/talker', '--timeout=120s']).status, 0);
  t.match(k(['logs', 'talker']), marker, 'kubectl logs shows what the container printed');
  t.equal(k(['exec', 'talker', '--', 'echo', marker]), `${marker}\n`, 'kubectl exec runs a command in the container');
  t.equal(k(['exec', '-i', 'talker', '--', 'cat'], marker), marker, 'exec -i passes stdin through');
});

t.test("a pod reaches the API server at the kubernetes Service's IP (kube-proxy)", async (t) => {
  const env = k(['exec', 'talker', '--', 'sh', '-c', 'echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT']).trim();
  t.equal(env, '10.0.0.1:443');
  // A plain HTTP request to the TLS port: Go's TLS server answers with this exact complaint.
  const answer = k(['exec', 'talker', '--', 'sh', '-c', "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 10.0.0.1 443"]);
  t.match(answer, 'Client sent an HTTP request to an HTTPS server');
});

t.test('kubectl port-forward to the busybox httpd', async (t) => {
  const pod = JSON.parse(k(['get', 'pods', '-l', 'app=web', '-o', 'json'])).items[0].metadata.name;
  const base = await kubectlPortForward(t, kc, ns, `pod/${pod}`, 8080);
  const res = await httpGet(`${base}/`);
  t.equal(res.status, 200);
  t.equal(res.body, 'kiteline busybox\n', "the pod's web root, through the kubelet's stream");
});

t.test("the API server's proxy to a pod and to a Service", async (t) => {
  const pod = JSON.parse(k(['get', 'pods', '-l', 'app=web', '-o', 'json'])).items[0].metadata.name;
  t.equal(k(['get', '--raw', `/api/v1/namespaces/${ns}/pods/${pod}:8080/proxy/`]), 'kiteline busybox\n');
  apply({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web' },
    spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] },
  });
  let body = '';
  for (let i = 0; i < 50 && body !== 'kiteline busybox\n'; i++) {
    const res = kubectl(kc, ['get', '--raw', `/api/v1/namespaces/${ns}/services/web:80/proxy/`]);
    body = res.stdout;
    if (body !== 'kiteline busybox\n') await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(body, 'kiteline busybox\n', 'the Service proxy reaches a ready endpoint');
});

t.test('a Job runs to completion', async (t) => {
  apply({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'once' },
    spec: {
      backoffLimit: 0,
      template: { spec: { ...podSpec('once', ['sh', '-c', 'echo job-ran; exit 0']), restartPolicy: 'Never' } },
    },
  });
  const wait = kubectl(kc, ['-n', ns, 'wait', '--for=condition=Complete', 'job/once', '--timeout=120s']);
  t.equal(wait.status, 0, wait.stderr);
  t.equal(JSON.parse(k(['get', 'job', 'once', '-o', 'json'])).status.succeeded, 1);
  t.match(k(['logs', 'job/once']), 'job-ran');
});

t.test('a container killed from inside is restarted by the kubelet', async (t) => {
  // PID 1 only receives signals it handles: the trap makes `kill 1` end it with status 3.
  apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'phoenix' },
    spec: podSpec('phoenix', ['sh', '-c', 'trap "exit 3" TERM; while true; do sleep 1; done']),
  });
  t.equal(kubectl(kc, ['-n', ns, 'wait', '--for=condition=Ready', 'pod/phoenix', '--timeout=120s']).status, 0);
  k(['exec', 'phoenix', '--', 'kill', '1']);
  let status: { restartCount: number; ready: boolean; lastState: { terminated?: { exitCode: number } } } | undefined;
  for (let i = 0; i < 120; i++) {
    status = JSON.parse(k(['get', 'pod', 'phoenix', '-o', 'json'])).status.containerStatuses[0];
    if (status!.restartCount >= 1 && status!.ready) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  t.equal(status?.restartCount, 1, 'restarted once');
  t.equal(status?.lastState.terminated?.exitCode, 3, 'the previous container ended by the kill');
  t.equal(status?.ready, true, 'and runs again');
});

t.test('foreground deletion of a Deployment removes its pods', async (t) => {
  const del = kubectl(kc, ['-n', ns, 'delete', 'deployment', 'web', '--cascade=foreground', '--timeout=120s']);
  t.equal(del.status, 0, del.stderr);
  t.same(JSON.parse(k(['get', 'pods', '-l', 'app=web', '-o', 'json'])).items, [], 'no pod of the Deployment is left');
  t.same(JSON.parse(k(['get', 'replicasets', '-l', 'app=web', '-o', 'json'])).items, [], 'nor its ReplicaSet');
});
