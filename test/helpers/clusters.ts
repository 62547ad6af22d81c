// Test fixtures: the shared control planes (started by scripts/run-tests.sh, or on demand when a
// file runs alone), kubectl with the matching binary, and unique namespaces per test file.
import { execFile, spawn, spawnSync } from 'node:child_process';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PACKAGE_ROOT } from '../../src/config.js';
import { ensureBinaries, kubernetesVersions } from '../../src/controlplane/binaries.js';
import { startControlPlane, type ControlPlaneHandle } from '../../src/controlplane/controlplane.js';

// By its real path: git worktrees that share one .kiteline through a symlink share the planes too
// (a running plane is recognised by the path in its processes' command lines).
export const TEST_DIR = realPath(resolve(PACKAGE_ROOT, '.kiteline', 'test'));

function realPath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return dir;
  }
}
export type TestClusterName = 'host' | 'target-a' | 'target-b';

/**
 * The shared planes that have a node (pods run there); target-b has none, so it also covers a
 * control plane without one. Keep in step with scripts/run-tests.sh.
 */
export const PLANES_WITH_NODE: readonly TestClusterName[] = ['host', 'target-a'];

/**
 * The Kubernetes release of each shared plane: the current one, except target-b on the older minor
 * (version skew: every multi-cluster path meets two API server versions). Keep in step with
 * scripts/run-tests.sh.
 */
export function testPlaneVersion(name: TestClusterName): string {
  const { current, older } = kubernetesVersions();
  return name === 'target-b' ? older : current;
}

/** A shared test control plane; starts it (with its node, if it has one) when no run-tests.sh did. */
export function testControlPlane(name: TestClusterName): Promise<ControlPlaneHandle> {
  return startControlPlane({
    dir: join(TEST_DIR, name),
    name,
    node: PLANES_WITH_NODE.includes(name),
    version: testPlaneVersion(name),
  });
}

/** A fresh DNS-label name, e.g. for a test file's own install namespace. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export interface CommandResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs kubectl (the one built with our API server) against a kubeconfig. */
export function kubectl(kubeconfig: string, args: string[], input?: string): CommandResult {
  const bin = ensureBinaries().kubectl;
  const res = spawnSync(bin, ['--kubeconfig', kubeconfig, ...args], {
    input,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: res.status ?? -1, stdout: res.stdout ?? '', stderr: res.stderr ?? '' };
}

/**
 * kubectl without blocking the event loop, for tests whose gateways run in this process and must
 * see kubectl's changes as they happen (as a gateway in its own pod would).
 */
export function kubectlInBackground(kubeconfig: string, args: string[], input?: string): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = execFile(
      ensureBinaries().kubectl,
      ['--kubeconfig', kubeconfig, ...args],
      { encoding: 'utf8', timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ status: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
    child.stdin?.end(input);
  });
}

/** Runs the kiteline CLI the way a user does (node bin/kiteline.js ...). */
export function kitelineCli(args: string[], env: NodeJS.ProcessEnv = process.env): CommandResult {
  const res = spawnSync(process.execPath, [join(PACKAGE_ROOT, 'bin', 'kiteline.js'), ...args], {
    encoding: 'utf8',
    env,
    timeout: 180_000,
  });
  return { status: res.status ?? -1, stdout: res.stdout ?? '', stderr: res.stderr ?? '' };
}

/**
 * Installs a throwaway namespaced CRD `widgets.<group>` (kind Widget, any fields allowed, lists of
 * kind `listKind`) on a test cluster, waits until it is established, and deletes it when the test ends.
 */
export function installWidgetCrd(t: Test, kubeconfig: string, group: string, listKind = 'WidgetList'): string {
  const name = `widgets.${group}`;
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
  t.teardown(() => kubectl(kubeconfig, ['delete', 'crd', name, '--wait=false']));
  t.equal(kubectl(kubeconfig, ['create', '-f', '-'], JSON.stringify(crd)).status, 0, 'a test CRD');
  t.equal(
    kubectl(kubeconfig, ['wait', '--for=condition=Established', `crd/${name}`, '--timeout=60s']).status,
    0,
    'the test CRD is established',
  );
  return name;
}

/**
 * Runs `kubectl port-forward <target> :<remotePort>` (a pod or Service) until the test ends and
 * resolves with the base URL of its local end, e.g. http://127.0.0.1:40123.
 */
export async function kubectlPortForward(
  t: Test,
  kubeconfig: string,
  namespace: string,
  target: string,
  remotePort: number,
): Promise<string> {
  const child = spawn(
    ensureBinaries().kubectl,
    ['--kubeconfig', kubeconfig, '-n', namespace, 'port-forward', target, `:${remotePort}`],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  t.teardown(() => child.kill());
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`port-forward ${target} exited with ${code}`)));
    setTimeout(() => reject(new Error(`no port-forward to ${target} in time: ${out}`)), 30_000).unref();
  });
  return `http://127.0.0.1:${port}`;
}
