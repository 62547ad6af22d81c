// Helm for the tests: the binary scripts/helm/build.sh builds (the version scripts/helm/versions
// names), packaging the fixture chart at a version, pushing it to an OCI registry, and a classic
// chart repository (an index.yaml `helm repo index` wrote, served over http behind Basic auth).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/config.js';
import { freePort } from '../../src/controlplane/ports.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** The fixture chart (test/fixtures/charts/hello). */
export const HELLO_CHART = join(PACKAGE_ROOT, 'test', 'fixtures', 'charts', 'hello');

/** The helm binary of scripts/helm/versions, as scripts/helm/build.sh caches it. */
export function helmBinary(): string {
  const version = /^HELM=(\S+)/m.exec(readFileSync(join(PACKAGE_ROOT, 'scripts', 'helm', 'versions'), 'utf8'))?.[1];
  const cache = process.env.KITELINE_CACHE_DIR ?? join(homedir(), '.cache', 'kiteline');
  return join(cache, 'helm', version ?? 'missing', 'helm');
}

/** Runs helm with a private home; throws with its stderr on failure. */
export function helm(args: string[], env: Record<string, string> = {}): string {
  const home = mkdtempSync(join(tmpdir(), 'kiteline-helm-test-'));
  try {
    const res = spawnSync(helmBinary(), args, {
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        HOME: home,
        HELM_CACHE_HOME: join(home, 'c'),
        HELM_CONFIG_HOME: join(home, 'f'),
        HELM_DATA_HOME: join(home, 'd'),
        ...env,
      },
    });
    if (res.status !== 0) throw new Error(`helm ${args.join(' ')}: ${res.stderr}`);
    return res.stdout;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** The fixture chart packaged at these versions into a fresh folder: its path. */
export function packageCharts(t: Teardown, versions: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-charts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const version of versions) helm(['package', HELLO_CHART, '--version', version, '--destination', dir]);
  return dir;
}

export interface ChartRepo {
  url: string;
  /** Requests that reached it, by path (with whether they carried the right credentials). */
  requests: Array<{ path: string; authorized: boolean }>;
}

/**
 * A classic chart repository over http on loopback: the archives in `dir` and an index.yaml of
 * them, every request behind Basic auth with these credentials (401 without).
 */
export async function startChartRepo(
  t: Teardown,
  dir: string,
  credentials: { username: string; password: string },
): Promise<ChartRepo> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/charts/`;
  helm(['repo', 'index', dir, '--url', url]);
  const expected = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
  const requests: ChartRepo['requests'] = [];
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', url).pathname;
    const authorized = req.headers.authorization === expected;
    requests.push({ path, authorized });
    if (!authorized) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="charts"' }).end();
      return;
    }
    const file = path.replace(/^\/charts\//, '');
    if (!/^[\w.-]+\.(yaml|tgz)$/.test(file)) {
      res.writeHead(404).end();
      return;
    }
    try {
      res.writeHead(200).end(readFileSync(join(dir, file)));
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { url, requests };
}
