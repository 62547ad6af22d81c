// kubectl through kiteline's own https listener (`--tls-port` with its self-signed certificate, as
// `make run` serves it), and the proxy's streams not covered by k8s-proxy.test.ts: attach over
// SPDY (kubectl), port-forward over WebSocket (@kubernetes/client-node), and impersonation as the
// target cluster sees it (its own RBAC answers to "kiteline:<user>").
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import t from 'tap';
import { parse } from 'yaml';
import { kubectl, kubectlInBackground, TEST_DIR, uniqueName } from './helpers/clusters.js';
import { login } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { attachRoundTrip } from './helpers/workload-streams.js';

const BUSYBOX = 'kiteline.local/busybox:1';
const gw = await startGateway(t, { logName: 'k8s-proxy-streams', env: { KITELINE_TLS_PORT: '0' } });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'ai', config: testKubeconfig('target-a'), impersonate: true });
const targetAdmin = join(TEST_DIR, 'target-a', 'kubeconfig');

/** A kubeconfig downloaded over plain http, written to a file. */
async function kubeconfigFile(cookie: string, name: string): Promise<{ path: string; yaml: string }> {
  const res = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  if (res.status !== 200) throw new Error(`kubeconfig: ${res.status} ${res.text}`);
  const path = join(TEST_DIR, `${uniqueName(name)}.kubeconfig`);
  writeFileSync(path, res.text);
  return { path, yaml: res.text };
}

const kc = await kubeconfigFile(await login(gw.url, 'admin', 'correct-horse-battery'), 'streams-admin');
const ns = uniqueName('streams');
t.teardown(() => kubectl(targetAdmin, ['delete', 'namespace', ns, '--wait=false']));
async function ok(args: string[], input?: string, path = kc.path): Promise<string> {
  const res = await kubectlInBackground(path, args, input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr || res.stdout}`);
  return res.stdout;
}

t.test('a kubeconfig asked for over http points at the https listener and trusts its certificate', async (t) => {
  const doc = parse(kc.yaml);
  const httpsPort = gw.services.https?.port;
  t.ok(httpsPort && httpsPort !== Number(new URL(gw.url).port), 'an https listener on a port of its own');
  t.equal(doc.clusters[0].cluster.server, `https://127.0.0.1:${httpsPort}/k8s/clusters/a`);
  t.equal(
    Buffer.from(doc.clusters[0].cluster['certificate-authority-data'], 'base64').toString(),
    gw.services.https?.trustPem,
    'the self-signed certificate is the CA',
  );
  await ok(['create', 'namespace', ns]);
  t.match(
    await ok(['get', 'namespace', ns, '-o', 'name']),
    `namespace/${ns}`,
    'kubectl sends its token over https and is served',
  );
  const untrusting = await fetch(`https://127.0.0.1:${httpsPort}/readyz`).catch((err: Error) => err);
  t.type(
    untrusting,
    Error,
    'a client that does not trust the certificate is refused by the TLS handshake, not served in the clear',
  );
});

t.test('attach over SPDY (kubectl attach -i): stdin in, stdout out', async (t) => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'echoer' },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'echoer',
          image: BUSYBOX,
          imagePullPolicy: 'Never',
          stdin: true,
          command: ['sh', '-c', 'while read line; do echo "got $line"; done'],
        },
      ],
    },
  };
  await ok(['-n', ns, 'apply', '-f', '-'], JSON.stringify(pod));
  await ok(['-n', ns, 'wait', '--for=condition=Ready', 'pod/echoer', '--timeout=120s']);
  // kubectl 1.31+ attaches over WebSocket (test/kubectl-current.test.ts); this is its SPDY fallback.
  await attachRoundTrip(kc.path, ns, 'echoer', { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' });
  t.pass('attach -i streams both ways');
});

