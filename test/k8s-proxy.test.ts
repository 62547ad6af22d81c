// kubectl and @kubernetes/client-node through /k8s/clusters/<cluster>/..., with a kubeconfig
// downloaded from POST /api/v1/kubeconfig: one kubeconfig, two clusters with nodes (target-a as
// "a", the host itself as "h"), switched by context. Then the token's lifecycle (revoked, expired,
// owner disabled or demoted: 401), kiteline's roles (a namespace-limited role gets Forbidden), and
// the host guard on the proxy.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createServer as createTlsServer } from 'node:tls';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import t from 'tap';
import { stringify } from 'yaml';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { kubectlInBackground, TEST_DIR, uniqueName } from './helpers/clusters.js';
import { login } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const BUSYBOX = 'kiteline.local/busybox:1';

// kubectl sends a token only over https: a TLS front end (as an ingress would be) with a
// self-signed certificate, whose CA the kubeconfig embeds.
const tlsDir = join(TEST_DIR, uniqueName('proxy-tls'));
mkdirSync(tlsDir, { recursive: true });
execFileSync(
  'openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    join(tlsDir, 'key.pem'),
    '-out',
    join(tlsDir, 'cert.pem'),
    '-days',
    '1',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  ],
  { stdio: 'ignore' },
);
let gatewayPort = 0;
const front = createTlsServer(
  { key: readFileSync(join(tlsDir, 'key.pem')), cert: readFileSync(join(tlsDir, 'cert.pem')) },
  (client) => {
    const upstream = connect(gatewayPort, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  },
);
await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
t.teardown(() => front.close());
const frontUrl = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
const gw = await startGateway(t, {
  logName: 'k8s-proxy',
  env: { KITELINE_EXTERNAL_URL: frontUrl, KITELINE_KUBECONFIG_CA_FILE: join(tlsDir, 'cert.pem') },
});
gatewayPort = Number(new URL(gw.url).port);
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });
const adminCookie = await login(gw.url, 'admin', 'correct-horse-battery');

/** Downloads a kubeconfig with the given session cookie and writes it to a file. */
async function kubeconfigFile(
  cookie: string,
  name: string,
  body?: object,
): Promise<{ path: string; yaml: string; token: string }> {
  const res = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie }, ...(body ? { body } : {}) });
  if (res.status !== 200) throw new Error(`kubeconfig: ${res.status} ${res.text}`);
  const path = join(TEST_DIR, `${uniqueName(name)}.kubeconfig`);
  writeFileSync(path, res.text);
  return { path, yaml: res.text, token: /token: (\S+)/.exec(res.text)![1] };
}

const kc = await kubeconfigFile(adminCookie, 'admin');
const ns = uniqueName('proxy');

