// A real node for the embedded control plane: containerd (root, state and socket inside the
// control plane directory), a kubelet registered as a Node, kube-proxy in iptables mode, and the
// kube-scheduler that puts pods on it. containerd, the kubelet and kube-proxy run inside the
// node's own network namespace (network.ts) and mount namespace (mount-namespace.ts: its own
// /var/log/pods), under their own cgroup root (cgroups.ts); the scheduler talks only to the API
// server and runs beside it.
//
// DIR/node/
//   containerd.toml, containerd/{root,state,runc}, containerd/containerd.sock
//   cni/net.d/     the pods' bridge network     cni/ipam/   host-local's address leases
//   kubelet/       the kubelet's --root-dir (pods, volumes, its serving certificate)
//   kubelet.yaml   the kubelet's configuration (KubeletConfiguration)
//   log/           the node's /var/log/pods and /var/log/containers (container logs)
//   pki/           client certificates of the kubelet, kube-proxy and the scheduler
//   *.kubeconfig   one per component, each with its own identity
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureNodeBinaries, type NodeBinaries } from './binaries.js';
import { createCgroupRoot, killCgroup, removeCgroupRoot } from './cgroups.js';
import { get } from './http.js';
import { importImages, type ImageArchive, type NodeImages } from './images.js';
import { certificateUser, kubeconfigYaml } from './kubeconfig.js';
import { unmountUnder } from './mounts.js';
import { createMountNamespace, removeMountNamespace } from './mount-namespace.js';
import { createNetwork, networkFor, ownsSlot, removeNetwork, type NodeNetwork } from './network.js';
import { ensureClientCert, type CertFiles } from './pki.js';
import { CONTROLLER_CLIENT_RATE, isAlive, launch, processesMentioning, terminate, waitFor } from './processes.js';

export interface NodeState {
  /** The Node object's name. */
  name: string;
  /** The machine-wide network slot (network.ts): addresses, namespace and cgroup root. */
  slot: number;
  pids: { containerd: number; kubelet: number; kubeProxy: number; scheduler: number };
}

export interface NodeStartContext {
  dir: string;
  /** The control plane's name; the Node is `<name>-node`. */
  planeName: string;
  slot: number;
  apiserverPort: number;
  ca: CertFiles;
  adminToken: string;
  bins: NodeBinaries;
  images: NodeImages;
  archives: ImageArchive[];
  env: NodeJS.ProcessEnv;
  deadline: number;
  logs: string;
}

/** The pids of a node that is not running. */
export const STOPPED_NODE_PIDS: NodeState['pids'] = { containerd: 0, kubelet: 0, kubeProxy: 0, scheduler: 0 };
/** The longest path of a unix socket (sun_path), minus containerd's ".ttrpc" suffix. */
const MAX_SOCKET_PATH = 107 - '.ttrpc'.length;

function nodePaths(dir: string) {
  const root = join(dir, 'node');
  return {
    root,
    containerdConfig: join(root, 'containerd.toml'),
    containerdRoot: join(root, 'containerd', 'root'),
    containerdState: join(root, 'containerd', 'state'),
    runcRoot: join(root, 'containerd', 'runc'),
    socket: join(root, 'containerd', 'containerd.sock'),
    cniConf: join(root, 'cni', 'net.d'),
    ipam: join(root, 'cni', 'ipam'),
    kubeletRoot: join(root, 'kubelet'),
    kubeletConfig: join(root, 'kubelet.yaml'),
    /** The node's own /var/log/pods and /var/log/containers (mount-namespace.ts). */
    logRoot: join(root, 'log'),
    pki: join(root, 'pki'),
    kubeconfig: (component: string) => join(root, `${component}.kubeconfig`),
  };
}

export function nodeName(planeName: string): string {
  return `${planeName}-node`;
}

/** The cgroup root of the node in slot: /kl-<slot>. */
function cgroupRoot(net: NodeNetwork): string {
  return net.netns;
}

function containerdConfig(p: ReturnType<typeof nodePaths>, images: NodeImages): string {
  return `# Written by kiteline at every node start.
version = 2
root = "${p.containerdRoot}"
state = "${p.containerdState}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "${p.socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "${join(p.containerdRoot, 'opt')}"

[plugins."io.containerd.grpc.v1.cri"]
  # No registry is reachable: the sandbox image is the locally built one, imported at start.
  sandbox_image = "${images.pause}"
  # Lowering a container's oom_score_adj needs CAP_SYS_RESOURCE, which this machine may not grant.
  restrict_oom_score_adj = true
  # Pods' network namespaces are pinned in the state dir, not in the machine-wide /run/netns.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "${p.runcRoot}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${p.cniConf}"
`;
}

