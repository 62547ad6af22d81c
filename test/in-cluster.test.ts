// kiteline run as its users run it: its image (`make image`, scripts/build-image.sh) imported into
// the shared host plane's node, `kubectl apply -k` of an overlay of deploy/ that only sets that
// image, two replicas under deploy/'s service account and RBAC, used through `kubectl
// port-forward svc/kiteline`; then, under a load loop through the Service, the leader pod deleted,
// a rolling restart and a SIGKILLed replica. The figures it prints are in docs/reliability.md.
//
// One install, in deploy/'s own namespace: its ClusterRole and bindings have fixed names. The CRDs
// deploy/ applies are shared with every other test file's gateways, so the clean-up deletes
// everything the overlay applied except them (a plain `kubectl delete -k` would remove them).
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import t, { type Test } from 'tap';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { PACKAGE_ROOT } from '../src/config.js';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { imageCacheDir } from '../src/controlplane/images.js';
import { networkFor } from '../src/controlplane/network.js';
import { importIntoNode, killContainer } from '../src/controlplane/node.js';
import { LEADER_LEASE_NAME } from '../src/host/lease.js';
import {
  kubectl,
  kubectlInBackground,
  kubectlPortForward,
  testControlPlane,
  TEST_DIR,
  uniqueName,
} from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { call } from './helpers/gateway.js';
import type { LoadSample } from './helpers/service-load.js';
import { APP_JS, SCRIPT, standInUi } from './helpers/stand-in-ui.js';

/** deploy/'s namespace, and what its Deployment's pods are labelled with. */
const NS = 'kiteline-system';
const SELECTOR = 'app.kubernetes.io/name=kiteline';
/** deploy/'s two bindings of the service account. */
const SHIPPED_BINDINGS = ['kiteline-crd-reader', 'kiteline-host-store'];
/** The leader lease's duration (src/host/lease.ts). */
const LEASE_DURATION_MS = 15_000;
const LOAD_WORKERS = 4;

t.setTimeout(1_200_000);
const host = await testControlPlane('host');
const targetA = await testControlPlane('target-a');
const kc = host.kubeconfigPath;