/** kubectl with the downloaded kubeconfig (never blocking this process: the gateway runs here). */
function k(args: string[], input?: string) {
  return kubectlInBackground(kc.path, args, input);
}
async function ok(args: string[], input?: string): Promise<string> {
  const res = await k(args, input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr || res.stdout}`);
  return res.stdout;
}

/** A long-running kubectl (get -w, logs -f, port-forward) whose output the test reads as it comes. */
function streaming(args: string[]) {
  const child = spawn(ensureBinaries().kubectl, ['--kubeconfig', kc.path, ...args]);
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  t.teardown(() => child.kill());
  return { child, output: () => out };
}

for (const context of ['a', 'h']) {
  await ok(['--context', context, 'create', 'namespace', ns]);
  t.teardown(() => k(['--context', context, 'delete', 'namespace', ns, '--wait=false']));
}

t.test('the kubeconfig: one context per cluster, the default current, a token that is an owned API key', async (t) => {
  t.match(kc.yaml, /current-context: a/);
  t.match(kc.yaml, `server: ${frontUrl}/k8s/clusters/a`, 'the configured external URL');
  t.match(kc.yaml, `server: ${frontUrl}/k8s/clusters/h`);
  t.match(kc.yaml, 'certificate-authority-data: ', "the front end's CA");
  const keys = await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers: admin.headers });
  const minted = keys.body.apiKeys.filter((key: { name: string }) => key.name.startsWith('kubeconfig-admin-'));
  t.equal(minted.length, 1, 'listed like any key');
  t.ok(
    Date.parse(minted[0].expiresAt) - Date.now() > 11 * 3600_000 &&
      Date.parse(minted[0].expiresAt) - Date.now() <= 12 * 3600_000,
    'expires in the default 12 hours',
  );
  t.same(minted[0].roles, ['admin']);
  const tooLong = await call(gw.url, 'POST', '/api/v1/kubeconfig', {
    headers: { cookie: adminCookie },
    body: { ttlSeconds: 31 * 24 * 3600 },
  });
  t.equal(tooLong.status, 400, 'longer than the maximum');
  const plainKey = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: admin.headers });
  t.equal(plainKey.status, 403, 'an API key of no user mints nothing');
});

t.test('discovery, api-resources, explain, version', async (t) => {
  t.match(await ok(['api-resources']), /deployments\s+deploy\s+apps\/v1\s+true\s+Deployment/);
  t.match(await ok(['explain', 'deployment.spec.replicas']), /replicas/);
  t.match(await ok(['version', '-o', 'json']), /"serverVersion"/);
});

// A web server, and a line a second on stdout (the node's container logs can lose older lines, so
// a test looks for the newest).
const TICKING_WEB_SERVER =
  'mkdir -p /www; echo hello-from-pod > /www/index.html; httpd -p 8080 -h /www; ' +
  'while true; do echo tick; sleep 1; done';
const manifests = (name: string) =>
  [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-cfg` }, data: { greeting: 'hello' } },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [
              { name: 'web', image: BUSYBOX, imagePullPolicy: 'Never', command: ['sh', '-c', TICKING_WEB_SERVER] },
            ],
          },
        },
      },
    },
  ]
    .map((doc) => stringify(doc))
    .join('---\n');

