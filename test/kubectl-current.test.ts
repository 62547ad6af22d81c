// The current kubectl (the release the test planes run, scripts/kubernetes/versions) through
// kiteline's /k8s/clusters/<name> as the user, on what Kubernetes 1.20 never had: exec, attach and
// cp over WebSocket (KEP-4006, kubectl 1.31+) and over SPDY when asked
// (KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false), port-forward over WebSocket, `kubectl debug`
// (ephemeral containers), in-place resize (pods/resize), server-side apply with a conflict, `get -w`,
// `events`, `auth can-i --as` refused, `wait` and `rollout`; and roles on the newer subresources.
// Which transport each session used is read from its audit line (`protocol`).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { parse } from 'yaml';
import { ensureBinaries, kubernetesVersions } from '../src/controlplane/binaries.js';
import { login } from './helpers/auth-session.js';
import { kubectl, kubectlInBackground, TEST_DIR, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { attachRoundTrip } from './helpers/workload-streams.js';

const BUSYBOX = 'kiteline.local/busybox:1';
const LOG = 'kubectl-current';
const gw = await startGateway(t, { logName: LOG, env: { KITELINE_TLS_PORT: '0' } });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b') });
const targetAdmin = join(TEST_DIR, 'target-a', 'kubeconfig');

async function kubeconfigFile(cookie: string, name: string): Promise<string> {
  const res = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  if (res.status !== 200) throw new Error(`kubeconfig: ${res.status} ${res.text}`);
  const path = join(TEST_DIR, `${uniqueName(name)}.kubeconfig`);
  writeFileSync(path, res.text);
  return path;
}

const kc = await kubeconfigFile(await login(gw.url, 'admin', 'correct-horse-battery'), 'current-admin');
const ns = uniqueName('current');
t.teardown(() => kubectl(targetAdmin, ['delete', 'namespace', ns, '--wait=false']));

type Env = Record<string, string>;
function k(args: string[], input?: string, path = kc, env: Env = {}) {
  if (Object.keys(env).length === 0) return kubectlInBackground(path, args, input);
  return new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(ensureBinaries().kubectl, ['--kubeconfig', path, ...args], { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ status: code ?? -1, stdout, stderr }));
    child.stdin.end(input);
  });
}
async function ok(args: string[], input?: string, path = kc, env: Env = {}): Promise<string> {
  const res = await k(args, input, path, env);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr || res.stdout}`);
  return res.stdout;
}

/** The audit lines of proxied sessions of this file's gateway on one pod and subresource, newest last. */
function sessionAudits(resource: string, name: string): Record<string, unknown>[] {
  return readFileSync(join(TEST_DIR, 'logs', `${LOG}.log`), 'utf8')
    .split('\n')
    .filter((line) => line.includes('"audit"') && line.includes(`"${resource}"`) && line.includes(`"${name}"`))
    .map((line) => (JSON.parse(line) as { audit: Record<string, unknown> }).audit);
}

await ok(['create', 'namespace', ns]);
const pod = (name: string, command: string[], extra: object = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels: { app: name } },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [
      {
        name,
        image: BUSYBOX,
        imagePullPolicy: 'Never',
        command,
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
        ...extra,
      },
    ],
  },
});
await ok(
  ['-n', ns, 'apply', '-f', '-'],
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      pod('shell', ['sleep', '3600']),
      pod('echoer', ['sh', '-c', 'while read line; do echo "got $line"; done'], { stdin: true }),
      pod('web', ['httpd', '-f', '-p', '8080', '-h', '/www']),
    ],
  }),
);
await ok(['-n', ns, 'wait', '--for=condition=Ready', 'pod/shell', 'pod/echoer', 'pod/web', '--timeout=120s']);

t.test('kubectl is the current release, and so is the cluster behind kiteline', async (t) => {
  const { current, older } = kubernetesVersions();
  const version = JSON.parse(await ok(['version', '-o', 'json'])) as {
    clientVersion: { gitVersion: string };
    serverVersion: { gitVersion: string };
  };
  t.equal(version.clientVersion.gitVersion, current, 'kubectl version: client');
  t.equal(version.serverVersion.gitVersion, current, 'kubectl version: server (target-a, through kiteline)');
  const skewed = JSON.parse(await ok(['--context', 'b', 'version', '-o', 'json'])) as typeof version;
  t.equal(skewed.serverVersion.gitVersion, older, 'target-b runs the older minor');
});

t.test('exec over WebSocket (the default), and over SPDY when kubectl is told to', async (t) => {
  t.equal(await ok(['-n', ns, 'exec', 'shell', '--', 'echo', 'over-websocket']), 'over-websocket\n');
  const ws = await eventually('the WebSocket exec audit line', () =>
    sessionAudits('pods/exec', 'shell').find((a) => String(a.protocol).startsWith('websocket')),
  );
  t.match(ws, { who: 'admin', cluster: 'a', verb: 'create', status: 101, protocol: 'websocket v5.channel.k8s.io' });

  const spdyEnv = { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' };
  t.equal(await ok(['-n', ns, 'exec', 'shell', '--', 'echo', 'over-spdy'], undefined, kc, spdyEnv), 'over-spdy\n');
  const spdy = await eventually('the SPDY exec audit line', () =>
    sessionAudits('pods/exec', 'shell').find((a) => String(a.protocol).startsWith('SPDY/3.1')),
  );
  t.match(spdy, { status: 101, protocol: /^SPDY\/3\.1 v[45]\.channel\.k8s\.io$/ });

  const failed = await k(['-n', ns, 'exec', 'shell', '--', 'sh', '-c', 'exit 7']);
  t.equal(failed.status, 7, "the command's exit status comes back over the WebSocket");
});

t.test('attach -i and cp over WebSocket', async (t) => {
  await attachRoundTrip(kc, ns, 'echoer');
  const attach = await eventually('the attach audit line', () => sessionAudits('pods/attach', 'echoer')[0]);
  t.match(attach, { protocol: /^websocket v5\.channel\.k8s\.io$/ }, 'attach went over WebSocket');

  const dir = mkdtempSync(join(tmpdir(), 'kl-cp-'));
  writeFileSync(join(dir, 'up.txt'), 'copied in\n');
  await ok(['-n', ns, 'cp', join(dir, 'up.txt'), 'shell:/tmp/up.txt']);
  t.equal(await ok(['-n', ns, 'exec', 'shell', '--', 'cat', '/tmp/up.txt']), 'copied in\n', 'cp into the pod');
  await ok(['-n', ns, 'cp', 'shell:/tmp/up.txt', join(dir, 'down.txt')]);
  t.equal(readFileSync(join(dir, 'down.txt'), 'utf8'), 'copied in\n', 'cp out of the pod');
});

t.test('port-forward over WebSocket reaches the pod', async (t) => {
  const child = spawn(ensureBinaries().kubectl, ['--kubeconfig', kc, '-n', ns, 'port-forward', 'pod/web', ':8080']);
  t.teardown(() => child.kill());
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const port = await eventually('the forwarded port', () => /127\.0\.0\.1:(\d+) ->/.exec(out)?.[1], 60_000, 100);
  const body = await new Promise<string>((resolve, reject) => {
    request({ host: '127.0.0.1', port: Number(port), path: '/' }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve(text));
    })
      .on('error', reject)
      .end();
  });
  t.equal(body, 'kiteline busybox\n', 'the page of httpd in the pod');
  child.kill();
  const forward = await eventually('the port-forward audit line', () => sessionAudits('pods/portforward', 'web')[0]);
  t.match(forward, { status: 101, protocol: /^websocket / }, 'port-forward went over WebSocket');
});

t.test('kubectl debug adds an ephemeral container (pods/ephemeralcontainers)', async (t) => {
  await ok([
    '-n',
    ns,
    'debug',
    'shell',
    `--image=${BUSYBOX}`,
    '--image-pull-policy=Never',
    '--container=debugger',
    '--',
    'sh',
    '-c',
    'echo debugging && sleep 3600',
  ]);
  const logs = await eventually(
    'the ephemeral container runs',
    async () => {
      const res = await k(['-n', ns, 'logs', 'shell', '-c', 'debugger']);
      return res.status === 0 && res.stdout.includes('debugging') ? res.stdout : undefined;
    },
    60_000,
    500,
  );
  t.equal(logs, 'debugging\n');
  const spec = JSON.parse(await ok(['-n', ns, 'get', 'pod', 'shell', '-o', 'json'])) as {
    spec: { ephemeralContainers?: { name: string }[] };
  };
  t.same(
    spec.spec.ephemeralContainers?.map((c) => c.name),
    ['debugger'],
    'the pod has the ephemeral container',
  );
});

t.test('in-place resize through the pods/resize subresource', async (t) => {
  const patch = JSON.stringify({
    spec: { containers: [{ name: 'web', resources: { requests: { cpu: '20m' }, limits: { cpu: '200m' } } }] },
  });
  await ok(['-n', ns, 'patch', 'pod', 'web', '--subresource', 'resize', '--patch', patch]);
  const resized = JSON.parse(await ok(['-n', ns, 'get', 'pod', 'web', '-o', 'json'])) as {
    spec: { containers: { resources: { limits: { cpu: string } } }[] };
  };
  t.equal(resized.spec.containers[0].resources.limits.cpu, '200m', 'the new limit is in the spec');
});

t.test('server-side apply: a second manager conflicts, --force-conflicts takes over', async (t) => {
  const cm = (value: string) =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ssa', namespace: ns },
      data: { k: value },
    });
  await ok(['apply', '--server-side', '--field-manager=alice', '-f', '-'], cm('one'));
  const conflict = await k(['apply', '--server-side', '--field-manager=bob', '-f', '-'], cm('two'));
  t.not(conflict.status, 0, 'a conflicting apply fails');
  t.match(conflict.stderr, /conflict/i, 'with the conflict named');
  await ok(['apply', '--server-side', '--field-manager=bob', '--force-conflicts', '-f', '-'], cm('two'));
  const got = JSON.parse(await ok(['-n', ns, 'get', 'configmap', 'ssa', '-o', 'json', '--show-managed-fields'])) as {
    data: { k: string };
    metadata: { managedFields: { manager: string; operation: string }[] };
  };
  t.equal(got.data.k, 'two');
  t.ok(
    got.metadata.managedFields.some((f) => f.manager === 'bob' && f.operation === 'Apply'),
    'bob manages the field now',
  );
});

t.test('get -w, events, wait and rollout', async (t) => {
  const watch = spawn(ensureBinaries().kubectl, [
    '--kubeconfig',
    kc,
    '-n',
    ns,
    'get',
    'configmaps',
    '-w',
    '-o',
    'name',
  ]);
  t.teardown(() => watch.kill());
  let watched = '';
  watch.stdout.on('data', (c: Buffer) => (watched += c.toString()));
  await eventually('the watch to list', () => watched.includes('configmap/ssa'), 30_000, 100);
  await ok(['-n', ns, 'create', 'configmap', 'seen-by-watch']);
  await eventually('the watch to see a new object', () => watched.includes('configmap/seen-by-watch'), 30_000, 100);
  watch.kill();

  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'roll' },
    spec: {
      selector: { matchLabels: { app: 'roll' } },
      template: { metadata: { labels: { app: 'roll' } }, spec: pod('roll', ['sleep', '3600']).spec },
    },
  };
  await ok(['-n', ns, 'apply', '-f', '-'], JSON.stringify(deployment));
  await ok(['-n', ns, 'rollout', 'status', 'deployment/roll', '--timeout=120s']);
  await ok(['-n', ns, 'rollout', 'restart', 'deployment/roll']);
  await ok(['-n', ns, 'rollout', 'status', 'deployment/roll', '--timeout=120s']);
  t.match(await ok(['-n', ns, 'rollout', 'history', 'deployment/roll']), /^2\s/m, 'a second revision');
  await ok(['-n', ns, 'wait', '--for=condition=Available', 'deployment/roll', '--timeout=60s']);

  const events = await ok(['-n', ns, 'events', '--for', 'deployment/roll']);
  t.match(events, /ScalingReplicaSet/, 'kubectl events for the Deployment');
});

t.test('impersonation by the user is refused: auth can-i --as, get --as', async (t) => {
  // Without this refusal kiteline dropped the headers and answered as itself: "yes".
  const canI = await k(['auth', 'can-i', 'get', 'pods', '--as', 'system:admin']);
  t.not(canI.status, 0, 'kubectl auth can-i --as fails');
  t.match(canI.stderr, /impersonate-user is not allowed through kiteline: requests run as you \(admin\)/);
  t.notMatch(canI.stdout, /yes/, 'never "yes" about someone else');
  const get = await k(['-n', ns, 'get', 'pods', '--as', 'nobody', '--as-group', 'system:masters']);
  t.not(get.status, 0, 'kubectl get --as fails');
  t.match(get.stderr, /Forbidden|forbidden/);
  const exec = await k(['-n', ns, 'exec', 'shell', '--as', 'system:admin', '--', 'true']);
  t.not(exec.status, 0, 'kubectl exec --as fails');

  // The exec upgrade itself, with the header kubectl would send: refused before the cluster, audited.
  const config = parse(readFileSync(kc, 'utf8')) as {
    clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    users: { user: { token: string } }[];
  };
  const { server, 'certificate-authority-data': ca } = config.clusters[0].cluster;
  const url = `${server.replace(/^https/, 'wss')}/api/v1/namespaces/${ns}/pods/shell/exec?command=true&stdout=true`;
  const status = await new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(url, ['v5.channel.k8s.io'], {
      ca: Buffer.from(ca, 'base64'),
      headers: { authorization: `Bearer ${config.users[0].user.token}`, 'impersonate-user': 'system:admin' },
    });
    socket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.on('open', () => reject(new Error('the exec opened')));
    socket.on('error', () => undefined);
  });
  t.equal(status, 403, 'an exec upgrade with Impersonate-User: 403');
  const audit = await eventually('the refused exec audit line', () =>
    sessionAudits('pods/exec', 'shell').find((a) => a.status === 403),
  );
  t.match(audit, { who: 'admin', result: 'failure' }, 'the refusal is audited');
});

t.test('roles hold on the newer subresources: ephemeralcontainers and resize are their own', async (t) => {
  // Every verb on pods in the namespace, but not their subresources.
  const role = await call(gw.url, 'POST', '/api/v1/admin/roles/', {
    headers: admin.headers,
    body: { name: 'pods-only', clusters: ['a'], namespaces: [ns], resources: ['pods'], verbs: ['*'] },
  });
  t.equal(role.status, 201);
  const user = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers: admin.headers,
    body: { username: 'podder', password: 'podder-password-1', name: 'Podder' },
  });
  t.equal(user.status, 201);
  await eventually(
    'the role assignment',
    async () =>
      (
        await call(gw.url, 'POST', `/api/v1/admin/roles/${role.body.role.id}/assign`, {
          headers: admin.headers,
          body: { subjectType: 'user', subject: 'podder' },
        })
      ).status < 300,
  );
  const limited = await kubeconfigFile(await login(gw.url, 'podder', 'podder-password-1'), 'podder');
  t.equal((await k(['-n', ns, 'get', 'pod', 'shell'], undefined, limited)).status, 0, 'reads pods');

  const debug = await k(
    ['-n', ns, 'debug', 'web', `--image=${BUSYBOX}`, '--image-pull-policy=Never', '--', 'true'],
    undefined,
    limited,
  );
  t.not(debug.status, 0, 'kubectl debug is refused');
  t.match(debug.stderr, /forbidden/i);
  const patch = JSON.stringify({ spec: { containers: [{ name: 'web', resources: { limits: { cpu: '300m' } } }] } });
  const resize = await k(
    ['-n', ns, 'patch', 'pod', 'web', '--subresource', 'resize', '--patch', patch],
    undefined,
    limited,
  );
  t.not(resize.status, 0, 'resize is refused');
  t.match(resize.stderr, /forbidden/i);
  for (const [what, args] of [
    ['exec', ['-n', ns, 'exec', 'shell', '--', 'true']],
    ['exec over SPDY', ['-n', ns, 'exec', 'shell', '--', 'true']],
    ['attach', ['-n', ns, 'attach', 'echoer']],
  ] as const) {
    const env: Env = what === 'exec over SPDY' ? { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' } : {};
    const res = await k([...args], undefined, limited, env);
    t.not(res.status, 0, `${what} is refused`);
    t.match(res.stderr, /forbidden/i, `${what}: Forbidden`);
  }
  const pf = await k(['-n', ns, 'port-forward', 'pod/web', ':8080', '--pod-running-timeout=5s'], undefined, limited);
  t.not(pf.status, 0, 'port-forward is refused');

  const spec = JSON.parse(await ok(['-n', ns, 'get', 'pod', 'web', '-o', 'json'])) as {
    spec: { ephemeralContainers?: unknown[]; containers: { resources: { limits: { cpu: string } } }[] };
  };
  t.equal(spec.spec.ephemeralContainers, undefined, 'no ephemeral container was added');
  t.equal(spec.spec.containers[0].resources.limits.cpu, '200m', 'the limit is unchanged');
});

t.test('the host guard holds for the current kubectl: kiteline-system is not reachable', async (t) => {
  await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });
  const withHost = await kubeconfigFile(await login(gw.url, 'admin', 'correct-horse-battery'), 'current-host');
  for (const args of [
    ['-n', gw.namespace, 'get', 'secrets'],
    ['-n', gw.namespace, 'debug', 'x', `--image=${BUSYBOX}`, '--', 'true'],
    ['-n', gw.namespace, 'events'],
  ]) {
    const res = await k(['--context', 'h', ...args], undefined, withHost);
    t.not(res.status, 0, `kubectl ${args.slice(2).join(' ')} in the install namespace`);
    t.match(res.stderr, /forbidden/i);
  }
});
