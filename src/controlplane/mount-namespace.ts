// A node's own mount namespace, shared by its containerd and kubelet, in which the machine-wide
// log directories are the node's own: /var/log/pods and /var/log/containers are bind mounts of
// directories under the node's root. The kubelet hard-codes those paths, and every kubelet's
// garbage collector deletes the pod log directories of pods it does not know (once a minute):
// with two nodes on one machine, each deleted the other's logs while their containers still wrote
// to them (`kubectl logs` failed with "failed to try resolving symlinks", `logs -f` went quiet).
//
// The namespace is a slave of the machine's (mounts made outside still appear inside, none made
// inside leaks out: the kubelet's volumes, containerd's rootfs and network-namespace pins), kept
// alive by a bind mount of /proc/<pid>/ns/mnt on a file in a private directory (as `ip netns`
// keeps network namespaces), and entered with `nsenter --mount=<file>`. Unmounting the file once
// the node's processes are gone frees the namespace and every mount in it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mountsUnder } from './mounts.js';

/** Where the namespaces' files live: a private mount of its own, so binding a namespace there works. */
const NAMESPACES_DIR = '/run/kiteline/node-mounts';

/** The machine-wide paths each node gets its own copy of. */
export const NODE_LOG_DIRS = ['/var/log/pods', '/var/log/containers'] as const;

function run(args: string[]): void {
  const res = spawnSync(args[0], args.slice(1), { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`${args.join(' ')} failed: ${(res.stderr || res.stdout || '').trim()}`);
}

/** The namespace file of a slot's node. */
export function mountNamespaceFile(netns: string): string {
  return join(NAMESPACES_DIR, netns);
}

function ensurePrivateDir(): void {
  mkdirSync(NAMESPACES_DIR, { recursive: true });
  if (mountsUnder(NAMESPACES_DIR).includes(NAMESPACES_DIR)) return;
  run(['mount', '--bind', NAMESPACES_DIR, NAMESPACES_DIR]);
  run(['mount', '--make-private', NAMESPACES_DIR]);
}

/**
 * Creates the node's mount namespace (a stale one of the same slot is removed first) with each
 * machine-wide log directory bound to `<logsRoot>/<its name>`; returns the file to enter it by.
 */
export function createMountNamespace(netns: string, logsRoot: string): string {
  ensurePrivateDir();
  removeMountNamespace(netns);
  const file = mountNamespaceFile(netns);
  writeFileSync(file, '');
  run(['unshare', `--mount=${file}`, '--propagation', 'slave', 'true']);
  for (const target of NODE_LOG_DIRS) {
    const source = join(logsRoot, target.split('/').pop()!);
    mkdirSync(source, { recursive: true });
    mkdirSync(target, { recursive: true });
    run(['nsenter', `--mount=${file}`, '--', 'mount', '--bind', source, target]);
  }
  return file;
}

/** Frees the node's mount namespace (and every mount in it), if there is one. */
export function removeMountNamespace(netns: string): void {
  const file = mountNamespaceFile(netns);
  if (mountsUnder(file).length > 0) {
    if (spawnSync('umount', [file]).status !== 0) spawnSync('umount', ['--lazy', file]);
  }
  if (existsSync(file)) rmSync(file, { force: true });
}
