// `make soak`: a long mixed-traffic run against a real gateway process, to find leaks and rare
// errors (not in CI). Starts its own host and target control planes in .kiteline/soak, runs
// `kiteline serve` as a child process, bootstraps it over HTTP the way a user does, then runs
// SOAK_WORKERS (default 8) loops of mixed requests (gets, lists, creates/patches/deletes, watches
// opened and dropped, admin reads, logins): a warm-up (SOAK_WARMUP_SECONDS, default SOAK_SECONDS/10
// up to 15) that is not counted, then SOAK_SECONDS (default 300) that are. Prints requests by
// kind, every unexpected answer, the gateway's RSS (start/end/peak/growth) and its open sockets
// (start/end); exits 1 when any request failed.
import { mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { PACKAGE_ROOT } from '../src/config.js';
import { startControlPlane, stopControlPlane } from '../src/controlplane/controlplane.js';
import { openSockets, processStats, startGateway, waitHttpOk } from './children.js';
import { ADMIN, bootstrapAdmin, registerCluster } from './gateway-setup.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 8);
const WARMUP_SECONDS = Number(process.env.SOAK_WARMUP_SECONDS ?? Math.min(15, Math.ceil(SECONDS / 10)));
const DIR = resolve(PACKAGE_ROOT, '.kiteline', 'soak');

interface Answer {
  status: number;
  text: string;
  headers: Headers;
}

async function call(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
  contentType = 'application/json',
): Promise<Answer> {
  try {
    const res = await fetch(base + path, {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-type': contentType },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, text: await res.text(), headers: res.headers };
  } catch (err) {
    return { status: 0, text: `no answer: ${(err as Error).message}`, headers: new Headers() };
  }
}

// ---- what we measure of the gateway process ----

const rssBytes = (pid: number) => processStats(pid).rssMiB * 1024 * 1024;

// ---- traffic ----

interface KindStats {
  count: number;
  errors: number;
  totalMs: number;
  maxMs: number;
}

const stats = new Map<string, KindStats>();
const failures = new Map<string, number>();

function record(kind: string, startedAt: number, ok: boolean, detail: string): void {
  const ms = Date.now() - startedAt;
  const s = stats.get(kind) ?? { count: 0, errors: 0, totalMs: 0, maxMs: 0 };
  s.count++;
  s.totalMs += ms;
  s.maxMs = Math.max(s.maxMs, ms);
  if (!ok) {
    s.errors++;
    const key = `${kind}: ${detail}`;
    failures.set(key, (failures.get(key) ?? 0) + 1);
  }
  stats.set(kind, s);
}

/** Opens a watch, reads it for a moment, then drops the connection. */
function watchAndDrop(
  base: string,
  headers: Record<string, string>,
  holdMs: number,
): Promise<{ ok: boolean; detail: string }> {
  return new Promise((resolvePromise) => {
    const req = request(new URL('/api/v1/configmaps/default?watch=true', base), { headers, agent: false });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return resolvePromise({ ok: false, detail: `status ${res.statusCode}` });
      }
      res.resume();
      setTimeout(() => {
        res.socket.destroy();
        resolvePromise({ ok: true, detail: '' });
      }, holdMs);
    });
    req.on('error', (err) => resolvePromise({ ok: false, detail: err.message }));
    req.end();
  });
}

type Step = (worker: number, i: number) => Promise<void>;

function traffic(base: string, key: string): Array<[string, number, Step]> {
  const auth = { authorization: key, 'x-cluster-name': 'target' };
  const timed = async (kind: string, run: () => Promise<Answer>, okStatuses: number[]) => {
    const started = Date.now();
    const res = await run();
    record(kind, started, okStatuses.includes(res.status), `${res.status} ${res.text.slice(0, 160)}`);
    return res;
  };
  // [kind, weight, step]
  return [
    [
      'get',
      20,
      async (w) =>
        void (await timed('get', () => call(base, 'GET', `/api/v1/configmaps/default/soak-seed-${w}`, auth), [200])),
    ],
    [
      'list',
      15,
      async () =>
        void (await timed('list', () => call(base, 'GET', '/api/v1/configmaps/default?limit=50', auth), [200])),
    ],
    [
      'write',
      15,
      async (w, i) => {
        const name = `soak-${w}-${i}-${Date.now().toString(36)}`;
        await timed(
          'create',
          () => call(base, 'POST', '/api/v1/configmaps/default', auth, { metadata: { name }, data: { n: String(i) } }),
          [201],
        );
        await timed(
          'patch',
          () =>
            call(
              base,
              'PATCH',
              `/api/v1/configmaps/default/${name}`,
              auth,
              { data: { patched: 'yes' } },
              'application/merge-patch+json',
            ),
          [200],
        );
        await timed(
          'delete',
          () => call(base, 'DELETE', `/api/v1/configmaps/default/${name}?wait=false`, auth),
          [200, 202],
        );
      },
    ],
    [
      'watch',
      5,
      async () => {
        const started = Date.now();
        const res = await watchAndDrop(base, auth, 200 + Math.floor(Math.random() * 800));
        record('watch', started, res.ok, res.detail);
      },
    ],
    [
      'admin',
      10,
      async (_w, i) => {
        const path = [
          '/api/v1/admin/users/',
          '/api/v1/admin/roles/',
          '/api/v1/admin/apikeys/',
          '/api/v1/clusters',
          '/api/v1/overview',
        ][i % 5];
        await timed('admin', () => call(base, 'GET', path, auth), [200]);
      },
    ],
    [
      'login',
      2,
      async () => void (await timed('login', () => call(base, 'POST', '/api/auth/login/password', {}, ADMIN), [204])),
    ],
  ];
}

