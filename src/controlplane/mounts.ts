// Mounts a node leaves under its directory: the kubelet bind-mounts its root dir onto itself
// (rshared) and mounts volumes (tmpfs for secrets and tokens) below it; containerd mounts each
// container's rootfs, each sandbox's /dev/shm and pins each pod's network namespace (bind mounts,
// kept in its state dir). None of them goes away when the processes die. (A node's processes run
// in a mount namespace of their own, mount-namespace.ts, so from the machine's namespace these are
// not even visible; unmountUnder still cleans up after a node started before that.)
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescape(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Mount points at or under dir, deepest (latest) first. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => unescape(line.split(' ')[4]))
    .filter((point) => point === dir || point.startsWith(dir + '/'))
    .reverse();
}

/** Unmounts everything at or under dir; a mount still busy is detached lazily. */
export function unmountUnder(dir: string): void {
  for (let round = 0; round < 5; round++) {
    const points = mountsUnder(dir);
    if (points.length === 0) return;
    for (const point of points) {
      if (spawnSync('umount', [point]).status !== 0) spawnSync('umount', ['--lazy', point]);
    }
  }
  const left = mountsUnder(dir);
  if (left.length) throw new Error(`could not unmount ${left.join(', ')}`);
}
