// Debian's Prometheus for the tests: a temporary config and data directory, listening on a loopback
// port, scraping one test plane's kubelet (/metrics and /metrics/cadvisor) every 2 s over https
// with a client certificate of its own (signed by the plane's CA, allowed nodes/metrics by RBAC, as
// a cluster's Prometheus is), trusting the kubelet's self-signed serving certificate. `instance` is
// the node's name, as Prometheus' kubernetes_sd role `node` sets it. Stopped at teardown.
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlaneHandle } from '../../src/controlplane/controlplane.js';
import { ensureClientCert } from '../../src/controlplane/pki.js';
import { freePort } from '../../src/controlplane/ports.js';
import { kubectl, TEST_DIR } from './clusters.js';
import { eventually } from './eventually.js';

export interface TestPrometheus {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Resolves with the result of an instant query (Prometheus' `data.result`). */
  query(promql: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

const IDENTITY = 'kiteline-test-prometheus';

/** Lets the test Prometheus' identity read the kubelet's metrics (what a cluster's Prometheus is granted). */
function grantMetrics(plane: ControlPlaneHandle): void {
  const manifest = {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: IDENTITY },
        rules: [{ apiGroups: [''], resources: ['nodes/metrics'], verbs: ['get'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: IDENTITY },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: IDENTITY },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: IDENTITY }],
      },
    ],
  };
  const res = kubectl(plane.kubeconfigPath, ['apply', '-f', '-'], JSON.stringify(manifest));
  if (res.status !== 0) throw new Error(`granting Prometheus the kubelet's metrics failed: ${res.stderr}`);
}

/** The node's InternalIP and kubelet port. */
function kubeletEndpoint(plane: ControlPlaneHandle, node: string): string {
  const res = kubectl(plane.kubeconfigPath, ['get', 'node', node, '-o', 'json']);
  if (res.status !== 0) throw new Error(`reading node ${node} failed: ${res.stderr}`);
  const object = JSON.parse(res.stdout) as {
    status: {
      addresses: Array<{ type: string; address: string }>;
      daemonEndpoints: { kubeletEndpoint: { Port: number } };
    };
  };
  const ip = object.status.addresses.find((a) => a.type === 'InternalIP')!.address;
  return `${ip}:${object.status.daemonEndpoints.kubeletEndpoint.Port}`;
}

/** Starts Prometheus scraping the plane's node; resolves once cAdvisor's pod series are in. */
export async function startPrometheus(t: Teardown, plane: ControlPlaneHandle): Promise<TestPrometheus> {
  const node = plane.node?.name;
  if (!node) throw new Error(`plane ${plane.name} has no node to scrape`);
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-prometheus-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const ca = { cert: join(plane.dir, 'pki', 'ca.crt'), key: join(plane.dir, 'pki', 'ca.key') };
  const client = ensureClientCert(dir, ca, 'client', { user: IDENTITY });
  grantMetrics(plane);

  const tls = {
    // The kubelet's self-signed serving certificate file holds its own CA too.
    ca_file: join(plane.dir, 'node', 'kubelet', 'pki', 'kubelet.crt'),
    server_name: node,
    cert_file: client.cert,
    key_file: client.key,
  };
  const target = { targets: [kubeletEndpoint(plane, node)], labels: { node } };
  const job = (name: string, path: string) => ({
    job_name: name,
    scheme: 'https',
    metrics_path: path,
    tls_config: tls,
    static_configs: [target],
    relabel_configs: [{ target_label: 'instance', replacement: node }],
  });
  const config = {
    global: { scrape_interval: '2s', scrape_timeout: '2s', evaluation_interval: '2s' },
    scrape_configs: [job('kubelet', '/metrics'), job('cadvisor', '/metrics/cadvisor')],
  };
  const configFile = join(dir, 'prometheus.yml');
  writeFileSync(configFile, JSON.stringify(config, null, 2)); // JSON is YAML
  const data = join(dir, 'data');
  mkdirSync(data);

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  mkdirSync(join(TEST_DIR, 'logs'), { recursive: true });
  const out = openSync(join(TEST_DIR, 'logs', `prometheus-${port}.txt`), 'a');
  const child = spawn(
    'prometheus',
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${data}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', out, out] },
  );
  closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });

  const query = async (promql: string) => {
    const res = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: promql }).toString()}`);
    if (res.status !== 200) throw new Error(`Prometheus answered ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { data: { result: Awaited<ReturnType<TestPrometheus['query']>> } }).data.result;
  };
  await eventually(
    'Prometheus to be ready',
    async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}`);
      return fetch(`${url}/-/ready`).then(
        (res) => res.ok,
        () => false,
      );
    },
    60_000,
    200,
  );
  await eventually(
    "both kubelet targets up and cAdvisor's pod series scraped",
    async () =>
      (await query('up == 1')).length === 2 &&
      (await query('container_cpu_usage_seconds_total{pod!="",namespace!=""}')).length > 0,
    120_000,
    500,
  );
  return { url, query };
}
