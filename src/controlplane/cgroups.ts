// The node's cgroup root. Each kubelet gets --cgroup-root=/kl-<slot>, so two nodes never share a
// kubepods tree (with the cgroupfs driver they would otherwise fight over /kubepods), and stop can
// find every container process of a node, even after its containerd or kubelet crashed: they are
// exactly the processes in that subtree.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Mount points of the cgroup hierarchies: the v1 ones (cpu, memory, pids, name=systemd, ...) and,
 * on a hybrid machine, the v2 one beside them, where runc also places each container.
 */
function hierarchies(types = ['cgroup', 'cgroup2']): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => types.includes(fields[fields.indexOf('-') + 1]))
    .map((fields) => fields[4]);
}

/** Creates /<name> in every hierarchy (the kubelet refuses a cgroup root that does not exist). */
export function createCgroupRoot(name: string): void {
  if (hierarchies(['cgroup']).length === 0)
    throw new Error('a node needs cgroup v1 hierarchies mounted under /sys/fs/cgroup');
  for (const mount of hierarchies()) {
    const dir = join(mount, name);
    mkdirSync(dir, { recursive: true });
    // A new cpuset cgroup has no CPUs or memory nodes; give it its parent's.
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(mount, file)) && !readFileSync(join(dir, file), 'utf8').trim()) {
        writeFileSync(join(dir, file), readFileSync(join(mount, file), 'utf8'));
      }
    }
  }
}

/**
 * Runs a file-system call on a cgroup that may vanish meanwhile (the kubelet and containerd remove
 * pod and container cgroups while stop walks the tree): a vanished one gives `fallback`.
 */
function unlessVanished<T>(call: () => T, fallback: T): T {
  try {
    return call();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return fallback;
    throw err;
  }
}

/** Every cgroup directory under /<name>, deepest first. */
function subtree(root: string): string[] {
  const children = unlessVanished(() => readdirSync(root), [] as string[])
    .map((entry) => join(root, entry))
    .filter((path) => unlessVanished(() => statSync(path).isDirectory(), false));
  return existsSync(root) ? [...children.flatMap(subtree), root] : [];
}

/** Pids of every process in /<name> and below. */
export function processesInCgroup(name: string): number[] {
  const pids = new Set<number>();
  for (const mount of hierarchies()) {
    for (const dir of subtree(join(mount, name))) {
      const procs = unlessVanished(() => readFileSync(join(dir, 'cgroup.procs'), 'utf8'), '');
      for (const pid of procs.split('\n').filter(Boolean)) pids.add(Number(pid));
    }
  }
  return [...pids];
}

/** SIGKILLs every process in the subtree until it is empty (containers may be forking). */
export async function killCgroup(name: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids = processesInCgroup(name);
    if (pids.length === 0) return;
    if (Date.now() > deadline) throw new Error(`processes ${pids.join(', ')} in cgroup /${name} survive SIGKILL`);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Removes /<name> from every hierarchy; its processes must be gone. */
export function removeCgroupRoot(name: string): void {
  for (const mount of hierarchies())
    for (const dir of subtree(join(mount, name))) unlessVanished(() => rmdirSync(dir), undefined);
}
