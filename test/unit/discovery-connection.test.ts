// A warm connection against local sockets (no API server needed): a server that accepts TCP but
// never completes TLS gives a 502 after the connect timeout instead of a hang; a refused port gives
// 502 at once; an aborted request rejects; the cluster's Authorization replaces a caller's.
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
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

function connection(server: string, token = 'cluster-token') {
  const conn = new WarmConnection(meta, {
    target: targetFromCredentials({ server, insecureSkipTlsVerify: false, token }),
    connectTimeoutMs: 300,
    probeIntervalMs: 1000,
    coalesceReads: true,
    writeTurns: true,
    callerLimits: { watches: 100, requests: 64 },
    log,
  });
  t.teardown(() => conn.close());
  return conn;
}

async function listen(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as AddressInfo).port;
}

t.test('a TLS handshake that never completes: 502 after the connect timeout', async (t) => {
  const sockets: Socket[] = [];
  const silent = createServer((s) => void sockets.push(s));
  const port = await listen(silent);
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  const err = await connection(`https://127.0.0.1:${port}`)
    .request({ method: 'GET', path: '/version' })
    .then(
      () => undefined,
      (e) => e,
    );
  t.equal(err?.status, 502);
  t.match(err?.message, /did not accept a connection within 300 ms/);
});

t.test('a refused connection: 502; the probe reports it', async (t) => {
  const probe = createServer();
  const port = await listen(probe);
  await new Promise<void>((r) => probe.close(() => r()));
  const conn = connection(`https://127.0.0.1:${port}`);
  const err = await conn.request({ method: 'GET', path: '/version' }).then(
    () => undefined,
    (e) => e,
  );
  t.equal(err?.status, 502);
  t.match(err?.message, /unreachable/);
  const health = await conn.probe();
  t.equal(health.ready, false);
  t.equal(conn.ready, false);
  t.match(conn.lastError, /unreachable/);
});

t.test('plain http: the cluster token replaces a caller-provided Authorization; abort works', async (t) => {
  const seen: (string | undefined)[] = [];
  const urls: (string | undefined)[] = [];
  const server = createHttpServer((req, res) => {
    seen.push(req.headers.authorization);
    urls.push(req.url);
    if (req.url === '/prefix/slow') return; // never answers
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ gitVersion: 'v9.9.9' }));
  });
  const port = await listen(server);
  t.teardown(() => server.closeAllConnections());
  const conn = connection(`http://127.0.0.1:${port}/prefix`);
  const res = await conn.request({ method: 'GET', path: '/version', headers: { Authorization: 'Bearer forged' } });
  t.equal(res.statusCode, 200);
  res.resume();
  t.same(seen, ['Bearer cluster-token']);
  t.same(urls, ['/prefix/version'], 'the server URL path prefix is kept');
  const controller = new AbortController();
  const pending = conn.request({ method: 'GET', path: '/slow', signal: controller.signal });
  setTimeout(() => controller.abort(), 50);
  const err = await pending.then(
    () => undefined,
    (e) => e,
  );
  t.equal(err?.name, 'AbortError', 'an aborted request rejects with AbortError');
});
