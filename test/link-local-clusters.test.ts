// Link-local and metadata addresses refused for real (issue 32 point 6), on real control planes:
// every spelling of such an address in a kubeconfig server (IPv4-mapped, NAT64, decimal, octal,
// hex, IPv6 link-local, ...) is a 400 on POST and PUT /api/v1/admin/clusters, never a 500 and
// never stored; and a host name that RESOLVES to one is refused when the gateway connects, so DNS
// (or DNS rebinding) cannot take the gateway there: the cluster shows why it is not connected.
//
// No name resolves to a link-local address on a test machine, and /etc/hosts is not ours to edit:
// the gateway is given a resolver (config.clusterLookup, set only by tests) answering from a table.
// The guard is not part of that resolver: it wraps whatever resolves, as it wraps DNS in production.
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import t from 'tap';
import { parse, stringify } from 'yaml';
import { uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { bootstrapAdmin, registerCluster, testKubeconfig, waitClusterReady } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const ADMIN_PREFIX = '/api/v1/admin/clusters';

/** Names the gateway's resolver answers itself; anything else goes to DNS. */
const TABLE: Record<string, string> = {
  'metadata.kiteline.test': '169.254.169.254',
  'mapped.kiteline.test': '::ffff:169.254.169.254',
  'nat64.kiteline.test': '64:ff9b::a9fe:a9fe',
  'v6-link-local.kiteline.test': 'fe80::1',
  'target-a.kiteline.test': '127.0.0.1',
};
const asked: string[] = [];
const tableLookup = ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
  const address = TABLE[hostname];
  if (address === undefined) return dns.lookup(hostname, options, callback as never);
  asked.push(hostname);
  const family = address.includes(':') ? 6 : 4;
  if (options.all) callback(null, [{ address, family }]);
  else callback(null, address, family);
}) as LookupFunction;

const gw = await startGateway(t, { logName: 'link-local-clusters', config: { clusterLookup: tableLookup } });
const admin = await bootstrapAdmin(gw);

const targetA = parse(testKubeconfig('target-a'));
const targetAServer = new URL(targetA.clusters[0].cluster.server as string);

/** target-a's kubeconfig with another server (and optionally a tls-server-name). */
function kubeconfigWith(server: string, tlsServerName?: string): string {
  const doc = structuredClone(targetA);
  doc.clusters[0].cluster.server = server;
  if (tlsServerName) doc.clusters[0].cluster['tls-server-name'] = tlsServerName;
  return stringify(doc);
}

// A default cluster first, so that the others can be registered and deleted freely.
await registerCluster(gw, admin, { name: 'anchor', config: testKubeconfig('target-b'), isDefault: true });

t.test('every spelling of a link-local or metadata server: 400 on create and update', async (t) => {
  const servers = [
    'https://169.254.169.254',
    'http://2852039166', // decimal
    'http://0xa9fea9fe', // hex
    'http://0251.0376.0251.0376', // octal
    'http://0xa9.0xfe.0xa9.0xfe',
    'http://169.254.43518',
    'http://169.254.169.254.',
    'http://100.100.100.200',
    'https://[::ffff:169.254.169.254]',
    'https://[::ffff:a9fe:a9fe]:6443',
    'https://[::ffff:0:a9fe:a9fe]',
    'https://[::a9fe:a9fe]',
    'https://[64:ff9b::169.254.169.254]',
    'https://[64:ff9b::a9fe:a9fe]',
    'https://[2002:a9fe:a9fe::]',
    'https://[fe80::1]:6443',
    'https://[fd00:ec2::254]',
  ];
  const good = uniqueName('good');
  const goodId = await registerCluster(gw, admin, { name: good, config: testKubeconfig('target-a') });
  for (const server of servers) {
    const name = uniqueName('ll');
    const created = await call(gw.url, 'POST', `${ADMIN_PREFIX}/`, {
      body: { name, config: kubeconfigWith(server) },
      headers: admin.headers,
    });
    t.equal(created.status, 400, `POST ${server}: 400`);
    t.match(created.body, { reason: 'BadRequest', error: /link-local or cloud metadata/ });
    const updated = await call(gw.url, 'PUT', `${ADMIN_PREFIX}/${goodId}`, {
      body: { config: kubeconfigWith(server) },
      headers: admin.headers,
    });
    t.equal(updated.status, 400, `PUT ${server}: 400`);
    const prometheus = await call(gw.url, 'PUT', `${ADMIN_PREFIX}/${goodId}`, {
      body: { prometheusURL: `${server}/prometheus` },
      headers: admin.headers,
    });
    t.equal(prometheus.status, 400, `prometheusURL ${server}: 400`);
  }
  const list = await call<Array<{ name: string }>>(gw.url, 'GET', `${ADMIN_PREFIX}/`, { headers: admin.headers });
  t.same(list.body.map((c) => c.name).sort(), ['anchor', good].sort(), 'nothing was registered by a refused request');
  await waitClusterReady(gw, admin, good);
  t.pass('the updated cluster kept its good kubeconfig');
  await call(gw.url, 'DELETE', `${ADMIN_PREFIX}/${goodId}`, { headers: admin.headers });
});

interface View {
  id: number;
  name: string;
  ready: boolean;
  error: string;
}

async function view(name: string): Promise<View | undefined> {
  const res = await call<View[]>(gw.url, 'GET', `${ADMIN_PREFIX}/`, { headers: admin.headers });
  return res.body.find((c) => c.name === name);
}

t.test('a name that resolves to a refused address: registered, never connected, says why', async (t) => {
  for (const host of ['metadata.kiteline.test', 'mapped.kiteline.test', 'nat64.kiteline.test']) {
    const name = uniqueName('resolves');
    const server = `https://${host}:${targetAServer.port}`;
    const id = await registerCluster(gw, admin, { name, config: kubeconfigWith(server, 'localhost') });
    const shown = await eventually(`${name} to report its error`, async () => {
      const v = await view(name);
      return v && !v.ready && /resolves to/.test(v.error) ? v : undefined;
    });
    t.match(
      shown.error,
      new RegExp(`${host.replace(/\./g, '\\.')} resolves to \\S+, a link-local or cloud metadata address`),
      `${host}: the reason`,
    );
    const through = await call(gw.url, 'GET', '/api/v1/namespaces/_all/default', {
      headers: { ...admin.headers, 'x-cluster-name': name },
    });
    t.equal(through.status, 503, `${host}: requests through it are 503 (not ready)`);
    t.match(through.body.error, /resolves to/);
    await call(gw.url, 'DELETE', `${ADMIN_PREFIX}/${id}`, { headers: admin.headers });
  }
  t.ok(asked.includes('metadata.kiteline.test'), "the gateway resolved the names with the test's resolver");
});

t.test('a name that resolves to an allowed address connects as before', async (t) => {
  const name = uniqueName('named');
  const server = `https://target-a.kiteline.test:${targetAServer.port}`;
  const id = await registerCluster(gw, admin, { name, config: kubeconfigWith(server, 'localhost') });
  await waitClusterReady(gw, admin, name);
  const through = await call(gw.url, 'GET', '/api/v1/namespaces/_all/default', {
    headers: { ...admin.headers, 'x-cluster-name': name },
  });
  t.equal(through.status, 200, 'served through the resolved name');
  t.ok(asked.includes('target-a.kiteline.test'));
  await call(gw.url, 'DELETE', `${ADMIN_PREFIX}/${id}`, { headers: admin.headers });
});
