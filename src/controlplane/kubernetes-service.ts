// The `kubernetes` Service's endpoint: where pods find the API server (through kube-proxy).
//
// kube-apiserver 1.20 writes its advertised address into the Endpoints `default/kubernetes` but
// never corrects the port of an existing object (UpdateKubernetesService is only ever called with
// reconcile=false). The embedded API server's port can change between starts (the previous one
// was taken), so a stale port would leave pods unable to reach it: such an Endpoints object is
// deleted, and the API server recreates it with the right port within its 10 s interval.
import { spawnSync } from 'node:child_process';

interface EndpointsSubset {
  addresses?: { ip: string }[];
  ports?: { port: number }[];
}

function run(kubectl: string, kubeconfig: string, args: string[]): { status: number; stdout: string } {
  const res = spawnSync(kubectl, ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });
  return { status: res.status ?? -1, stdout: res.stdout ?? '' };
}

/** Resolves once `default/kubernetes` lists exactly address:port; throws at the deadline. */
export async function ensureKubernetesEndpoint(
  kubectl: string,
  kubeconfig: string,
  address: string,
  port: number,
  deadline: number,
): Promise<void> {
  let seen = '';
  while (Date.now() < deadline) {
    const got = run(kubectl, kubeconfig, [
      'get',
      'endpoints',
      'kubernetes',
      '-n',
      'default',
      '-o',
      'json',
      '--ignore-not-found',
    ]);
    const subsets =
      got.status === 0 && got.stdout ? ((JSON.parse(got.stdout) as { subsets?: EndpointsSubset[] }).subsets ?? []) : [];
    const addresses = subsets.flatMap((s) => s.addresses ?? []).map((a) => a.ip);
    const ports = subsets.flatMap((s) => s.ports ?? []).map((p) => p.port);
    seen = `${addresses.join(',')}:${ports.join(',')}`;
    if (addresses.length === 1 && addresses[0] === address && ports.length === 1 && ports[0] === port) return;
    if (ports.length > 0 && !ports.includes(port)) {
      run(kubectl, kubeconfig, ['delete', 'endpoints', 'kubernetes', '-n', 'default', '--ignore-not-found']);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`the kubernetes Service's endpoint stayed ${seen || 'absent'}, not ${address}:${port}`);
}