for (const context of ['a', 'h']) {
  t.test(
    `kubectl on cluster ${context}: apply, diff, get -w, rollout, scale, logs, exec, port-forward, cp, wait, delete`,
    async (t) => {
      const on = ['--context', context, '-n', ns];
      t.match(
        await ok([...on, 'apply', '-f', '-'], manifests('web')),
        /deployment.apps\/web created/,
        'client-side apply of two documents',
      );
      t.match(
        await ok([...on, 'apply', '--server-side', '-f', '-'], manifests('web')),
        /serverside-applied/,
        'server-side apply',
      );
      const diff = await k([...on, 'diff', '-f', '-'], manifests('web').replace('hello', 'bonjour'));
      t.equal(diff.status, 1, 'diff finds the change');
      t.match(diff.stdout, /bonjour/);

      const watch = streaming([...on, 'get', 'configmaps', '-w', '-o', 'name']);
      await eventually('the watch to list', () => watch.output().includes('configmap/web-cfg'), 30_000, 100);
      await ok([...on, 'create', 'configmap', 'late-arrival', '--from-literal=x=y']);
      await eventually(
        'the watch to see a change',
        () => watch.output().includes('configmap/late-arrival'),
        30_000,
        100,
      );
      watch.child.kill();

      t.match(await ok([...on, 'rollout', 'status', 'deployment/web', '--timeout=120s']), /successfully rolled out/);
      await ok([...on, 'rollout', 'restart', 'deployment/web']);
      t.match(
        await ok([...on, 'rollout', 'status', 'deployment/web', '--timeout=120s']),
        /successfully rolled out/,
        'rollout restart + status',
      );
      t.match(await ok([...on, 'scale', 'deployment/web', '--replicas=1']), /scaled/);

      // The restarted Deployment's one pod, once the old one is gone.
      const pod = await eventually(
        'one running pod',
        async () => {
          const items = JSON.parse(await ok([...on, 'get', 'pods', '-l', 'app=web', '-o', 'json'])).items as Array<{
            metadata: { name: string };
            status: { phase: string };
          }>;
          return items.length === 1 && items[0].status.phase === 'Running' ? items[0].metadata.name : undefined;
        },
        120_000,
        500,
      );
      await eventually('logs', async () => (await ok([...on, 'logs', pod])).includes('tick'), 30_000, 500);
      t.pass('logs');
      const follow = streaming([...on, 'logs', '-f', pod]);
      await eventually(
        'logs -f to print new lines as they come',
        () => follow.output().split('tick').length > 3,
        30_000,
        100,
      );
      t.pass('logs -f streams');
      follow.child.kill();

      t.equal(
        await ok([...on, 'exec', '-i', pod, '--', 'sh', '-c', 'cat; echo done'], 'from-stdin\n'),
        'from-stdin\ndone\n',
        'exec with stdin (SPDY)',
      );
      await ok([...on, 'cp', '/dev/null', `${pod}:/tmp/empty`]).catch(() => undefined);
      writeFileSync(join(TEST_DIR, `cp-${context}.txt`), 'copied through kiteline\n');
      await ok([...on, 'cp', join(TEST_DIR, `cp-${context}.txt`), `${pod}:/tmp/copied.txt`]);
      t.equal(
        await ok([...on, 'exec', pod, '--', 'cat', '/tmp/copied.txt']),
        'copied through kiteline\n',
        'cp into the pod',
      );

      const forward = streaming([...on, 'port-forward', `pod/${pod}`, ':8080']);
      const port = await eventually(
        'port-forward to listen',
        () => /127\.0\.0\.1:(\d+) ->/.exec(forward.output())?.[1],
        30_000,
        100,
      );
      const page = await new Promise<string>((resolve, reject) => {
        get(`http://127.0.0.1:${port}/`, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve(body));
        }).on('error', reject);
      });
      t.equal(page, 'hello-from-pod\n', 'a request through port-forward');
      forward.child.kill();

      const waiting = k([...on, 'wait', '--for=delete', `pod/${pod}`, '--timeout=60s']);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await ok([...on, 'delete', 'pod', pod, '--wait=false']);
      const waited = await waiting;
      t.equal(waited.status, 0, `wait --for=delete ${waited.stderr}`);
      t.match(await ok([...on, 'delete', '-f', '-'], manifests('web')), /deleted/);
    },
  );
}

t.test('@kubernetes/client-node with the same kubeconfig lists and watches', async (t) => {
  const config = new k8s.KubeConfig();
  config.loadFromString(kc.yaml);
  config.setCurrentContext('h');
  const core = config.makeApiClient(k8s.CoreV1Api);
  const list = await core.listNamespacedConfigMap({ namespace: ns });
  t.ok(
    list.items.some((cm) => cm.metadata?.name === 'kube-root-ca.crt'),
    'a list',
  );
  const seen = new Promise<string>((resolve) => {
    void new k8s.Watch(config)
      .watch(
        `/api/v1/namespaces/${ns}/configmaps`,
        {},
        (type, obj) => {
          if (obj.metadata?.name === 'from-client-node') resolve(type);
        },
        () => undefined,
      )
      .then((req) => t.teardown(() => req.abort()));
  });
  await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'from-client-node' } } });
  t.equal(await seen, 'ADDED', 'a watch event');
});

