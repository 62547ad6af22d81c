// The embedded control plane with a node, driven through the CLI exactly as `make run` and the
// suite use it: start, CRDs applied with kubectl, one object of each kind, controllers working,
// restart keeps data and runs the pods again, stop (also after a crash) leaves nothing behind.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../src/config.js';
import { kubernetesVersions } from '../src/controlplane/binaries.js';
import { readState } from '../src/controlplane/controlplane.js';
import { isAlive } from '../src/controlplane/processes.js';
import { kitelineCli, kubectl } from './helpers/clusters.js';

const dir = mkdtempSync(join(tmpdir(), 'kiteline-cp-'));
const kubeconfig = join(dir, 'kubeconfig');
t.teardown(() => {
  kitelineCli(['controlplane', 'stop', '--dir', dir]);
  if (!process.env.KEEP_TEST_DIRS) rmSync(dir, { recursive: true, force: true });
});

/** Pids of live processes whose command line mentions text (e.g. the control plane's directory). */
function processesUsing(text: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return (
          readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(text) &&
          !/\) Z /.test(readFileSync(`/proc/${p}/stat`, 'utf8'))
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The command line of the test's sleeper pod: unique, so its process can be looked for. */
const SLEEPER = ['sleep', String(86_000 + Math.floor(Math.random() * 399))];

/** Everything of the node still on the machine, described; [] when stop cleaned up. */
function leftovers(slot: number): string[] {
  const found: string[] = [];
  for (const pid of processesUsing(dir)) found.push(`process ${pid}: ${readFileSync(`/proc/${pid}/cmdline`, 'utf8')}`);
  for (const pid of processesUsing(SLEEPER.join('\0'))) found.push(`the sleeper pod's process ${pid}`);
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n'))
    if (line.includes(dir)) found.push(`mount ${line}`);
  if (existsSync(`/run/netns/kl-${slot}`)) found.push(`network namespace kl-${slot}`);
  const links = spawnSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' }).stdout;
  for (const line of links.split('\n')) if (line.includes(`kl-${slot}-`)) found.push(`link ${line}`);
  // The node's chains live in its namespace; none may appear in the host's tables.
  const rules = spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout;
  for (const line of rules.split('\n')) if (/KUBE-|CNI-/.test(line)) found.push(`iptables ${line}`);
  for (const hierarchy of readdirSync('/sys/fs/cgroup'))
    if (existsSync(`/sys/fs/cgroup/${hierarchy}/kl-${slot}`)) found.push(`cgroup ${hierarchy}/kl-${slot}`);
  return found;
}

const objects = `
apiVersion: kiteline.io/v1alpha1
kind: Role
metadata: {name: ops, namespace: default}
spec: {name: ops, clusters: ["*"], namespaces: ["*"], resources: ["*"], verbs: [get, list]}
---
apiVersion: kiteline.io/v1alpha1
kind: User
metadata: {name: alice, namespace: default, labels: {kiteline.io/id: "7"}}
spec: {username: alice, name: Alice, roles: [ops], passwordSecretRef: {name: alice-password}}
---
apiVersion: kiteline.io/v1alpha1
kind: Cluster
metadata: {name: prod, namespace: default}
spec: {description: production, kubeconfigSecretRef: {name: prod-kubeconfig}}
---
apiVersion: kiteline.io/v1alpha1
kind: APIKey
metadata: {name: ci, namespace: default}
spec: {name: ci, roles: [ops], secretRef: {name: ci-key}}
`;

t.test('start through the CLI writes a kubeconfig with the real CA', async (t) => {
  const res = kitelineCli(['controlplane', 'start', '--dir', dir, '--name', 'cp-test', '--node']);
  t.equal(res.status, 0, res.stderr);
  const { current } = kubernetesVersions();
  t.match(
    res.stdout,
    new RegExp(`control plane "cp-test" \\(Kubernetes ${current}\\) ready at https://127\\.0\\.0\\.1:\\d+`),
  );
  t.match(res.stdout, /node "cp-test-node" Ready/);
  const config = parse(readFileSync(kubeconfig, 'utf8'));
  const cluster = config.clusters[0].cluster;
  t.ok(cluster['certificate-authority-data'], 'CA is inlined');
  t.notOk(cluster['insecure-skip-tls-verify'], 'TLS is verified');
  const version = kubectl(kubeconfig, ['version', '-o', 'json']);
  t.equal(version.status, 0, version.stderr);
  const versions = JSON.parse(version.stdout) as {
    serverVersion: { gitVersion: string };
    clientVersion: { gitVersion: string };
  };
  t.equal(versions.serverVersion.gitVersion, current, 'kubectl version: the server is the current release');
  t.equal(versions.clientVersion.gitVersion, current, 'and so is kubectl');
  t.equal(readState(dir)?.version, current, 'state.json names the release');
  const nodes = JSON.parse(kubectl(kubeconfig, ['get', 'nodes', '-o', 'json']).stdout) as {
    items: { status: { nodeInfo: { kubeletVersion: string } } }[];
  };
  t.equal(nodes.items[0].status.nodeInfo.kubeletVersion, current, 'the kubelet too');
  const wrong = kitelineCli(['controlplane', 'start', '--dir', dir, '--kubernetes-version', '1.35']);
  t.equal(wrong.status, 2, 'a malformed --kubernetes-version is refused');
  t.match(wrong.stderr, /--kubernetes-version takes a release such as v1\.35\.4/);
  const pids = readState(dir)?.pids;
  const nodePids = readState(dir)?.node?.pids;
  const again = kitelineCli(['controlplane', 'start', '--dir', dir]);
  t.equal(again.status, 0, 'starting a running control plane succeeds');
  t.same(readState(dir)?.pids, pids, 'and starts no new processes');
  t.same(readState(dir)?.node?.pids, nodePids, 'nor a new node');
});

t.test("the node's components each have their own identity, none the admin's", async (t) => {
  const admin = parse(readFileSync(kubeconfig, 'utf8')).users[0].user.token;
  for (const component of ['kubelet', 'kube-proxy', 'kube-scheduler']) {
    const config = parse(readFileSync(join(dir, 'node', `${component}.kubeconfig`), 'utf8'));
    t.notOk(config.users[0].user.token, `${component} has no token`);
    t.ok(config.users[0].user['client-certificate-data'], `${component} has a client certificate`);
    t.not(JSON.stringify(config).includes(admin), true, `${component} cannot use the admin token`);
  }
  // The Node authorizer lets the node's credential read only what concerns its own pods.
  const kubeletConfig = join(dir, 'node', 'kubelet.kubeconfig');
  const secrets = kubectl(kubeletConfig, ['get', 'secrets', '-n', 'kube-system']);
  t.not(secrets.status, 0, 'the kubelet may not list secrets');
  t.match(secrets.stderr, /forbidden/);
  t.equal(kubectl(kubeletConfig, ['get', 'node', 'cp-test-node']).status, 0, 'but may read its own Node');
});

t.test('kubectl apply -f crds/ works and one object of each kind reads back', async (t) => {
  const crds = kubectl(kubeconfig, ['apply', '-f', join(PACKAGE_ROOT, 'crds')]);
  t.equal(crds.status, 0, crds.stderr);
  t.equal(
    kubectl(kubeconfig, [
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd',
      '-l',
      'app.kubernetes.io/part-of=kiteline',
    ]).status,
    0,
  );
  const applied = kubectl(kubeconfig, ['apply', '-f', '-'], objects);
  t.equal(applied.status, 0, applied.stderr);
  for (const [kind, name] of [
    ['users.kiteline.io', 'alice'],
    ['clusters.kiteline.io', 'prod'],
    ['roles.kiteline.io', 'ops'],
    ['apikeys.kiteline.io', 'ci'],
  ]) {
    const got = kubectl(kubeconfig, ['get', kind, name, '-n', 'default', '-o', 'json']);
    t.equal(got.status, 0, `${kind} ${got.stderr}`);
    t.equal(JSON.parse(got.stdout).metadata.name, name);
  }
  const cluster = JSON.parse(kubectl(kubeconfig, ['get', 'kcl', 'prod', '-n', 'default', '-o', 'json']).stdout);
  t.equal(cluster.spec.enabled, true, 'schema defaults apply');
  t.equal(cluster.spec.kubeconfigSecretRef.key, 'kubeconfig');
  const table = kubectl(kubeconfig, ['get', 'clusters.kiteline.io', '-n', 'default']);
  t.match(table.stdout, /NAME\s+READY\s+VERSION\s+DEFAULT\s+ENABLED\s+AGE/);
  const users = kubectl(kubeconfig, ['get', 'users.kiteline.io', '-n', 'default']);
  t.match(users.stdout, /alice\s+alice\s+7\s+true\s+\["ops"\]/);
  const category = kubectl(kubeconfig, ['get', 'kiteline', '-n', 'default', '-o', 'name']);
  t.equal(category.status, 0, category.stderr);
  for (const name of [
    'user.kiteline.io/alice',
    'cluster.kiteline.io/prod',
    'role.kiteline.io/ops',
    'apikey.kiteline.io/ci',
  ]) {
    t.match(category.stdout, name, `the kiteline category lists ${name}`);
  }
  for (const short of ['kusr', 'kcl', 'krole', 'kak']) {
    t.equal(kubectl(kubeconfig, ['get', short, '-n', 'default']).status, 0, `short name ${short}`);
  }
  const bad = kubectl(kubeconfig, ['apply', '-f', '-'], objects.replace('username: alice', 'username: "not valid!"'));
  t.not(bad.status, 0, 'the schema rejects an invalid username');
});

t.test('the controller manager runs: Deployments get ReplicaSets, foreground deletion finishes', async (t) => {
  const container = '{name: web, image: kiteline.local/busybox:1, command: [sleep, "3600"]}';
  const deploy = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [${container}], terminationGracePeriodSeconds: 1}
`;
  t.equal(kubectl(kubeconfig, ['apply', '-f', '-'], deploy).status, 0);
  let replicaSets = 0;
  for (let i = 0; i < 100 && replicaSets === 0; i++) {
    const rs = kubectl(kubeconfig, ['get', 'rs', '-n', 'default', '-l', 'app=web', '-o', 'json']);
    replicaSets = JSON.parse(rs.stdout).items.length;
    if (!replicaSets) await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(replicaSets, 1, 'the deployment controller created a ReplicaSet');
  const del = kubectl(kubeconfig, [
    'delete',
    'deployment',
    'web',
    '-n',
    'default',
    '--cascade=foreground',
    '--timeout=60s',
  ]);
  t.equal(del.status, 0, del.stderr);
  const left = kubectl(kubeconfig, ['get', 'rs', '-n', 'default', '-l', 'app=web', '-o', 'json']);
  t.equal(JSON.parse(left.stdout).items.length, 0, 'garbage collection removed the ReplicaSet');
});

t.test('restart keeps the data and runs the pods again; stop leaves nothing behind', async (t) => {
  const sleeper = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'sleeper', namespace: 'default' },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'sleeper', image: 'kiteline.local/busybox:1', command: SLEEPER }],
    },
  };
  t.equal(kubectl(kubeconfig, ['apply', '-f', '-'], JSON.stringify(sleeper)).status, 0);
  t.equal(
    kubectl(kubeconfig, ['wait', '--for=condition=Ready', 'pod/sleeper', '--timeout=120s']).status,
    0,
    'the pod runs',
  );
  t.equal(processesUsing(SLEEPER.join('\0')).length, 1, "the sleeper's process is on this machine");
  const before = readState(dir)!;
  const slot = before.node!.slot;
  t.equal(kitelineCli(['controlplane', 'stop', '--dir', dir]).status, 0);
  t.same(leftovers(slot), [], 'no process, mount, network namespace, link, chain or cgroup left after stop');
  // A zombie (exited, not yet reaped by init) counts as gone.
  for (const pid of [...Object.values(before.pids), ...Object.values(before.node!.pids)])
    t.notOk(isAlive(pid), `pid ${pid} is gone`);

  const res = kitelineCli(['controlplane', 'start', '--dir', dir, '--node']);
  t.equal(res.status, 0, res.stderr);
  t.equal(readState(dir)?.server, before.server, 'the restart reuses the ports, so handed-out kubeconfigs stay valid');
  t.equal(readState(dir)?.node?.slot, slot, 'and the node its network slot');
  const user = kubectl(kubeconfig, ['get', 'users.kiteline.io', 'alice', '-n', 'default', '-o', 'json']);
  t.equal(user.status, 0, user.stderr);
  t.equal(JSON.parse(user.stdout).spec.name, 'Alice', 'data survived the restart');
  t.equal(
    kubectl(kubeconfig, ['wait', '--for=condition=Ready', 'pod/sleeper', '--timeout=120s']).status,
    0,
    'the pod runs again',
  );

  // A crash: every node process dies at once, nothing is cleaned up; stop still removes it all.
  for (const pid of Object.values(readState(dir)!.node!.pids)) process.kill(pid, 'SIGKILL');
  t.equal(kitelineCli(['controlplane', 'stop', '--dir', dir]).status, 0);
  t.same(leftovers(slot), [], 'nothing left after a crash and stop either');
});