async function worker(id: number, steps: Array<[string, number, Step]>, deadline: number): Promise<void> {
  const total = steps.reduce((sum, [, weight]) => sum + weight, 0);
  for (let i = 0; Date.now() < deadline; i++) {
    let pick = Math.random() * total;
    const step = steps.find(([, weight]) => (pick -= weight) < 0) ?? steps[0];
    await step[2](id, i);
  }
}

// ---- main ----

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

async function main(): Promise<void> {
  mkdirSync(DIR, { recursive: true });
  process.stdout.write(`soak: ${SECONDS} s, ${WORKERS} workers; control planes in ${DIR}\n`);
  const [host, target] = await Promise.all([
    startControlPlane({ dir: join(DIR, 'host'), name: 'soak-host' }),
    startControlPlane({ dir: join(DIR, 'target'), name: 'soak-target' }),
  ]);
  const gateway = await startGateway({
    kubeconfig: host.kubeconfigPath,
    namespace: `kl-soak-${randomBytes(3).toString('hex')}`,
    logDir: DIR,
    logLevel: 'warn',
    nodeArgs: [],
  });
  const base = gateway.url;
  try {
    await waitHttpOk(gateway.process, `${base}/healthz`, 60_000);
    const key = await bootstrapAdmin(base);
    await registerCluster(base, key, 'target', readFileSync(target.kubeconfigPath, 'utf8'));
    for (let w = 0; w < WORKERS; w++) {
      const res = await call(
        base,
        'POST',
        '/api/v1/configmaps/default',
        { authorization: key, 'x-cluster-name': 'target' },
        { metadata: { name: `soak-seed-${w}` }, data: { w: String(w) } },
      );
      if (res.status !== 201 && res.status !== 409)
        throw new Error(`seed config map: expected 201, got ${res.status} ${res.text.slice(0, 300)}`);
    }

    const pid = gateway.process.pid!;
    const steps = traffic(base, key);
    // Warm-up (JIT, pools, caches) before the baseline, so growth means growth; not counted.
    await Promise.all(
      Array.from({ length: WORKERS }, (_, id) => worker(id, steps, Date.now() + WARMUP_SECONDS * 1000)),
    );
    stats.clear();
    failures.clear();
    const start = { rss: rssBytes(pid), sockets: openSockets(pid) };
    let peak = start.rss;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 1000);
    const progress = setInterval(() => {
      const done = [...stats.values()].reduce((s, k) => s + k.count, 0);
      process.stdout.write(`  ${done} requests, RSS ${mib(rssBytes(pid))}, sockets ${openSockets(pid)}\n`);
    }, 30_000);
    const deadline = Date.now() + SECONDS * 1000;
    await Promise.all(Array.from({ length: WORKERS }, (_, id) => worker(id, steps, deadline)));
    clearInterval(sampler);
    clearInterval(progress);
    await new Promise((r) => setTimeout(r, 3000)); // let dropped watches and idle sockets close
    const end = { rss: rssBytes(pid), sockets: openSockets(pid) };
    peak = Math.max(peak, end.rss);

    const lines = [`\nsoak report (${SECONDS} s, ${WORKERS} workers)`, 'kind       requests  errors  mean ms  max ms'];
    for (const [kind, s] of [...stats].sort()) {
      const meanMs = (s.totalMs / s.count).toFixed(1);
      lines.push(
        `${kind.padEnd(10)} ${String(s.count).padStart(8)} ${String(s.errors).padStart(7)} ` +
          `${meanMs.padStart(8)} ${String(s.maxMs).padStart(7)}`,
      );
    }
    const errors = [...stats.values()].reduce((sum, s) => sum + s.errors, 0);
    lines.push(`errors: ${errors}`);
    for (const [detail, n] of failures) lines.push(`  ${n} x ${detail}`);
    const growth = mib(end.rss - start.rss);
    lines.push(`gateway RSS: start ${mib(start.rss)}, end ${mib(end.rss)}, peak ${mib(peak)}, growth ${growth}`);
    lines.push(`gateway open sockets: start ${start.sockets}, end ${end.sockets}`);
    process.stdout.write(lines.join('\n') + '\n');
    process.exitCode = errors > 0 ? 1 : 0;
  } finally {
    await gateway.stop();
    await Promise.all([stopControlPlane(join(DIR, 'host')), stopControlPlane(join(DIR, 'target'))]);
  }
}

main().catch((err) => {
  process.stderr.write(`soak failed: ${(err as Error).message}\n`);
  process.exit(1);
});