t.test('a namespace-limited role: Forbidden outside its namespace, exec included', async (t) => {
  const role = await call(gw.url, 'POST', '/api/v1/admin/roles/', {
    headers: admin.headers,
    body: { name: 'team', clusters: ['*'], namespaces: [ns], resources: ['*'], verbs: ['get', 'list', 'watch'] },
  });
  t.equal(role.status, 201);
  t.equal(
    (
      await call(gw.url, 'POST', '/api/v1/admin/users/', {
        headers: admin.headers,
        body: { username: 'dev', password: 'dev-password-1', name: 'Dev' },
      })
    ).status,
    201,
  );
  await eventually(
    'the role assignment',
    async () =>
      (
        await call(gw.url, 'POST', `/api/v1/admin/roles/${role.body.role.id}/assign`, {
          headers: admin.headers,
          body: { subjectType: 'user', subject: 'dev' },
        })
      ).status < 300,
  );
  const dev = await kubeconfigFile(await login(gw.url, 'dev', 'dev-password-1'), 'dev');
  const dk = (args: string[]) => kubectlInBackground(dev.path, args);
  t.equal((await dk(['-n', ns, 'get', 'configmaps'])).status, 0, 'its own namespace');
  const outside = await dk(['-n', 'default', 'get', 'configmaps']);
  t.match(
    outside.stderr,
    /Error from server \(Forbidden\): .*may not list configmaps in namespace default/,
    'Forbidden, as kubectl prints it',
  );
  t.match((await dk(['get', 'pods', '-A'])).stderr, /Forbidden/, 'all namespaces');
  const pods = await k([
    '-n',
    ns,
    'run',
    'idle',
    `--image=${BUSYBOX}`,
    '--image-pull-policy=Never',
    '--restart=Never',
    '--',
    'sleep',
    '3600',
  ]);
  t.equal(pods.status, 0);
  t.match(
    (await dk(['-n', ns, 'exec', 'idle', '--', 'true'])).stderr,
    /Forbidden.*may not create pods\/exec/,
    'a reader cannot exec, even in its namespace',
  );
  t.match(
    (await dk(['-n', ns, 'delete', 'configmap', 'refused-target'])).stderr,
    /Forbidden/,
    'a reader cannot delete',
  );
  // Refused actions are audited with what they named, not a bare path.
  const refused = (resource: string, name: string) =>
    readFileSync(join(TEST_DIR, 'logs', 'k8s-proxy.log'), 'utf8')
      .split('\n')
      .filter(
        (line) =>
          line.includes('"audit"') &&
          line.includes(`"${resource}"`) &&
          line.includes(`"${name}"`) &&
          line.includes(`"${ns}"`),
      )
      .map((line) => JSON.parse(line).audit)[0];
  t.match(await eventually('the refused delete in the audit log', () => refused('configmaps', 'refused-target')), {
    who: 'dev',
    cluster: 'a',
    verb: 'delete',
    resource: 'configmaps',
    namespace: ns,
    name: 'refused-target',
    result: 'failure',
    status: 403,
  });
  t.match(await eventually('the refused exec in the audit log', () => refused('pods/exec', 'idle')), {
    who: 'dev',
    verb: 'create',
    resource: 'pods/exec',
    namespace: ns,
    name: 'idle',
    result: 'failure',
    status: 403,
  });

  // The token's lifecycle: the owner loses the role, comes back; the key is revoked.
  const version = () =>
    call(gw.url, 'GET', '/k8s/clusters/a/version', { headers: { authorization: `Bearer ${dev.token}` } });
  t.equal((await version()).status, 200);
  await call(gw.url, 'DELETE', `/api/v1/admin/roles/${role.body.role.id}/assign?subjectType=user&subject=dev`, {
    headers: admin.headers,
  });
  await eventually('the demoted owner to kill the token', async () => (await version()).status === 401);
  t.match((await dk(['get', 'ns'])).stderr, /Unauthorized|must be logged in/, 'kubectl: 401');
});

t.test('revoked and expired tokens get 401; a session cookie is not accepted', async (t) => {
  const short = await kubeconfigFile(adminCookie, 'short', { ttlSeconds: 60 });
  const version = (headers: Record<string, string>) => call(gw.url, 'GET', '/k8s/clusters/a/version', { headers });
  t.equal((await version({ authorization: `Bearer ${short.token}` })).status, 200);
  t.equal((await version({ cookie: adminCookie })).status, 401, 'the cookie alone');
  const denied = await version({});
  t.match(denied.body, { kind: 'Status', code: 401, reason: 'Unauthorized' });
  const id = Number(/^kl_(\d+)_/.exec(short.token)![1]);
  t.equal((await call(gw.url, 'DELETE', `/api/v1/admin/apikeys/${id}`, { headers: admin.headers })).status, 200);
  t.equal((await version({ authorization: `Bearer ${short.token}` })).status, 401, 'revoked');
});

