// Flux, the real GitOps engine, against a test host plane: its source-controller (clones a Git
// repository, serves the result as an artifact) and kustomize-controller (builds it with kustomize,
// decrypts SOPS-encrypted files, server-side applies the result, prunes what left Git, puts back
// what was changed behind its back), built from their Go modules by scripts/flux/build.sh with
// their CRDs. They run as processes beside the plane, each watching only its own namespace (the
// test's), as Flux's own deployment runs them in flux-system; SOPS and age encrypt a Secret for
// Git the way a user does.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/config.js';
import { cacheDir } from '../../src/controlplane/binaries.js';
import { freePort } from '../../src/controlplane/ports.js';
import { kubectl, TEST_DIR } from './clusters.js';
import { eventually } from './eventually.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** scripts/flux/versions, by key. */
function fluxVersions(): Record<string, string> {
  const text = readFileSync(join(PACKAGE_ROOT, 'scripts', 'flux', 'versions'), 'utf8');
  return Object.fromEntries([...text.matchAll(/^([A-Z_]+)=(v[0-9.]+)$/gm)].map((m) => [m[1], m[2]]));
}

/** Where scripts/flux/build.sh put the binaries and CRDs (built first if missing). */
export function fluxDir(): string {
  const v = fluxVersions();
  const dir = join(cacheDir(), 'flux', `${v.SOURCE_CONTROLLER}-${v.KUSTOMIZE_CONTROLLER}-${v.SOPS}`);
  if (!existsSync(join(dir, 'bin', '.recipe'))) {
    const built = spawnSync('bash', [join(PACKAGE_ROOT, 'scripts', 'flux', 'build.sh')], { stdio: 'inherit' });
    if (built.status !== 0) throw new Error('scripts/flux/build.sh failed');
  }
  return dir;
}

export interface Flux {
  /** The namespace the controllers watch (their GitRepository and Kustomization objects live there). */
  namespace: string;
  /** The age recipient (public key) Git's Secrets are encrypted to. */
  ageRecipient: string;
  /** A Kubernetes manifest encrypted with SOPS for the age recipient (data and stringData only). */
  encrypt(manifest: string): string;
  /** The controllers' logs so far (for a failure's message). */
  logs(): string;
}

/**
 * Applies Flux's CRDs to the plane, creates `namespace`, makes an age key whose private half is the
 * Secret `sops-age` there (what a Kustomization's spec.decryption names), and starts both
 * controllers; stopped at teardown.
 */
export async function startFlux(t: Teardown, options: { kubeconfig: string; namespace: string }): Promise<Flux> {
  const dir = fluxDir();
  const { kubeconfig, namespace } = options;
  const must = (args: string[], input?: string) => {
    const res = kubectl(kubeconfig, args, input);
    if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr}`);
    return res.stdout;
  };
  must(['apply', '--server-side', '--force-conflicts', '-f', join(dir, 'crds')]);
  must(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(dir, 'crds')]);
  must(['create', 'namespace', namespace]);
  t.teardown(() => kubectl(kubeconfig, ['delete', 'namespace', namespace, '--wait=false']));

  const work = join(TEST_DIR, 'flux', namespace);
  mkdirSync(work, { recursive: true });
  const keygen = spawnSync(join(dir, 'bin', 'age-keygen'), ['-o', join(work, 'age.key')], { encoding: 'utf8' });
  if (keygen.status !== 0) throw new Error(`age-keygen: ${keygen.stderr}`);
  const ageKey = readFileSync(join(work, 'age.key'), 'utf8');
  const ageRecipient = /^# public key: (age1[a-z0-9]+)$/m.exec(ageKey)![1];
  must([
    '-n',
    namespace,
    'create',
    'secret',
    'generic',
    'sops-age',
    `--from-file=identity.agekey=${join(work, 'age.key')}`,
  ]);

  const logFiles: string[] = [];
  const run = async (name: string, extra: string[]) => {
    const ports = [await freePort(), await freePort()];
    const logFile = join(work, `${name}.log`);
    logFiles.push(logFile);
    const out = openSync(logFile, 'a');
    const child = spawn(
      join(dir, 'bin', name),
      [
        `--metrics-addr=127.0.0.1:${ports[0]}`,
        `--health-addr=127.0.0.1:${ports[1]}`,
        '--enable-leader-election=false',
        '--watch-all-namespaces=false',
        '--log-level=info',
        ...extra,
      ],
      { env: { ...process.env, KUBECONFIG: kubeconfig, RUNTIME_NAMESPACE: namespace }, stdio: ['ignore', out, out] },
    );
    closeSync(out);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    t.teardown(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    });
    const healthy = () => {
      if (child.exitCode !== null) throw new Error(`${name} exited: ${readFileSync(logFile, 'utf8').slice(-2000)}`);
      return fetch(`http://127.0.0.1:${ports[1]}/readyz`).then(
        (res) => res.ok,
        () => false,
      );
    };
    await eventually(`${name} to be ready`, healthy, 60_000, 200);
  };
  const storage = await freePort();
  mkdirSync(join(work, 'artifacts'), { recursive: true });
  await run('source-controller', [
    `--storage-path=${join(work, 'artifacts')}`,
    `--storage-addr=127.0.0.1:${storage}`,
    `--storage-adv-addr=127.0.0.1:${storage}`,
  ]);
  await run('kustomize-controller', []);

  return {
    namespace,
    ageRecipient,
    encrypt(manifest) {
      const plain = join(work, 'to-encrypt.yaml');
      writeFileSync(plain, manifest, { mode: 0o600 });
      const res = spawnSync(
        join(dir, 'bin', 'sops'),
        ['--encrypt', '--age', ageRecipient, '--encrypted-regex', '^(data|stringData)$', plain],
        { encoding: 'utf8' },
      );
      writeFileSync(plain, '');
      if (res.status !== 0) throw new Error(`sops --encrypt: ${res.stderr}`);
      return res.stdout;
    },
    logs() {
      return logFiles.map((f) => readFileSync(f, 'utf8')).join('\n');
    },
  };
}