/** A bridge with the slot's own subnet; no IP masquerade (nothing leaves the machine). */
function cniConfig(p: ReturnType<typeof nodePaths>, net: NodeNetwork): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: `kiteline-${net.slot}`,
      plugins: [
        {
          type: 'bridge',
          bridge: net.bridge,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: net.podCidr, gateway: net.podGateway }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: p.ipam,
          },
        },
      ],
    },
    null,
    2,
  );
}

/** The kubelet's configuration (kubelet.config.k8s.io/v1beta1, written as JSON, which is YAML). */
function kubeletConfiguration(p: ReturnType<typeof nodePaths>, net: NodeNetwork, ca: CertFiles): object {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // These machines have cgroup v1, which a kubelet from 1.35 on refuses unless told otherwise.
    failCgroupV1: false,
    containerRuntimeEndpoint: `unix://${p.socket}`,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: `/${cgroupRoot(net)}`,
    volumePluginDir: join(p.kubeletRoot, 'volume-plugins'),
    // Only the API server may use the kubelet's API: its client certificate (signed by the
    // control plane's CA), checked by a webhook against RBAC; no anonymous access.
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: ca.cert },
    },
    authorization: { mode: 'Webhook' },
    readOnlyPort: 0,
    // No DNS server runs, and pods must not reach the host's resolvers.
    resolvConf: '',
    failSwapOn: false,
    // Images cannot be pulled again, so never collect them; evict only when really out of space.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    // A pod whose kill raced with the removal of its container is retried at the next sync
    // (default every minute): deletions then take a minute instead of seconds.
    syncFrequency: '5s',
  };
}

/** A kubeconfig with a client certificate of its own, for one node component. */
function componentKubeconfig(
  p: ReturnType<typeof nodePaths>,
  ca: CertFiles,
  component: string,
  server: string,
  identity: { user: string; groups?: string[] },
): string {
  const cert = ensureClientCert(p.pki, ca, component, identity);
  const file = p.kubeconfig(component);
  const user = certificateUser(readFileSync(cert.cert, 'utf8'), readFileSync(cert.key, 'utf8'));
  writeFileSync(file, kubeconfigYaml('kiteline', server, readFileSync(ca.cert, 'utf8'), user, identity.user), {
    mode: 0o600,
  });
  return file;
}

async function nodeIsReady(server: string, caPem: string, token: string, name: string): Promise<boolean> {
  const res = await get(`${server}/api/v1/nodes/${name}`, { ca: caPem, token });
  if (res.status !== 200) return false;
  const node = JSON.parse(res.body) as { status?: { conditions?: { type: string; status: string }[] } };
  return !!node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
}

/**
 * Starts the node in ctx.slot and resolves once its Node is Ready. pids are recorded through
 * save as each process starts, so a failed start can be stopped cleanly.
 */
