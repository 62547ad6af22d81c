// Finds etcd, kube-apiserver, kube-controller-manager and kubectl: KUBEBUILDER_ASSETS first
// (the envtest convention), then PATH, then kiteline's cache. When one is missing everywhere the
// cache is filled once by scripts/build-kubernetes.sh (Debian's kubernetes source + etcd-server).
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

const NAMES: Record<keyof Binaries, string> = {
  etcd: 'etcd',
  kubeApiserver: 'kube-apiserver',
  kubeControllerManager: 'kube-controller-manager',
  kubectl: 'kubectl',
};

/** Where built binaries are cached: outside the repository, kept across checkouts. */
export function binaryCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.KITELINE_CACHE_DIR || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'kiteline');
  return join(base, 'kubernetes', 'bin');
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

export function findBinaries(env: NodeJS.ProcessEnv = process.env): { found: Partial<Binaries>; missing: string[] } {
  const found: Partial<Binaries> = {};
  const missing: string[] = [];
  const dirs = searchDirs(env);
  for (const [key, name] of Object.entries(NAMES) as [keyof Binaries, string][]) {
    const dir = dirs.find((d) => executable(join(d, name)));
    if (dir) found[key] = join(dir, name);
    else missing.push(name);
  }
  return { found, missing };
}

/** Returns every binary, building the missing ones into the cache once. Throws a clear error otherwise. */
export function ensureBinaries(env: NodeJS.ProcessEnv = process.env): Binaries {
  let { found, missing } = findBinaries(env);
  if (missing.length === 0) return found as Binaries;

  if (env.KITELINE_NO_BUILD === '1') {
    throw new Error(`missing binaries: ${missing.join(', ')} (set KUBEBUILDER_ASSETS or PATH, or unset KITELINE_NO_BUILD to build them)`);
  }
  const script = join(PACKAGE_ROOT, 'scripts', 'build-kubernetes.sh');
  const built = spawnSync('bash', [script, binaryCacheDir(env)], { stdio: ['ignore', 'inherit', 'inherit'], env });
  ({ found, missing } = findBinaries(env));
  if (built.status !== 0 || missing.length > 0) {
    throw new Error(
      `cannot provide ${missing.join(', ') || 'the control plane binaries'}: none in KUBEBUILDER_ASSETS or PATH, ` +
        `and building them from Debian's kubernetes source package failed (exit ${built.status}). ` +
        `Run ${script} by hand as root to see why.`,
    );
  }
  return found as Binaries;
}
