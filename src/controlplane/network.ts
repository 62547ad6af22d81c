// The node's network: its own network namespace, linked to the host by a veth pair, with a pod
// subnet of its own. Several control planes with nodes run side by side because everything a
// node changes in the network (its bridge, kube-proxy's KUBE-* chains, the kubelet's chains,
// conntrack) lives inside its namespace, and each namespace gets distinct addresses from a
// machine-wide slot number:
//
//   slot i (1..250)   netns kl-<i>; veth kl-<i>-h (host side) <-> kl-<i>-n (node side)
//   10.250.<i>.0/30   the link: host side .1 (the API server's advertise address), node .2
//   10.251.<i>.0/24   the pods' bridge network (CNI bridge kl-<i>-br, gateway .1)
//
// The node namespace has no default route and nothing forwards or masquerades to the outside:
// pods reach the host (its API server) and each other, and nothing beyond this machine. The host
// gets one route, to the pod subnet through the link, so the API server reaches pods (service
// proxy) directly.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

export interface NodeNetwork {
  slot: number;
  netns: string;
  hostLink: string;
  nodeLink: string;
  /** The API server's address on the link (host side). */
  hostAddress: string;
  /** The node's InternalIP (node side of the link). */
  nodeAddress: string;
  podCidr: string;
  podGateway: string;
  bridge: string;
}

const MAX_SLOT = 250;
/** Slot claims: one file per slot holding the control plane directory that owns it. */
const CLAIMS_DIR = '/run/kiteline/node-slots';

export function networkFor(slot: number): NodeNetwork {
  return {
    slot,
    netns: `kl-${slot}`,
    hostLink: `kl-${slot}-h`,
    nodeLink: `kl-${slot}-n`,
    hostAddress: `10.250.${slot}.1`,
    nodeAddress: `10.250.${slot}.2`,
    podCidr: `10.251.${slot}.0/24`,
    podGateway: `10.251.${slot}.1`,
    bridge: `kl-${slot}-br`,
  };
}

/** The directory that holds slot's claim, if any. */
function claimant(slot: number): string | undefined {
  try {
    return readFileSync(`${CLAIMS_DIR}/${slot}`, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * A claim is stale when its directory is gone or was given another slot since (its state.json
 * says so); such a slot is free again.
 */
function claimIsStale(slot: number, owner: string): boolean {
  try {
    const state = JSON.parse(readFileSync(`${owner}/state.json`, 'utf8')) as { node?: { slot?: number } };
    return state.node?.slot !== undefined && state.node.slot !== slot;
  } catch {
    return !existsSync(owner);
  }
}

function tryClaim(slot: number, dir: string): boolean {
  const owner = claimant(slot);
  if (owner === dir) return true;
  if (owner !== undefined) {
    if (!claimIsStale(slot, owner)) return false;
    rmSync(`${CLAIMS_DIR}/${slot}`, { force: true });
  }
  try {
    const fd = openSync(`${CLAIMS_DIR}/${slot}`, 'wx'); // atomic: parallel starts cannot both win
    writeFileSync(fd, dir);
    closeSync(fd);
    return true;
  } catch {
    return false;
  }
}

/**
 * Does the control plane in dir hold slot? Only then may it remove the slot's namespace and
 * cgroup: a state.json copied along with a directory names a slot that another directory holds.
 */
export function ownsSlot(slot: number, dir: string): boolean {
  return claimant(slot) === resolve(dir);
}

/** A slot for the control plane in dir: its previous one when still free, else the lowest free. */
export function claimSlot(dir: string, previous: number | undefined): number {
  const abs = resolve(dir);
  mkdirSync(CLAIMS_DIR, { recursive: true });
  if (previous && tryClaim(previous, abs)) return previous;
  for (let slot = 1; slot <= MAX_SLOT; slot++) if (tryClaim(slot, abs)) return slot;
  throw new Error(`all ${MAX_SLOT} node network slots in ${CLAIMS_DIR} are taken`);
}

function run(cmd: string, args: string[], allowFailure = false): string {
  const res = spawnSync(cmd, args, { encoding: 'utf8' });
  if (res.error) throw new Error(`${cmd} is needed for the node's network: ${res.error.message}`);
  if (res.status !== 0 && !allowFailure) throw new Error(`${cmd} ${args.join(' ')} failed: ${res.stderr.trim()}`);
  return res.stdout;
}

/** Writes a sysctl inside the node's network namespace (net.* sysctls are per namespace). */
function nodeSysctl(net: NodeNetwork, key: string, value: string): void {
  run('nsenter', [
    `--net=/run/netns/${net.netns}`,
    '--',
    'sh',
    '-c',
    `echo ${value} > /proc/sys/${key.replaceAll('.', '/')}`,
  ]);
}

/** Creates the namespace, the link and the host's route to the pods. Call on a clean slot. */
export function createNetwork(net: NodeNetwork): void {
  for (const addr of [net.hostAddress, net.podGateway]) {
    const taken = run('ip', ['-o', 'addr', 'show', 'to', addr]).trim();
    if (taken) throw new Error(`address ${addr} of node slot ${net.slot} is already used on this machine: ${taken}`);
  }
  run('ip', ['netns', 'add', net.netns]);
  run('ip', ['link', 'add', net.hostLink, 'type', 'veth', 'peer', 'name', net.nodeLink, 'netns', net.netns]);
  run('ip', ['addr', 'add', `${net.hostAddress}/30`, 'dev', net.hostLink]);
  run('ip', ['link', 'set', net.hostLink, 'up']);
  run('ip', ['-n', net.netns, 'addr', 'add', `${net.nodeAddress}/30`, 'dev', net.nodeLink]);
  run('ip', ['-n', net.netns, 'link', 'set', net.nodeLink, 'up']);
  run('ip', ['-n', net.netns, 'link', 'set', 'lo', 'up']);
  run('ip', ['route', 'add', net.podCidr, 'via', net.nodeAddress, 'dev', net.hostLink]);
  // The node routes between its pods' bridge and the link; kube-proxy's rules need bridged pod
  // traffic to pass iptables (when the kernel has br_netfilter).
  nodeSysctl(net, 'net.ipv4.ip_forward', '1');
  if (existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables'))
    nodeSysctl(net, 'net.bridge.bridge-nf-call-iptables', '1');
}

/**
 * Removes the namespace, and with it the link (both ends), the pods' bridge, and every iptables
 * chain kube-proxy and the kubelet made in it. Safe when nothing exists.
 */
export function removeNetwork(net: NodeNetwork): void {
  if (existsSync(`/run/netns/${net.netns}`)) run('ip', ['netns', 'delete', net.netns]);
  // The kernel removes the host end shortly after the namespace; one left over from a namespace
  // that vanished another way is deleted here (failing only if it is still there afterwards).
  if (hostLinkExists(net)) run('ip', ['link', 'delete', net.hostLink], true);
  if (hostLinkExists(net)) throw new Error(`could not delete the node's link ${net.hostLink}`);
}

function hostLinkExists(net: NodeNetwork): boolean {
  return run('ip', ['-o', 'link', 'show', 'dev', net.hostLink], true).trim() !== '';
}