export async function startNode(ctx: NodeStartContext, save: (node: NodeState) => void): Promise<NodeState> {
  const p = nodePaths(ctx.dir);
  const net = networkFor(ctx.slot);
  const node: NodeState = { name: nodeName(ctx.planeName), slot: ctx.slot, pids: { ...STOPPED_NODE_PIDS } };
  const caPem = readFileSync(ctx.ca.cert, 'utf8');
  if (p.socket.length > MAX_SOCKET_PATH)
    throw new Error(`the directory ${ctx.dir} is too deep for containerd's socket ${p.socket}; use a shorter path`);
  for (const d of [p.containerdRoot, p.containerdState, p.runcRoot, p.cniConf, p.ipam, p.kubeletRoot, p.pki])
    mkdirSync(d, { recursive: true });
  writeFileSync(p.containerdConfig, containerdConfig(p, ctx.images));
  writeFileSync(join(p.cniConf, '10-kiteline.conflist'), cniConfig(p, net));
  save(node); // from here on, a failed start is cleaned up by stopNode
  removeNetwork(net); // what a crash of this plane left in its slot, if anything
  createNetwork(net);
  createCgroupRoot(cgroupRoot(net));
  const inNode = inNodeNamespaces(net, createMountNamespace(net.netns, p.logRoot));

  const containerdLog = join(ctx.logs, 'containerd.log');
  // A socket left by a machine that went down would pass the readiness check below at once.
  for (const socket of [p.socket, `${p.socket}.ttrpc`]) rmSync(socket, { force: true });
  node.pids.containerd = launch(
    [...inNode, ctx.bins.containerd, '--config', p.containerdConfig],
    containerdLog,
    ctx.env,
  );
  save(node);
  await waitFor('containerd', ctx.deadline, node.pids.containerd, containerdLog, async () => existsSync(p.socket));
  importImages(ctx.bins.ctr, p.socket, ctx.archives);

  // Inside the node's namespace the API server is at the host end of the link; beside it, on loopback.
  const linkServer = `https://${net.hostAddress}:${ctx.apiserverPort}`;
  const loopbackServer = `https://127.0.0.1:${ctx.apiserverPort}`;
  const kubeletConfig = componentKubeconfig(p, ctx.ca, 'kubelet', linkServer, {
    user: `system:node:${node.name}`,
    groups: ['system:nodes'],
  });
  const proxyConfig = componentKubeconfig(p, ctx.ca, 'kube-proxy', linkServer, { user: 'system:kube-proxy' });
  const schedulerConfig = componentKubeconfig(p, ctx.ca, 'kube-scheduler', loopbackServer, {
    user: 'system:kube-scheduler',
  });

  const kubeletLog = join(ctx.logs, 'kubelet.log');
  writeFileSync(p.kubeletConfig, JSON.stringify(kubeletConfiguration(p, net, ctx.ca), null, 2));
  node.pids.kubelet = launch(
    [
      ...inNode,
      ctx.bins.kubelet,
      `--config=${p.kubeletConfig}`,
      `--kubeconfig=${kubeletConfig}`,
      `--root-dir=${p.kubeletRoot}`,
      `--cert-dir=${join(p.kubeletRoot, 'pki')}`,
      `--hostname-override=${node.name}`,
      `--node-ip=${net.nodeAddress}`,
      // The kubelet's cAdvisor (/metrics/cadvisor: the series of Prometheus' charts) learns each
      // container's pod, namespace and container name from containerd at this socket, not at
      // containerRuntimeEndpoint; without it, it reports bare cgroups only.
      `--containerd=${p.socket}`,
      '--v=1',
    ],
    kubeletLog,
    ctx.env,
  );
  save(node);

  const proxyLog = join(ctx.logs, 'kube-proxy.log');
  node.pids.kubeProxy = launch(
    [
      ...inNode,
      ctx.bins.kubeProxy,
      `--kubeconfig=${proxyConfig}`,
      '--proxy-mode=iptables',
      `--hostname-override=${node.name}`,
      `--bind-address=${net.nodeAddress}`,
      `--cluster-cidr=${net.podCidr}`,
      // NodePorts on the node's own address only (the default, every local address, is warned about).
      '--nodeport-addresses=primary',
      '--healthz-bind-address=127.0.0.1:10256',
      '--metrics-bind-address=127.0.0.1:10249',
      // conntrack limits are machine-wide sysctls: leave them alone.
      '--conntrack-max-per-core=0',
      '--conntrack-tcp-timeout-established=0',
      '--conntrack-tcp-timeout-close-wait=0',
      '--v=1',
    ],
    proxyLog,
    ctx.env,
  );
  save(node);

  const schedulerLog = join(ctx.logs, 'kube-scheduler.log');
  node.pids.scheduler = launch(
    [
      ctx.bins.kubeScheduler,
      `--kubeconfig=${schedulerConfig}`,
      '--leader-elect=false',
      '--secure-port=0',
      ...CONTROLLER_CLIENT_RATE,
      '--v=1',
    ],
    schedulerLog,
    ctx.env,
  );
  save(node);

  await waitFor(`kubelet (Node ${node.name} Ready)`, ctx.deadline, node.pids.kubelet, kubeletLog, async () => {
    for (const [what, pid] of [
      ['kube-proxy', node.pids.kubeProxy],
      ['kube-scheduler', node.pids.scheduler],
      ['containerd', node.pids.containerd],
    ] as const) {
      if (!isAlive(pid)) throw new Error(`${what} exited; see ${ctx.logs}/${what}.log`);
    }
    return nodeIsReady(loopbackServer, caPem, ctx.adminToken, node.name);
  });
  return node;
}

/** Imports more image archives (kiteline's own, say) into the running node of the control plane in dir. */
export function importIntoNode(dir: string, archives: ImageArchive[], env: NodeJS.ProcessEnv = process.env): void {
  importImages(ensureNodeBinaries(env).ctr, nodePaths(dir).socket, archives);
}

