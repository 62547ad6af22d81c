// A real local Kubernetes control plane: etcd + kube-apiserver + kube-controller-manager, started
// detached on free loopback ports, with all data in one directory so a restart keeps it; with
// `node`, also a real node (node.ts) on which pods run.
//
// DIR/
//   etcd/           etcd data
//   pki/            service-account keys, the control plane's CA, the API server's serving
//                   certificate and its client certificate for the kubelet (pki.ts)
//   tokens.csv      the admin token (group system:masters)
//   kubeconfig      admin kubeconfig with the real CA inlined
//   state.json      name, Kubernetes version, ports, the pids of the running processes (0 once
//                   stopped), the node
//   logs/*.log      each process's output
//   node/           the node's data (node.ts)
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultKubernetesVersion, ensureBinaries, ensureNodeBinaries, type Binaries } from './binaries.js';
import { get } from './http.js';
import { ensureImages } from './images.js';
import { kubeconfigYaml } from './kubeconfig.js';
import { ensureKubernetesEndpoint } from './kubernetes-service.js';
import { claimSlot, networkFor } from './network.js';
import { startNode, stopNode, STOPPED_NODE_PIDS, type NodeState } from './node.js';
import { ensureCa, ensureClientCert, ensureServingCert } from './pki.js';
import { freePort, portIsFree } from './ports.js';
import { CONTROLLER_CLIENT_RATE, isAlive, launch, terminate, waitFor } from './processes.js';

export interface ControlPlaneState {
  name: string;
  /** The Kubernetes release it runs, e.g. v1.35.4. */
  version: string;
  dir: string;
  server: string;
  ports: { etcdClient: number; etcdPeer: number; apiserver: number };
  pids: { etcd: number; apiserver: number; controllerManager: number };
  /** Present once the control plane was started with a node; its pids are 0 once stopped. */
  node?: NodeState;
}

export interface ControlPlaneHandle extends ControlPlaneState {
  kubeconfigPath: string;
  token: string;
  caPem: string;
}

export interface StartOptions {
  dir: string;
  name?: string;
  /** Overall time allowed for the processes to become ready. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /**
   * Also run a node (containerd, kubelet, kube-proxy, kube-scheduler) and wait until it is Ready.
   * A running control plane without one is restarted with one; without this flag a running
   * control plane is returned as it is, node or not.
   */
  node?: boolean;
  /**
   * The Kubernetes release to run (default: KITELINE_KUBERNETES_VERSION, else CURRENT of
   * scripts/kubernetes/versions). A control plane keeps its data across releases as Kubernetes does
   * on upgrade; a running one of another release is restarted with this one.
   */
  version?: string;
}

const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
const SERVICE_CIDR = '10.0.0.0/24';
/** The `kubernetes` Service's cluster IP: the first address of SERVICE_CIDR. */
const KUBERNETES_SERVICE_IP = '10.0.0.1';
const SERVING_DNS_NAMES = [
  'localhost',
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
];
const START_TIMEOUT_MS = 120_000;
/** A node adds containerd, image imports and the kubelet's registration. */
const START_WITH_NODE_TIMEOUT_MS = 300_000;

function paths(dir: string) {
  return {
    etcdData: join(dir, 'etcd'),
    pki: join(dir, 'pki'),
    saKey: join(dir, 'pki', 'sa.key'),
    saPub: join(dir, 'pki', 'sa.pub'),
    caCert: join(dir, 'pki', 'ca.crt'),
    tokens: join(dir, 'tokens.csv'),
    kubeconfig: join(dir, 'kubeconfig'),
    state: join(dir, 'state.json'),
    logs: join(dir, 'logs'),
  };
}

export function readState(dir: string): ControlPlaneState | undefined {
  const file = paths(resolve(dir)).state;
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as ControlPlaneState;
}

