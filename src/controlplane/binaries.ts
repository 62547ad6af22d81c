// Finds the binaries of the embedded control plane and its node. The Kubernetes ones (kube-apiserver,
// kube-controller-manager, kubectl; for a node kubelet, kube-scheduler, kube-proxy) are of one
// release: KUBEBUILDER_ASSETS first (the envtest convention), then kiteline's cache of that
// release, ~/.cache/kiteline/kubernetes/<version>/bin, built there once from Go modules by
// scripts/kubernetes/build.sh. etcd likewise, of the version scripts/kubernetes/versions names, in
// ~/.cache/kiteline/etcd/<version>/bin (scripts/kubernetes/build-etcd.sh). The rest (containerd,
// ctr, the runc shim, runc) are Debian's packages, found on PATH and installed once by
// scripts/install-packages.sh.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
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

/** Binaries of one Kubernetes release, by the command's name. */
const KUBERNETES_COMMANDS = new Set([
  'kube-apiserver',
  'kube-controller-manager',
  'kubectl',
  'kubelet',
  'kube-scheduler',
  'kube-proxy',
]);

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

const VERSIONS_FILE = join(PACKAGE_ROOT, 'scripts', 'kubernetes', 'versions');

/**
 * The releases of scripts/kubernetes/versions: CURRENT (the default), OLDER (the suite's skew) and
 * the etcd every plane runs.
 */
export function kubernetesVersions(): { current: string; older: string; etcd: string } {
  // Read once per process: every ensureBinaries() asks (the tests' kubectl calls, thousands).
  if (versions) return versions;
  const text = readFileSync(VERSIONS_FILE, 'utf8');
  const value = (key: string) => {
    const m = new RegExp(`^${key}=(v\\d+\\.\\d+\\.\\d+)$`, 'm').exec(text);
    if (!m) throw new Error(`${VERSIONS_FILE} has no ${key}=vX.Y.Z line`);
    return m[1];
  };
  versions = { current: value('CURRENT'), older: value('OLDER'), etcd: value('ETCD') };
  return versions;
}
let versions: { current: string; older: string; etcd: string } | undefined;

/** The release a control plane runs when its start names none: KITELINE_KUBERNETES_VERSION, or CURRENT. */
export function defaultKubernetesVersion(env: NodeJS.ProcessEnv = process.env): string {
  return env.KITELINE_KUBERNETES_VERSION || kubernetesVersions().current;
}

/** kiteline's cache: outside the repository, kept across checkouts. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.KITELINE_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'kiteline');
}

/** Where one release's binaries are cached. */
export function binaryCacheDir(version: string, env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), 'kubernetes', version, 'bin');
}

/** Where the etcd of scripts/kubernetes/versions is cached. */
function etcdCacheDir(env: NodeJS.ProcessEnv): string {
  return join(cacheDir(env), 'etcd', kubernetesVersions().etcd, 'bin');
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
 * The directories searched for one command, in order. A Kubernetes command and etcd come from
 * KUBEBUILDER_ASSETS or the cache only, never PATH, so that a kubectl or an etcd of another release
 * on PATH (Debian's etcd 3.4, say) cannot stand in for the one asked for; the others come from PATH.
 */
function searchDirs(name: string, version: string, env: NodeJS.ProcessEnv): string[] {
  const dirs: string[] = [];
  if (env.KUBEBUILDER_ASSETS) dirs.push(env.KUBEBUILDER_ASSETS);
  if (KUBERNETES_COMMANDS.has(name)) return [...dirs, binaryCacheDir(version, env)];
  if (name === 'etcd') return [...dirs, etcdCacheDir(env)];
  dirs.push(...(env.PATH ?? '').split(delimiter).filter(Boolean));
  dirs.push('/usr/bin', '/usr/local/bin', '/usr/sbin');
  return dirs;
}

function find<T>(
  names: Record<keyof T, string>,
  version: string,
  env: NodeJS.ProcessEnv,
): { found: Partial<T>; missing: string[] } {
  const found: Partial<Record<keyof T, string>> = {};
  const missing: string[] = [];
  for (const [key, name] of Object.entries(names) as [keyof T, string][]) {
    const dir = searchDirs(name, version, env).find((d) => executable(join(d, name)));
    if (dir) found[key] = join(dir, name);
    else missing.push(name);
  }
  return { found: found as Partial<T>, missing };
}

/** Returns every control plane binary of a release, building or installing the missing ones once. */
export function ensureBinaries(
  env: NodeJS.ProcessEnv = process.env,
  version: string = defaultKubernetesVersion(env),
): Binaries {
  return ensure<Binaries>(NAMES, version, env);
}

/** Returns every binary a node of a release needs, building or installing the missing ones once. */
export function ensureNodeBinaries(
  env: NodeJS.ProcessEnv = process.env,
  version: string = defaultKubernetesVersion(env),
): NodeBinaries {
  return ensure<NodeBinaries>(NODE_NAMES, version, env);
}

/** Throws a clear error when a binary is still missing after the build and install scripts ran. */
function ensure<T>(names: Record<keyof T, string>, version: string, env: NodeJS.ProcessEnv): T {
  let { found, missing } = find<T>(names, version, env);
  if (missing.length === 0) return found as T;

  if (env.KITELINE_NO_BUILD === '1') {
    throw new Error(
      `missing binaries: ${missing.join(', ')} ` +
        '(set KUBEBUILDER_ASSETS or PATH, or unset KITELINE_NO_BUILD to build them)',
    );
  }
  const scripts = join(PACKAGE_ROOT, 'scripts');
  const kube = missing.filter((name) => KUBERNETES_COMMANDS.has(name));
  const packages = missing.filter((name) => !KUBERNETES_COMMANDS.has(name) && name !== 'etcd');
  const steps: [string, string[]][] = [];
  if (packages.length > 0) steps.push([join(scripts, 'install-packages.sh'), []]);
  if (missing.includes('etcd')) steps.push([join(scripts, 'kubernetes', 'build-etcd.sh'), []]);
  if (kube.length > 0) steps.push([join(scripts, 'kubernetes', 'build.sh'), [version, ...kube]]);
  for (const [script, args] of steps) {
    const res = spawnSync('bash', [script, ...args], { stdio: ['ignore', 'inherit', 'inherit'], env });
    ({ found, missing } = find<T>(names, version, env));
    if (res.status !== 0) {
      throw new Error(
        `cannot provide ${missing.join(', ')} of Kubernetes ${version}: ${script} ${args.join(' ')} failed ` +
          `(exit ${res.status}); run it by hand as root to see why.`,
      );
    }
  }
  if (missing.length > 0) throw new Error(`cannot provide ${missing.join(', ')} of Kubernetes ${version}`);
  return found as T;
}