t.test('port-forward over WebSocket (client-node PortForward) reaches the pod', async (t) => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web' },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'web', image: BUSYBOX, imagePullPolicy: 'Never', command: ['httpd', '-f', '-p', '8080', '-h', '/www'] },
      ],
    },
  };
  await ok(['-n', ns, 'apply', '-f', '-'], JSON.stringify(pod));
  await ok(['-n', ns, 'wait', '--for=condition=Ready', 'pod/web', '--timeout=120s']);
  const config = new k8s.KubeConfig();
  config.loadFromString(kc.yaml);
  let received = '';
  const output = new Writable({ write: (chunk, _enc, done) => ((received += chunk.toString('latin1')), done()) });
  const input = new PassThrough();
  const socket = await new k8s.PortForward(config).portForward(ns, 'web', [8080], output, null, input);
  t.teardown(() => (typeof socket === 'function' ? socket()?.close() : socket.close()));
  input.write('GET / HTTP/1.0\r\nHost: web\r\n\r\n');
  await eventually('the page through the forwarded port', () => received.includes('kiteline busybox'), 30_000, 100);
  t.match(received, /HTTP\/1\.[01] 200/, 'an HTTP answer from httpd in the pod');
});

t.test("impersonation: the target's own RBAC answers to kiteline:<user>", async (t) => {
  await createRole(gw, admin, {
    name: 'cm-reader',
    clusters: ['ai'],
    namespaces: [ns],
    resources: ['configmaps'],
    verbs: ['get', 'list'],
  });
  t.equal(
    (
      await call(gw.url, 'POST', '/api/v1/admin/users/', {
        headers: admin.headers,
        body: { username: 'imp', password: 'imp-password-1', name: 'Imp' },
      })
    ).status,
    201,
  );
  const roles = await call(gw.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
  const role = roles.body.roles.find((r: { name: string }) => r.name === 'cm-reader');
  await eventually(
    'the role assignment',
    async () =>
      (
        await call(gw.url, 'POST', `/api/v1/admin/roles/${role.id}/assign`, {
          headers: admin.headers,
          body: { subjectType: 'user', subject: 'imp' },
        })
      ).status < 300,
  );
  const imp = await kubeconfigFile(await login(gw.url, 'imp', 'imp-password-1'), 'imp');
  const list = () => kubectlInBackground(imp.path, ['--context', 'ai', '-n', ns, 'get', 'configmaps', '-o', 'name']);
  const denied = await list();
  t.match(
    denied.stderr,
    /User "kiteline:imp" cannot list resource "configmaps"/,
    'kiteline allows it; the cluster sees the user and says no',
  );
  const forged = await call(gw.url, 'GET', `/k8s/clusters/ai/api/v1/namespaces/${ns}/configmaps`, {
    headers: {
      authorization: `Bearer ${/token: (\S+)/.exec(imp.yaml)![1]}`,
      'impersonate-user': 'system:admin',
      'impersonate-group': 'system:masters',
    },
  });
  t.equal(forged.status, 403, "a client's own Impersonate-* headers win nothing: kiteline refuses them");
  t.match(forged.body, {
    kind: 'Status',
    reason: 'Forbidden',
    message: /impersonate-\w+ is not allowed through kiteline: requests run as you \(imp\)/,
  });
  // The cluster's admin grants the user, by the name the cluster sees, and kubectl gets through.
  t.equal(
    kubectl(targetAdmin, ['-n', ns, 'create', 'rolebinding', 'imp-view', '--clusterrole=view', '--user=kiteline:imp'])
      .status,
    0,
  );
  const allowed = await eventually(
    'the RoleBinding to take effect',
    async () => {
      const res = await list();
      return res.status === 0 ? res : undefined;
    },
    30_000,
    300,
  );
  t.match(allowed.stdout, 'configmap/kube-root-ca.crt');
});

t.test('an upgrade request outside the proxy is served as the plain request it also is', async (t) => {
  const { hostname, port } = new URL(gw.url);
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `GET /api/v1/clusters HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${admin.key}\r\n` +
          'Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n',
      );
    });
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
  });
  t.match(answer, /^HTTP\/1\.1 200 /, 'answered, not upgraded');
  t.match(answer, /"name":"a"/, 'the route answered it, authenticated');
  t.match(answer, /connection: close/i, 'on a connection that then closes');
});