/**
 * SIGKILLs a container's process on the node of the control plane in dir (id: a pod's containerID without
 * `containerd://`).
 */
export function killContainer(dir: string, containerId: string, env: NodeJS.ProcessEnv = process.env): void {
  const args = [
    '--address',
    nodePaths(dir).socket,
    '--namespace',
    'k8s.io',
    'tasks',
    'kill',
    '--signal',
    'SIGKILL',
    containerId,
  ];
  const res = spawnSync(ensureNodeBinaries(env).ctr, args, { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`killing container ${containerId} failed: ${res.stderr.trim()}`);
}

/**
 * Stops the node of the control plane in dir and leaves nothing of it behind: processes
 * (containers included), mounts, cgroups, the network namespace with its links, bridge and
 * iptables chains, and the files containerd and the kubelet keep outside dir. Works from what
 * is on the machine, not only from recorded pids, so it also cleans up after a crash.
 */
export async function stopNode(dir: string, node: NodeState): Promise<void> {
  const p = nodePaths(dir);
  const net = networkFor(node.slot);
  // The slot's namespace and cgroup are this node's only while it holds the slot's claim.
  const ownSlot = ownsSlot(node.slot, dir);
  // The kubelet first, so that it restarts nothing; then the rest of the node's own processes.
  await terminate(node.pids.kubelet, dir);
  await Promise.all([terminate(node.pids.kubeProxy, dir), terminate(node.pids.scheduler, dir)]);
  if (ownSlot) await killCgroup(cgroupRoot(net));
  const tasks = taskIds(p);
  // containerd, its shims (their command lines name its socket) and anything left by a crash.
  await terminate(node.pids.containerd, dir);
  await Promise.all(processesMentioning(p.root + '/').map((pid) => terminate(pid, p.root, 2000)));
  unmountUnder(p.root);
  if (ownSlot) {
    // With the node's processes gone, this frees every mount they made (all in that namespace).
    removeMountNamespace(net.netns);
    removeCgroupRoot(cgroupRoot(net));
    removeNetwork(net);
  }
  for (const id of tasks) rmSync(shimSocket(p, id), { force: true });
  removeCniResults(ownSlot ? node.slot : undefined, tasks);
  // Runtime state only (the containerd root with its images, and the kubelet's data, stay).
  rmSync(p.logRoot, { recursive: true, force: true });
  rmSync(p.containerdState, { recursive: true, force: true });
  rmSync(p.runcRoot, { recursive: true, force: true });
  rmSync(p.ipam, { recursive: true, force: true });
}

/** Ids of the containers and pod sandboxes containerd ran (its shims' task directories). */
function taskIds(p: ReturnType<typeof nodePaths>): { namespace: string; id: string }[] {
  const tasks = join(p.containerdState, 'io.containerd.runtime.v2.task');
  if (!existsSync(tasks)) return [];
  return readdirSync(tasks).flatMap((namespace) =>
    readdirSync(join(tasks, namespace)).map((id) => ({ namespace, id })),
  );
}

/**
 * A runc shim listens on /run/containerd/s/<sha256(address/namespace/id)>, outside the state
 * dir; a killed shim leaves its socket there.
 */
function shimSocket(p: ReturnType<typeof nodePaths>, task: { namespace: string; id: string }): string {
  return `/run/containerd/s/${createHash('sha256')
    .update(join(p.socket, task.namespace, task.id))
    .digest('hex')}`;
}

/**
 * libcni caches each attachment's result in /var/lib/cni/results/<network>-<sandbox id>-<if>:
 * the pod network's (kiteline-<slot>) and containerd's loopback's (cni-loopback).
 */
function removeCniResults(slot: number | undefined, tasks: { id: string }[]): void {
  const results = '/var/lib/cni/results';
  if (!existsSync(results)) return;
  const ids = tasks.map((t) => t.id);
  for (const file of readdirSync(results)) {
    const ofSlot = slot !== undefined && file.startsWith(`kiteline-${slot}-`);
    if (ofSlot || ids.some((id) => file.includes(id))) rmSync(join(results, file), { force: true });
  }
}

/** The command prefix that runs a node process in the node's network and mount namespaces. */
function inNodeNamespaces(net: NodeNetwork, mountNamespace: string): string[] {
  return ['nsenter', `--net=/run/netns/${net.netns}`, `--mount=${mountNamespace}`, '--'];
}
