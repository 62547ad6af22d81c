// A load loop that runs inside a pod, so that its requests go through kiteline's Service the way
// an in-cluster client's do (kube-proxy picks a ready replica per connection). test/in-cluster.test.ts
// passes this file's compiled text to `node -e` in a pod of kiteline's image (globals only, no
// imports): arguments base URL, API key, the target cluster's name and a namespace there, the
// number of workers. Each answer is one JSON line on stdout (LoadSample); the loop stops when stdin
// closes.
export interface LoadSample {
  /** When the request started (ms since the epoch). */
  t: number;
  kind: 'clusters' | 'read' | 'admin' | 'write';
  /** The HTTP status, or 0 when the request failed without an answer (`error`: the cause; else the answer's start). */
  status: number;
  ms: number;
  error?: string;
}

const [base, key, cluster, namespace, workerCount] = process.argv.slice(1) as [string, string, string, string, string];
const headers = { authorization: key, 'x-cluster-name': cluster };
let running = true;
process.stdin.on('end', () => (running = false));
process.stdin.resume();

async function timed(kind: LoadSample['kind'], path: string, init: RequestInit = {}): Promise<boolean> {
  const t = Date.now();
  let sample: LoadSample;
  try {
    const res = await fetch(base + path, {
      ...init,
      headers: { ...headers, ...init.headers },
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    sample = { t, kind, status: res.status, ms: Date.now() - t };
    if (res.status >= 300) sample.error = text.slice(0, 300);
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    sample = { t, kind, status: 0, ms: Date.now() - t, error: cause?.code ?? cause?.message ?? String(err) };
  }
  process.stdout.write(JSON.stringify(sample) + '\n');
  return sample.status >= 200 && sample.status < 300;
}

/** A mix of what the gateway serves: its cluster list, a target read, an admin read, target writes. */
async function worker(id: number): Promise<void> {
  for (let round = 0; running; round++) {
    await timed('clusters', '/api/v1/clusters');
    await timed('read', `/api/v1/configmaps/${namespace}?limit=5`);
    await timed('admin', '/api/v1/admin/users/');
    const name = `load-${id}-${round}`;
    const created = await timed('write', `/api/v1/configmaps/${namespace}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name }, data: { round: String(round) } }),
    });
    if (created) await timed('write', `/api/v1/configmaps/${namespace}/${name}?wait=false`, { method: 'DELETE' });
  }
}

await Promise.all(Array.from({ length: Number(workerCount) }, (_, id) => worker(id)));
