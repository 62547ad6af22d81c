// Finds etcd, kube-apiserver, kube-controller-manager and kubectl, and for a node kubelet,
// kube-scheduler, kube-proxy and Debian's containerd and runc: KUBEBUILDER_ASSETS first (the
// envtest convention), then kiteline's cache, then PATH. When one is missing everywhere the cache
// is filled once by scripts/build-kubernetes.sh (Debian's kubernetes source, etcd-server, and the
// node's runtime packages).
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { PACKAGE_ROOT } from '../config.js';

export interface Binaries {
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubectl: string;
}

/** What a node runs besides the control plane's binaries. */
export interface NodeBinaries {
  kubelet: string;
  kubeScheduler: string;
  kubeProxy: string;
  containerd: string;
  /** containerd's client, used to import the locally built images. */
  ctr: string;
  /** containerd starts it by name from PATH; found here only to fail early when missing. */
  containerdShim: string;
  runc: string;
}

const NAMES: Record<keyof Binaries, string> = {
  etcd: 'etcd',
  kubeApiserver: 'kube-apiserver',
  kubeControllerManager: 'kube-controller-manager',
  kubectl: 'kubectl',
};

const NODE_NAMES: Record<keyof NodeBinaries, string> = {
  kubelet: 'kubelet',
  kubeScheduler: 'kube-scheduler',
  kubeProxy: 'kube-proxy',
  containerd: 'containerd',
  ctr: 'ctr',
  containerdShim: 'containerd-shim-runc-v2',
  runc: 'runc',
};

/** kiteline's cache: outside the repository, kept across checkouts. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.KITELINE_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'kiteline');
}

/** Where built binaries are cached. */
export function binaryCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), 'kubernetes', 'bin');
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The directories searched, in order. The cache comes before PATH for the Kubernetes binaries so
 * that a kubectl of another era on PATH does not shadow the one matching our API server; an
 * explicit KUBEBUILDER_ASSETS still wins over both.
 */
function searchDirs(env: NodeJS.ProcessEnv): string[] {
  const dirs: string[] = [];
  if (env.KUBEBUILDER_ASSETS) dirs.push(env.KUBEBUILDER_ASSETS);
  dirs.push(binaryCacheDir(env));
  dirs.push(...(env.PATH ?? '').split(delimiter).filter(Boolean));
  dirs.push('/usr/bin', '/usr/local/bin');
  return dirs;
}

function find<T>(names: Record<keyof T, string>, env: NodeJS.ProcessEnv): { found: Partial<T>; missing: string[] } {
  const found: Partial<Record<keyof T, string>> = {};
  const missing: string[] = [];
  const dirs = searchDirs(env);
  for (const [key, name] of Object.entries(names) as [keyof T, string][]) {
    const dir = dirs.find((d) => executable(join(d, name)));
    if (dir) found[key] = join(dir, name);
    else missing.push(name);
  }
  return { found: found as Partial<T>, missing };
}

export function findBinaries(env: NodeJS.ProcessEnv = process.env): { found: Partial<Binaries>; missing: string[] } {
  return find<Binaries>(NAMES, env);
}

/** Returns every control plane binary, building the missing ones into the cache once. */
export function ensureBinaries(env: NodeJS.ProcessEnv = process.env): Binaries {
  return ensure<Binaries>(NAMES, env);
}

/** Returns every binary a node needs, building or installing the missing ones once. */
export function ensureNodeBinaries(env: NodeJS.ProcessEnv = process.env): NodeBinaries {
  return ensure<NodeBinaries>(NODE_NAMES, env);
}

/** Throws a clear error when a binary is still missing after the build script ran. */
function ensure<T>(names: Record<keyof T, string>, env: NodeJS.ProcessEnv): T {
  let { found, missing } = find<T>(names, env);
  if (missing.length === 0) return found as T;

  if (env.KITELINE_NO_BUILD === '1') {
    throw new Error(
      `missing binaries: ${missing.join(', ')} ` +
        '(set KUBEBUILDER_ASSETS or PATH, or unset KITELINE_NO_BUILD to build them)',
    );
  }
  const script = join(PACKAGE_ROOT, 'scripts', 'build-kubernetes.sh');
  const built = spawnSync('bash', [script, binaryCacheDir(env)], { stdio: ['ignore', 'inherit', 'inherit'], env });
  ({ found, missing } = find<T>(names, env));
  if (built.status !== 0 || missing.length > 0) {
    throw new Error(
      `cannot provide ${missing.join(', ') || 'the Kubernetes binaries'}: none in KUBEBUILDER_ASSETS or PATH, ` +
        `and building them from Debian's kubernetes source package (or installing Debian's packages) failed ` +
        `(exit ${built.status}). Run ${script} by hand as root to see why.`,
    );
  }
  return found as T;
}
