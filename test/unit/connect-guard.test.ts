// A warm connection's sockets resolve through the guard (issue 32 point 6), against local sockets:
// a server name that resolves to a link-local or metadata address fails the request, the probe and
// an upgrade (exec, attach, port-forward) before any byte is sent, with the reason; a name that
// resolves to loopback works, so the guard is really on the path. The resolver is a table (no
// name resolves to 169.254.169.254 on a test machine); the guard wraps it as it wraps DNS.
import dns from 'node:dns';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import t from 'tap';
import { WarmConnection } from '../../src/clusters/connection.js';
import { targetFromCredentials } from '../../src/clusters/target.js';
import { createLogger } from '../../src/log.js';

const log = createLogger('silent');
const meta = {
  objectName: 'cluster-x',
  id: 1,
  name: 'x',
  enabled: true,
  impersonate: false,
  prometheusURL: '',
  production: false,
  isDefault: true,
  defaultSince: 0,
  inCluster: false,
};

const TABLE: Record<string, string> = {
  'metadata.test': '169.254.169.254',
  'mapped.test': '::ffff:169.254.169.254',
  'loopback.test': '127.0.0.1',
};
const tableLookup = ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
  const address = TABLE[hostname];
  if (address === undefined) return dns.lookup(hostname, options, callback as never);
  const family = address.includes(':') ? 6 : 4;
  if (options.all) callback(null, [{ address, family }]);
  else callback(null, address, family);
}) as LookupFunction;

/** A listener on loopback that records what reaches it (for the names that resolve there). */
const seen: Array<{ url: string | undefined; authorization: string | undefined }> = [];
const listener = createServer((req: IncomingMessage, res) => {
  seen.push({ url: req.url, authorization: req.headers.authorization });
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ gitVersion: 'v1.35.4' }));
});
listener.on('upgrade', (req: IncomingMessage, socket) => {
  seen.push({ url: req.url, authorization: req.headers.authorization });
  socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
});
await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
t.teardown(() => new Promise<void>((r) => listener.close(() => r())));
const port = (listener.address() as AddressInfo).port;

function connection(host: string) {
  const conn = new WarmConnection(meta, {
    target: targetFromCredentials({
      server: `http://${host}:${port}`,
      insecureSkipTlsVerify: false,
      token: 'cluster-token',
    }),
    connectTimeoutMs: 2000,
    probeIntervalMs: 1000,
    coalesceReads: true,
    writeTurns: true,
    callerLimits: { watches: 100, requests: 64 },
    lookup: tableLookup,
    log,
  });
  t.teardown(() => conn.close());
  return conn;
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: Error & { status?: number }) => e,
  );

t.test('a name resolving to a refused address: request, probe and upgrade fail with the reason', async (t) => {
  seen.length = 0;
  for (const host of ['metadata.test', 'mapped.test']) {
    const conn = connection(host);
    const err = await failure(conn.request({ method: 'GET', path: '/api' }));
    t.equal(err?.status, 502, `${host}: request 502`);
    t.match(err?.message, new RegExp(`${host.replace('.', '\\.')} resolves to \\S+, a link-local or cloud metadata`));
    const health = await conn.probe();
    t.equal(health.ready, false, `${host}: not ready`);
    t.match(health.error, /resolves to .*link-local or cloud metadata/, `${host}: the probe says why`);
    const upgrade = await failure(
      conn.upgrade({
        method: 'GET',
        path: '/api/v1/namespaces/default/pods/p/exec?command=sh',
        headers: { connection: 'Upgrade', upgrade: 'websocket' },
      }),
    );
    t.equal(upgrade?.status, 502, `${host}: upgrade 502`);
    t.match(upgrade?.message, /resolves to .*link-local or cloud metadata/, `${host}: the upgrade says why`);
  }
  t.same(seen, [], 'nothing was sent anywhere');
});

t.test('a name resolving to loopback: request, probe and upgrade reach it', async (t) => {
  seen.length = 0;
  const conn = connection('loopback.test');
  const res = await conn.request({ method: 'GET', path: '/api' });
  res.resume();
  t.equal(res.statusCode, 200);
  t.equal((await conn.probe()).ready, true);
  const answer = await conn.upgrade({
    method: 'GET',
    path: '/api/v1/namespaces/default/pods/p/exec?command=sh',
    headers: { connection: 'Upgrade', upgrade: 'websocket' },
  });
  answer.socket.destroy();
  t.equal(answer.statusCode, 403, 'the upgrade reached the listener (which refuses it)');
  t.ok(seen.length >= 3, 'the request, the probe and the upgrade arrived');
  t.ok(
    seen.every((s) => s.authorization === 'Bearer cluster-token'),
    "with the cluster's credential",
  );
});