/** kubectl on the host plane; fails the test with kubectl's stderr when it fails. */
function k(args: string[], input?: string): string {
  const res = kubectl(kc, args, input);
  if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr || res.stdout}`);
  return res.stdout;
}

/** The image `make image` builds, built now unless its inputs are unchanged since the last build. */
function kitelineImage(): { ref: string; archive: string } {
  const dir = imageCacheDir();
  const built = spawnSync('bash', [join(PACKAGE_ROOT, 'scripts', 'build-image.sh'), dir], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (built.status !== 0) throw new Error(`scripts/build-image.sh failed (exit ${built.status})`);
  return { ref: readFileSync(join(dir, 'kiteline.ref'), 'utf8').trim(), archive: join(dir, 'kiteline.tar') };
}

/**
 * An overlay of deploy/ whose only change is the image, as a user with a registry writes one; with
 * `uiRef`, deploy/optional/ui's component too and that image for it (docs/ui.md).
 */
function writeOverlay(ref: string, uiRef?: string): string {
  const dir = join(TEST_DIR, 'in-cluster', uiRef ? 'overlay-ui' : 'overlay');
  mkdirSync(dir, { recursive: true });
  const image = (name: string, reference: string) => {
    const at = reference.lastIndexOf(':');
    return { name, newName: reference.slice(0, at), newTag: reference.slice(at + 1) };
  };
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: [relative(dir, join(PACKAGE_ROOT, 'deploy'))],
    ...(uiRef ? { components: [relative(dir, join(PACKAGE_ROOT, 'deploy', 'optional', 'ui'))] } : {}),
    images: [image('kiteline', ref), ...(uiRef ? [image('kiteline-ui', uiRef)] : [])],
  };
  writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
  return dir;
}

const optionalBinding = join(PACKAGE_ROOT, 'deploy', 'optional', 'in-cluster-admin.yaml');

/** Deletes what the overlay and the optional binding applied, except the shared CRDs. */
function uninstall(overlay: string): void {
  const docs = parseAllDocuments(k(['kustomize', overlay])).map((d) => d.toJS() as { kind: string });
  const owned = docs.filter((d) => d.kind !== 'CustomResourceDefinition').map((d) => stringify(d));
  k(['delete', '--ignore-not-found', '--wait=false', '-f', '-'], owned.join('---\n'));
  k(['delete', '--ignore-not-found', '-f', optionalBinding]);
}

interface Pod {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { serviceAccountName: string; containers: { image: string }[] };
  status: {
    conditions?: { type: string; status: string }[];
    containerStatuses?: { containerID?: string; restartCount: number; ready: boolean }[];
  };
}

function kitelinePods(): Pod[] {
  return (JSON.parse(k(['-n', NS, 'get', 'pods', '-l', SELECTOR, '-o', 'json'])) as { items: Pod[] }).items;
}

const isReady = (pod: Pod) => pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/** The pod that holds the leader lease (its identity is `<pod name>_<random suffix>`), or ''. */
function leaderPod(): string {
  const res = kubectl(kc, ['-n', NS, 'get', 'lease', LEADER_LEASE_NAME, '-o', 'jsonpath={.spec.holderIdentity}']);
  return res.status === 0 ? res.stdout.trim().replace(/_[^_]*$/, '') : '';
}

async function rolledOut(): Promise<void> {
  const res = await kubectlInBackground(kc, ['-n', NS, 'rollout', 'status', 'deploy/kiteline', '--timeout=300s']);
  if (res.status !== 0) throw new Error(`rollout: ${res.stderr}`);
}

/** `kubectl port-forward` to a Service or pod port of the install; the base URL of its local end. */
const portForward = (t: Test, target: string, remotePort: number) => kubectlPortForward(t, kc, NS, target, remotePort);

/**
 * target-a's kubeconfig with an address a pod on the host's node reaches: target-a's API server
 * listens on every address of this machine, so on the host node's link too; its certificate is
 * checked against its DNS name `kubernetes` instead of that address.
 */
function kubeconfigForPods(): string {
  const config = parse(readFileSync(targetA.kubeconfigPath, 'utf8')) as {
    clusters: { cluster: Record<string, string> }[];
  };
  const cluster = config.clusters[0].cluster;
  cluster.server = `https://${networkFor(host.node!.slot).hostAddress}:${new URL(targetA.server).port}`;
  cluster['tls-server-name'] = 'kubernetes';
  return stringify(config);
}

const image = kitelineImage();
const overlay = writeOverlay(image.ref);
// What an interrupted run left, then the namespace gone (a new install cannot go into one that terminates).
uninstall(overlay);
await eventually(
  'no kiteline-system namespace',
  () => kubectl(kc, ['get', 'namespace', NS]).status !== 0,
  180_000,
  500,
);
importIntoNode(host.dir, [image]);
t.teardown(() => uninstall(overlay));
/** A namespace of this file on both clusters, for the resource routes and the load loop. */
const ns = uniqueName('in-cluster');
for (const plane of [host, targetA]) {
  t.equal(kubectl(plane.kubeconfigPath, ['create', 'namespace', ns]).status, 0, `namespace ${ns} on ${plane.name}`);
  t.teardown(() => kubectl(plane.kubeconfigPath, ['delete', 'namespace', ns, '--wait=false']));
}