t.test('the host guard holds on the proxy', async (t) => {
  const h = (args: string[]) => k(['--context', 'h', ...args]);
  t.match((await h(['-n', gw.namespace, 'get', 'secrets'])).stderr, /Forbidden/, 'the install namespace');
  t.match((await h(['get', 'users.kiteline.io', '-A'])).stderr, /Forbidden/, 'the kiteline.io group');
  const all = await ok(['--context', 'h', 'get', 'configmaps', '-A', '-o', 'jsonpath={.items[*].metadata.namespace}']);
  t.notOk(all.split(' ').includes(gw.namespace), 'all-namespace lists leave the install namespace out');
  const escaped = await call(
    gw.url,
    'GET',
    `/k8s/clusters/h/api/v1/configmaps?fieldSelector=${encodeURIComponent('metadata.namespace!=zzz\\')}`,
    { headers: { authorization: `Bearer ${kc.token}` } },
  );
  t.notOk(
    JSON.stringify(escaped.body ?? {}).includes(`"namespace":"${gw.namespace}"`),
    'a trailing backslash cannot swallow the filter',
  );
  t.match(
    (await h(['delete', 'namespace', gw.namespace, '--dry-run=server'])).stderr,
    /Forbidden/,
    'the install namespace cannot be deleted',
  );
  // fetch would resolve the dot segments itself: a raw request keeps them.
  const climbing = await new Promise<number>((resolve, reject) => {
    const { hostname, port } = new URL(gw.url);
    get(
      {
        hostname,
        port,
        path: '/k8s/clusters/h/api/v1/namespaces/x/../../secrets',
        headers: { authorization: `Bearer ${kc.token}` },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    ).on('error', reject);
  });
  t.equal(climbing, 400, 'a path with dot segments');
});

t.test('exec over WebSocket (v4.channel.k8s.io) with client-node; the session is one audit line', async (t) => {
  await ok([
    '-n',
    ns,
    'run',
    'ws-target',
    `--image=${BUSYBOX}`,
    '--image-pull-policy=Never',
    '--restart=Never',
    '--',
    'sleep',
    '3600',
  ]);
  await ok(['-n', ns, 'wait', '--for=condition=Ready', 'pod/ws-target', '--timeout=120s']);
  const config = new k8s.KubeConfig();
  config.loadFromString(kc.yaml);
  let out = '';
  const stdout = new Writable({ write: (chunk, _enc, done) => ((out += chunk.toString()), done()) });
  const status = await new Promise<k8s.V1Status>((resolve, reject) => {
    new k8s.Exec(config)
      .exec(ns, 'ws-target', 'ws-target', ['sh', '-c', 'echo over-websocket'], stdout, null, null, false, resolve)
      .catch(reject);
  });
  t.equal(status.status, 'Success');
  t.equal(out, 'over-websocket\n');
  const audit = await eventually(
    'the session audit line',
    () =>
      readFileSync(join(TEST_DIR, 'logs', 'k8s-proxy.log'), 'utf8')
        .split('\n')
        .filter(
          (line) =>
            line.includes('"audit"') &&
            line.includes('"pods/exec"') &&
            line.includes('ws-target') &&
            line.includes(`"${ns}"`),
        )
        .map((line) => JSON.parse(line).audit)[0],
  );
  t.match(audit, {
    who: 'admin',
    cluster: 'a',
    verb: 'create',
    resource: 'pods/exec',
    namespace: ns,
    name: 'ws-target',
    result: 'success',
    status: 101,
  });
  t.ok(audit.bytesOut > 0 && Date.parse(audit.end) >= Date.parse(audit.start), 'start, end and bytes');
});