function ensureCredentials(p: ReturnType<typeof paths>): string {
  mkdirSync(p.pki, { recursive: true, mode: 0o700 });
  if (!existsSync(p.saKey)) {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(p.saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(p.saPub, publicKey.export({ type: 'spki', format: 'pem' }));
  }
  if (!existsSync(p.tokens)) {
    writeFileSync(p.tokens, `${randomBytes(32).toString('hex')},admin,admin,system:masters\n`, { mode: 0o600 });
  }
  return readFileSync(p.tokens, 'utf8').split(',')[0];
}

async function choosePort(previous: number | undefined): Promise<number> {
  if (previous && (await portIsFree(previous))) return previous;
  return freePort();
}

function handle(dir: string, state: ControlPlaneState): ControlPlaneHandle {
  const p = paths(dir);
  return {
    ...state,
    kubeconfigPath: p.kubeconfig,
    token: readFileSync(p.tokens, 'utf8').split(',')[0],
    caPem: readFileSync(p.caCert, 'utf8'),
  };
}

/** Is every process of the control plane in DIR (and of its node, if it has one) alive? */
export function isRunning(dir: string): boolean {
  const state = readState(dir);
  const pids = [...Object.values(state?.pids ?? {}), ...Object.values(state?.node?.pids ?? {})];
  return !!state && pids.every((pid) => isAlive(pid, resolve(dir)));
}

/**
 * Starts the control plane in DIR (or returns the running one) and resolves once the API server
 * answers /readyz and the controller manager has created the default service account.
 */
export async function startControlPlane(options: StartOptions): Promise<ControlPlaneHandle> {
  const dir = resolve(options.dir);
  mkdirSync(dir, { recursive: true });
  const release = await acquireStartLock(
    dir,
    options.timeoutMs ?? (options.node ? START_WITH_NODE_TIMEOUT_MS : START_TIMEOUT_MS),
  );
  try {
    return await startLocked(dir, options);
  } finally {
    release();
  }
}

/**
 * Serializes starts of one directory across processes (parallel test files may all ask for the
 * shared host): an exclusive lock file holding the starter's pid; a stale one is taken over.
 */
async function acquireStartLock(dir: string, timeoutMs: number): Promise<() => void> {
  const lock = join(dir, 'start.lock');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx');
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(lock, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = 0;
      let ageMs = 0;
      try {
        holder = Number(readFileSync(lock, 'utf8') || '0');
        ageMs = Date.now() - statSync(lock).mtimeMs;
      } catch {
        continue; // released meanwhile
      }
      // An empty lock is one being written; a dead holder's lock is stale.
      if ((holder && !isAlive(holder)) || (!holder && ageMs > 5000)) {
        rmSync(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`another process (pid ${holder}) is starting the control plane in ${dir}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function startLocked(dir: string, options: StartOptions): Promise<ControlPlaneHandle> {
  const env = options.env ?? process.env;
  const p = paths(dir);
  const previous = readState(dir);
  const version = options.version ?? defaultKubernetesVersion(env);
  const sameRelease = previous?.version === version;
  if (previous && isRunning(dir) && sameRelease && (previous.node || !options.node)) return handle(dir, previous);
  // Half-dead, another release, or a node is wanted: clean up first.
  if (previous) await stopControlPlane(dir);

  const bins: Binaries = ensureBinaries(env, version);
  const name = options.name ?? previous?.name ?? 'kiteline';
  const deadline = Date.now() + (options.timeoutMs ?? (options.node ? START_WITH_NODE_TIMEOUT_MS : START_TIMEOUT_MS));
  mkdirSync(p.logs, { recursive: true });
  mkdirSync(p.etcdData, { recursive: true, mode: 0o700 });
  const token = ensureCredentials(p);
  // With a node, the API server must also be reachable from the node's network namespace, at the
  // host end of its link, which is also the address the `kubernetes` Service sends pods to.
  const link = options.node ? networkFor(claimSlot(dir, previous?.node?.slot)) : undefined;
  const ca = ensureCa(p.pki, name);
  const serving = ensureServingCert(
    p.pki,
    ca,
    ['127.0.0.1', KUBERNETES_SERVICE_IP, ...(link ? [link.hostAddress] : [])],
    SERVING_DNS_NAMES,
  );
  const kubeletClient = ensureClientCert(p.pki, ca, 'apiserver-kubelet-client', {
    user: 'kube-apiserver-kubelet-client',
  });

  const ports = {
    etcdClient: await choosePort(previous?.ports.etcdClient),
    etcdPeer: await choosePort(previous?.ports.etcdPeer),
    apiserver: await choosePort(previous?.ports.apiserver),
  };
  const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
  const server = `https://127.0.0.1:${ports.apiserver}`;
  const pids = { etcd: 0, apiserver: 0, controllerManager: 0 };
  let node: NodeState | undefined;
  const saveState = () =>
    writeFileSync(
      p.state,
      JSON.stringify({ name, version, dir, server, ports, pids, ...(node ? { node } : {}) }, null, 2),
    );

  try {
    const etcdLog = join(p.logs, 'etcd.log');
    pids.etcd = launch(
      [
        bins.etcd,
        '--name',
        name,
        '--data-dir',
        p.etcdData,
        '--listen-client-urls',
        etcdUrl,
        '--advertise-client-urls',
        etcdUrl,
        '--listen-peer-urls',
        `http://127.0.0.1:${ports.etcdPeer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${ports.etcdPeer}`,
        '--initial-cluster',
        `${name}=http://127.0.0.1:${ports.etcdPeer}`,
        '--log-level',
        'warn',
      ],
      etcdLog,
      env,
    );
    saveState();
    await waitFor(
      'etcd',
      deadline,
      pids.etcd,
      etcdLog,
      async () => (await get(`${etcdUrl}/health`, {})).status === 200,
    );

    const apiLog = join(p.logs, 'kube-apiserver.log');
    pids.apiserver = launch(
      [
        bins.kubeApiserver,
        `--etcd-servers=${etcdUrl}`,
        `--bind-address=${link ? '0.0.0.0' : '127.0.0.1'}`,
        `--advertise-address=${link ? link.hostAddress : '127.0.0.1'}`,
        `--secure-port=${ports.apiserver}`,
        `--tls-cert-file=${serving.cert}`,
        `--tls-private-key-file=${serving.key}`,
        `--token-auth-file=${p.tokens}`,
        // Node components authenticate with client certificates signed by the control plane's CA.
        `--client-ca-file=${ca.cert}`,
        '--authorization-mode=Node,RBAC',
        '--enable-admission-plugins=NodeRestriction',
        // logs, exec, port-forward: the API server calls the kubelet at its InternalIP (the kubelet
        // refuses a loopback node IP) with its own client certificate.
        '--kubelet-preferred-address-types=InternalIP',
        `--kubelet-client-certificate=${kubeletClient.cert}`,
        `--kubelet-client-key=${kubeletClient.key}`,
        `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
        `--service-account-key-file=${p.saPub}`,
        `--service-account-signing-key-file=${p.saKey}`,
        `--service-cluster-ip-range=${SERVICE_CIDR}`,
        '--allow-privileged=true',
        '--v=1',
      ],
      apiLog,
      env,
    );
    saveState();
    const caPem = readFileSync(ca.cert, 'utf8');
    await waitFor(
      'kube-apiserver',
      deadline,
      pids.apiserver,
      apiLog,
      async () => (await get(`${server}/readyz`, { ca: caPem, token })).status === 200,
    );
    writeFileSync(p.kubeconfig, kubeconfigYaml(name, server, caPem, { token }), { mode: 0o600 });

    const kcmLog = join(p.logs, 'kube-controller-manager.log');
    pids.controllerManager = launch(
      [
        bins.kubeControllerManager,
        `--kubeconfig=${p.kubeconfig}`,
        `--service-account-private-key-file=${p.saKey}`,
        `--root-ca-file=${ca.cert}`,
        '--leader-elect=false',
        '--secure-port=0',
        '--controllers=*',
        ...CONTROLLER_CLIENT_RATE,
        '--v=1',
      ],
      kcmLog,
      env,
    );
    saveState();
    // The default service account is created by the controller manager: proof that it runs.
    await waitFor('kube-controller-manager', deadline, pids.controllerManager, kcmLog, async () => {
      const res = await get(`${server}/api/v1/namespaces/default/serviceaccounts/default`, { ca: caPem, token });
      return res.status === 200;
    });

    if (link) {
      grantKubeletAccess(bins.kubectl, p.kubeconfig);
      await ensureKubernetesEndpoint(bins.kubectl, p.kubeconfig, link.hostAddress, ports.apiserver, deadline);
      const { images, archives } = ensureImages(env);
      const nodeBins = ensureNodeBinaries(env, version);
      node = await startNode(
        {
          dir,
          planeName: name,
          slot: link.slot,
          apiserverPort: ports.apiserver,
          ca,
          adminToken: token,
          bins: nodeBins,
          images,
          archives,
          env,
          deadline,
          logs: p.logs,
        },
        (current) => {
          node = current;
          saveState();
        },
      );
      saveState();
    }
    return handle(dir, { name, version, dir, server, ports, pids, ...(node ? { node } : {}) });
  } catch (err) {
    await stopControlPlane(dir);
    throw err;
  }
}

/** Lets the API server's kubelet client identity use the kubelet's API (logs, exec, port-forward). */
function grantKubeletAccess(kubectl: string, kubeconfig: string): void {
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'kiteline:kube-apiserver-kubelet-client' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:kubelet-api-admin' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'kube-apiserver-kubelet-client' }],
  };
  const res = spawnSync(kubectl, ['--kubeconfig', kubeconfig, 'apply', '-f', '-'], {
    input: JSON.stringify(binding),
    encoding: 'utf8',
  });
  if (res.status !== 0) throw new Error(`granting the API server access to the kubelet failed: ${res.stderr.trim()}`);
}

/**
 * Stops every process of the control plane in DIR, and its node with all it made on the machine;
 * data stays. Safe to call when nothing runs, and after a crash.
 */
export async function stopControlPlane(dir: string): Promise<void> {
  const abs = resolve(dir);
  const state = readState(abs);
  if (!state) return;
  // The node first: its kubelet would otherwise keep reporting to a dying API server. Whatever
  // its clean-up runs into, the control plane's processes are stopped all the same.
  try {
    if (state.node) await stopNode(abs, state.node);
  } finally {
    // Controllers first, storage last, so nothing writes to a dead etcd.
    for (const pid of [state.pids.controllerManager, state.pids.apiserver, state.pids.etcd]) {
      if (pid) await terminate(pid, abs);
    }
    // Keep name, ports and the node's slot (a restart reuses them, so kubeconfigs handed out
    // stay valid); no pids.
    const stopped: ControlPlaneState = {
      ...state,
      pids: { etcd: 0, apiserver: 0, controllerManager: 0 },
      ...(state.node ? { node: { ...state.node, pids: STOPPED_NODE_PIDS } } : {}),
    };
    writeFileSync(paths(abs).state, JSON.stringify(stopped, null, 2));
  }
}