t.test('kubectl apply -k of an overlay that sets only the image: two replicas Ready, as shipped', async (t) => {
  const applied = kubectl(kc, ['apply', '-k', overlay]);
  t.equal(applied.status, 0, `kubectl apply -k: ${applied.stderr}`);
  const started = Date.now();
  await rolledOut();
  t.comment(`rollout of 2 replicas: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const pods = kitelinePods();
  t.equal(pods.length, 2, 'two replicas');
  for (const pod of pods) {
    t.ok(isReady(pod), `${pod.metadata.name} Ready through /readyz`);
    t.equal(pod.spec.serviceAccountName, 'kiteline');
    t.equal(pod.spec.containers[0].image, image.ref, 'the image make image built');
  }
  const pod = pods[0].metadata.name;
  t.equal(k(['-n', NS, 'exec', pod, '--', 'id', '-u']).trim(), '10001', 'runs as the non-root user 10001');
  t.not(
    kubectl(kc, ['-n', NS, 'exec', pod, '--', 'touch', '/app/written']).status,
    0,
    'the root filesystem is read-only',
  );
  t.equal(
    k(['-n', NS, 'exec', pod, '--', 'ls', '/app/node_modules/.bin']).split('\n').includes('tsc'),
    false,
    'production dependencies only',
  );

  // Exactly deploy/'s RBAC: no binding of the service account but its own two.
  const bindings = JSON.parse(k(['get', 'rolebindings,clusterrolebindings', '--all-namespaces', '-o', 'json'])) as {
    items: { metadata: { name: string }; subjects?: { kind: string; name: string; namespace?: string }[] }[];
  };
  const ofServiceAccount = bindings.items.filter((b) =>
    b.subjects?.some((s) => s.kind === 'ServiceAccount' && s.name === 'kiteline' && s.namespace === NS),
  );
  t.same(ofServiceAccount.map((b) => b.metadata.name).sort(), SHIPPED_BINDINGS);
});

/** An admin API key, made through the port-forward; the load loop uses it. */
let apiKey = '';

t.test('through kubectl port-forward svc/kiteline: bootstrap, imports, resource routes on both clusters', async (t) => {
  k(['apply', '-f', optionalBinding]);
  const gw = await portForward(t, 'svc/kiteline', 80);
  const su = await call(gw, 'POST', '/api/v1/admin/users/create_super_user', {
    body: { username: 'admin', password: 'correct-horse-1', name: 'Admin' },
  });
  t.equal(su.status, 201, su.text);
  const cookie = (su.headers.get('set-cookie') ?? '').split(';')[0];
  t.match(cookie, /^auth_token=/, 'create_super_user signs the admin in');
  const asAdmin = { cookie };

  const imported = await call(gw, 'POST', '/api/v1/admin/clusters/import', {
    headers: asAdmin,
    body: { inCluster: true },
  });
  t.equal(imported.status, 201, imported.text);
  t.same(imported.body.clusters, ['in-cluster']);
  const created = await call(gw, 'POST', '/api/v1/admin/clusters/', {
    headers: asAdmin,
    body: { name: 'target-a', config: kubeconfigForPods() },
  });
  t.equal(created.status, 201, `the second control plane, by kubeconfig: ${created.text}`);
  const key = await call(gw, 'POST', '/api/v1/admin/apikeys/', {
    headers: asAdmin,
    body: { name: 'load', roles: ['admin'] },
  });
  t.equal(key.status, 201, 'an admin API key');
  apiKey = key.body.key;

  const auth = { authorization: apiKey };
  const clusters = await eventually(
    'both clusters ready',
    async () => {
      const res = await call(gw, 'GET', '/api/v1/clusters', { headers: auth });
      return res.body?.length === 2 && res.body.every((c: { ready: boolean }) => c.ready) ? res.body : undefined;
    },
    60_000,
    250,
  );
  t.same(
    clusters.map((c: { name: string }) => c.name),
    ['in-cluster', 'target-a'],
  );

  for (const cluster of ['in-cluster', 'target-a']) {
    const headers = { ...auth, 'x-cluster-name': cluster };
    const made = await call(gw, 'POST', `/api/v1/configmaps/${ns}`, {
      headers,
      body: { metadata: { name: 'hello' }, data: { cluster } },
    });
    t.equal(made.status, 201, `${cluster}: create ${made.text}`);
    const read = await call(gw, 'GET', `/api/v1/configmaps/${ns}/hello`, { headers });
    t.same(read.body.data, { cluster }, `${cluster}: get`);
    const pods = await call(gw, 'GET', '/api/v1/pods', { headers });
    t.equal(pods.status, 200, `${cluster}: list pods in every namespace`);
    t.equal(
      (await call(gw, 'DELETE', `/api/v1/configmaps/${ns}/hello`, { headers })).status,
      200,
      `${cluster}: delete`,
    );
  }
  const ownSecrets = await call(gw, 'GET', `/api/v1/secrets/${NS}`, {
    headers: { ...auth, 'x-cluster-name': 'in-cluster' },
  });
  t.equal(
    ownSecrets.status,
    403,
    'the host is recognized (kube-system UID readable with the shipped RBAC): its install namespace is refused',
  );
});

/** The load loop, in a pod of kiteline's image next to it, through the Service's cluster IP. */
interface Load {
  samples: LoadSample[];
  stop(): void;
}

async function startLoad(t: Test): Promise<Load> {
  const loader = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'loader', namespace: ns },
    spec: {
      terminationGracePeriodSeconds: 1,
      securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'loader',
          image: image.ref,
          imagePullPolicy: 'Never',
          command: ['sleep', 'infinity'],
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  };
  k(['apply', '-f', '-'], JSON.stringify(loader));
  k(['-n', ns, 'wait', '--for=condition=Ready', 'pod/loader', '--timeout=120s']);
  const serviceIp = k(['-n', NS, 'get', 'service', 'kiteline', '-o', 'jsonpath={.spec.clusterIP}']).trim();
  const script = readFileSync(join(PACKAGE_ROOT, 'dist', 'test', 'helpers', 'service-load.js'), 'utf8');
  const args = [
    '--kubeconfig',
    kc,
    '-n',
    ns,
    'exec',
    '-i',
    'loader',
    '--',
    'node',
    '--input-type=module',
    '-e',
    script,
    `http://${serviceIp}`,
    apiKey,
    'target-a',
    ns,
    String(LOAD_WORKERS),
  ];
  const child: ChildProcessWithoutNullStreams = spawn(ensureBinaries().kubectl, args);
  const samples: LoadSample[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => samples.push(JSON.parse(line) as LoadSample));
  const stop = () => child.stdin.end();
  t.teardown(stop);
  await eventually('the load loop answers', () => samples.length > 20, 60_000, 100);
  return { samples, stop };
}

const failed = (s: LoadSample) => s.status < 200 || s.status >= 300;

/** Samples of requests started from `from` on, failed ones and a short account of them. */
function window(load: Load, from: number): { total: number; failures: LoadSample[]; account: string } {
  const within = load.samples.filter((s) => s.t >= from);
  const failures = within.filter(failed);
  const kinds = failures.map((f) => `${f.kind} ${f.status}${f.error ? ` (${f.error.slice(0, 160)})` : ''}`);
  return {
    total: within.length,
    failures,
    account: `${within.length} requests, ${failures.length} failed${kinds.length ? `: ${kinds.join(', ')}` : ''}`,
  };
}

/** A Cluster applied with kubectl (Secret + CR), whose status only the leader writes. */
function applyDeclaredCluster(name: string): void {
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${name}-kubeconfig`, namespace: NS },
    stringData: { kubeconfig: kubeconfigForPods() },
  };
  const cluster = {
    apiVersion: 'kiteline.io/v1alpha1',
    kind: 'Cluster',
    metadata: { name, namespace: NS },
    spec: { name, kubeconfigSecretRef: { name: `${name}-kubeconfig`, key: 'kubeconfig' } },
  };
  k(['apply', '-f', '-'], [secret, cluster].map((d) => stringify(d)).join('---\n'));
}

function clusterStatusReady(name: string): boolean {
  const res = kubectl(kc, ['-n', NS, 'get', 'clusters.kiteline.io', name, '-o', 'jsonpath={.status.ready}']);
  return res.stdout.trim() === 'true';
}

/**
 * Follows the log of every kiteline container that starts (`kubectl logs -f`) into the test's logs
 * directory, so that a replica's lines outlive its pod; `warnings(from)` are the warn and error
 * lines written since then, each with its pod, for a failed assertion to show.
 */
function followPodLogs(t: Test): { warnings(from: number): string[] } {
  mkdirSync(join(TEST_DIR, 'logs'), { recursive: true });
  const files = new Map<string, string>();
  const followers: Array<{ kill(): void }> = [];
  const look = () => {
    for (const pod of kitelinePods()) {
      const id = pod.status.containerStatuses?.[0]?.containerID;
      if (!id || files.has(id)) continue;
      const file = join(TEST_DIR, 'logs', `in-cluster-${pod.metadata.name}-${id.slice(-8)}.log`);
      files.set(id, file);
      const out = openSync(file, 'a');
      const args = ['--kubeconfig', kc, '-n', NS, 'logs', '-f', `pod/${pod.metadata.name}`];
      followers.push(spawn(ensureBinaries().kubectl, args, { stdio: ['ignore', out, out] }));
      closeSync(out);
    }
  };
  look();
  const timer = setInterval(look, 1000);
  t.teardown(() => {
    clearInterval(timer);
    for (const follower of followers) follower.kill();
  });
  return {
    warnings(from) {
      const lines: string[] = [];
      for (const file of files.values()) {
        if (!existsSync(file)) continue;
        for (const line of readFileSync(file, 'utf8').split('\n')) {
          const entry = (() => {
            try {
              return JSON.parse(line) as { level?: number; time?: string; msg?: string };
            } catch {
              return undefined;
            }
          })();
          if (!entry || (entry.level ?? 0) < 40 || Date.parse(entry.time ?? '') < from) continue;
          lines.push(`${file.replace(/.*in-cluster-/, '')}: ${line.slice(0, 400)}`);
        }
      }
      return lines.slice(-40);
    },
  };
}

t.test('under load through the Service: leader deleted, rolling restart, a replica SIGKILLed', async (t) => {
  const load = await startLoad(t);
  const logs = followPodLogs(t);

  await t.test('the leader pod deleted: the other replica takes the lease and writes Cluster status', async (t) => {
    const leader = leaderPod();
    t.ok(
      kitelinePods().some((p) => p.metadata.name === leader),
      `the leader is a pod: ${leader}`,
    );
    const from = Date.now();
    k(['-n', NS, 'delete', 'pod', leader, '--wait=false']);
    const successor = await eventually(
      'another holder',
      () => {
        const h = leaderPod();
        return h && h !== leader ? h : undefined;
      },
      LEASE_DURATION_MS * 2,
      200,
    );
    const takeoverMs = Date.now() - from;
    t.ok(
      takeoverMs <= LEASE_DURATION_MS,
      `lease taken over ${takeoverMs} ms after the delete (lease duration ${LEASE_DURATION_MS} ms)`,
    );
    const applied = Date.now();
    applyDeclaredCluster('declared-after-failover');
    await eventually(
      'status written by the new leader',
      () => clusterStatusReady('declared-after-failover'),
      LEASE_DURATION_MS,
      200,
    );
    const statusMs = Date.now() - applied;
    t.equal(leaderPod(), successor, 'still the successor');
    await rolledOut();
    await new Promise((r) => setTimeout(r, 3000));
    const result = window(load, from);
    t.comment(
      `leader deleted: takeover ${takeoverMs} ms, ` +
        `first status write ${statusMs} ms after a new Cluster; ${result.account}`,
    );
    t.equal(result.failures.length, 0, 'no failed request', { failures: result.failures, logs: logs.warnings(from) });
  });

  await t.test('kubectl rollout restart: the draining replicas fail no request', async (t) => {
    const from = Date.now();
    k(['-n', NS, 'rollout', 'restart', 'deploy/kiteline']);
    await rolledOut();
    // The old pods are gone only after their drain.
    await eventually(
      'old pods gone',
      () => kitelinePods().every((p) => !p.metadata.deletionTimestamp) || undefined,
      120_000,
      500,
    );
    const result = window(load, from);
    t.comment(`rollout restart: ${((Date.now() - from) / 1000).toFixed(1)} s, ${result.account}`);
    t.equal(result.failures.length, 0, 'no failed request', { failures: result.failures, logs: logs.warnings(from) });
  });

  await t.test('a replica SIGKILLed: its replacement serves', async (t) => {
    const victim = leaderPod();
    const pod = kitelinePods().find((p) => p.metadata.name === victim)!;
    const container = pod.status.containerStatuses![0];
    const from = Date.now();
    killContainer(host.dir, container.containerID!.replace(/^containerd:\/\//, ''));
    const successor = await eventually(
      'another holder',
      () => {
        const h = leaderPod();
        return h && h !== victim ? h : undefined;
      },
      LEASE_DURATION_MS * 3,
      200,
    );
    const takeoverMs = Date.now() - from;
    const restarted = await eventually(
      'the killed replica restarted and Ready',
      () => {
        const now = kitelinePods().find((p) => p.metadata.name === victim);
        return now && isReady(now) && now.status.containerStatuses![0].restartCount > container.restartCount
          ? now
          : undefined;
      },
      120_000,
      500,
    );
    const readyMs = Date.now() - from;
    t.ok(restarted, 'the kubelet restarted the container');
    const direct = await portForward(t, `pod/${victim}`, 8080);
    const res = await call(direct, 'GET', '/api/v1/clusters', { headers: { authorization: apiKey } });
    t.equal(res.status, 200, 'the replacement serves');
    await new Promise((r) => setTimeout(r, 3000));
    const result = window(load, from);
    t.comment(
      `SIGKILL: lease to ${successor} after ${takeoverMs} ms, replacement Ready after ${readyMs} ms; ${result.account}`,
    );
    // Never answered: the killed process's own requests (status 0), and a write the survivor had
    // handed to it as the cluster's holder when it died (docs/fleet.md: reads are sent again).
    const inFlight = (f: LoadSample) =>
      f.status === 0 || (f.status === 502 && f.kind === 'write' && /went away during the request/.test(f.error ?? ''));
    t.ok(result.failures.every(inFlight), 'failures are only requests the killed process never answered', {
      failures: result.failures.filter((f) => !inFlight(f)),
      logs: logs.warnings(from),
    });
    const afterReady = window(load, from + readyMs).failures;
    t.equal(afterReady.length, 0, 'no failure once the replacement is Ready', { failures: afterReady });
  });

  load.stop();
  const all = window(load, 0);
  t.comment(`whole load loop: ${all.total} requests, ${all.failures.length} failed`);
});

t.test("deploy/optional/ui: the UI copied from its image, served at the Service's root", async (t) => {
  const ui = standInUi();
  t.teardown(() => rmSync(ui, { recursive: true, force: true }));
  const out = join(TEST_DIR, 'in-cluster', 'ui-image');
  const packed = spawnSync('bash', [join(PACKAGE_ROOT, 'scripts', 'build-ui-image.sh'), ui, out], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  t.equal(packed.status, 0, 'scripts/build-ui-image.sh (make ui-image)');
  const uiImage = {
    ref: readFileSync(join(out, 'kiteline-ui.ref'), 'utf8').trim(),
    archive: join(out, 'kiteline-ui.tar'),
  };
  importIntoNode(host.dir, [uiImage]);
  const applied = kubectl(kc, ['apply', '-k', writeOverlay(image.ref, uiImage.ref)]);
  t.equal(applied.status, 0, `kubectl apply -k with the component: ${applied.stderr}`);
  await rolledOut();
  const gw = await portForward(t, 'svc/kiteline', 80);
  const page = await call(gw, 'GET', '/pods/default/web');
  t.equal(page.status, 200);
  t.match(page.text, 'stand-in Kite', 'the page from the image');
  t.match(page.text, `src="${SCRIPT}"`, 'its placeholder filled');
  t.equal((await call(gw, 'GET', SCRIPT)).text, APP_JS, 'its assets');
  t.match((await call(gw, 'GET', '/api/v1/init_check')).body, { initialized: true }, 'and the API beside it');
  const pod = kitelinePods().find((p) => !p.metadata.deletionTimestamp && isReady(p))!.metadata.name;
  t.not(
    kubectl(kc, ['-n', NS, 'exec', pod, '-c', 'kiteline', '--', 'touch', '/srv/ui/written']).status,
    0,
    'kiteline mounts the UI read-only',
  );
});
