// Issue 13 point 5: one reader cannot exhaust a cluster's connections. One API key opens more
// watches than the cluster's request pool holds (256 connections); the key gets 429 with
// Retry-After beyond its limit, while another user's GET and the cluster's health probe still
// answer at once. And requests in flight are limited per caller too (a gateway with a limit of 1).
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import t, { type Test } from 'tap';
import type { WarmConnection } from '../src/clusters/connection.js';
import { within } from '../src/clusters/within.js';
import { testControlPlane } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, testKubeconfig, type Caller } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';

const CLUSTER = 'limits';
/** More than the 256 connections of a cluster's request pool, which watches used to share. */
const WATCHES = 300;
/** How long an answer may take before it counts as stuck. */
const ANSWER_WITHIN_MS = 5000;
/** How long the watches may take to open (hundreds of TLS connections on a busy machine). */
const WATCHES_OPEN_WITHIN_MS = 30_000;

let gw: TestGateway;
let admin: Caller;

t.before(async () => {
  await testControlPlane('target-a');
  gw = await startGateway(t);
  admin = await bootstrapAdmin(gw);
  await addReadyCluster(gw, admin, { name: CLUSTER, config: testKubeconfig('target-a') });
});

interface WatchAnswer {
  status: number;
  retryAfter: string | undefined;
}

/** Opens a watch and keeps it open until the test ends; status 0 when it did not open in time. */
function openWatch(t: Test, caller: Caller): Promise<WatchAnswer> {
  return new Promise((resolve) => {
    const req = request(new URL('/api/v1/configmaps/default?watch=true', gw.url), { headers: { ...caller.headers, 'x-cluster-name': CLUSTER }, agent: false });
    const timer = setTimeout(() => resolve({ status: 0, retryAfter: undefined }), WATCHES_OPEN_WITHIN_MS);
    req.on('response', (res) => {
      clearTimeout(timer);
      resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] });
      if (res.statusCode !== 200) res.resume();
    });
    req.on('error', () => undefined);
    req.end();
    t.teardown(() => req.destroy());
  });
}

t.test('one key opening more watches than the pool holds: 429 beyond its limit; others and the probe still answer', async (t) => {
  const reader = await apiKeyWithRoles(gw, admin, 'greedy-reader', ['viewer']);
  const other = await apiKeyWithRoles(gw, admin, 'other-user', ['viewer']);
  const limit = gw.config.maxWatchesPerPrincipal;
  t.ok(limit < WATCHES, `the default watch limit (${limit}) is below the ${WATCHES} watches opened`);

  const answers = await Promise.all(Array.from({ length: WATCHES }, () => openWatch(t, reader)));
  const watching = answers.filter((a) => a.status === 200).length;
  const refused = answers.filter((a) => a.status === 429);
  t.equal(watching, limit, `the key holds as many watches as its limit (${watching} of ${WATCHES})`);
  t.equal(refused.length, WATCHES - limit, 'every watch beyond the limit: 429 at once');
  t.ok(refused.every((a) => Number(a.retryAfter) > 0), 'each 429 carries Retry-After');

  const started = Date.now();
  const get = await call(gw.url, 'GET', '/api/v1/configmaps/default', { headers: { ...other.headers, 'x-cluster-name': CLUSTER }, signal: AbortSignal.timeout(ANSWER_WITHIN_MS) }).catch(() => undefined);
  t.equal(get?.status, 200, `another user's GET answers (${Date.now() - started} ms)`);
  const readerGet = await call(gw.url, 'GET', '/api/v1/configmaps/default', { headers: { ...reader.headers, 'x-cluster-name': CLUSTER }, signal: AbortSignal.timeout(ANSWER_WITHIN_MS) }).catch(() => undefined);
  t.equal(readerGet?.status, 200, "the watching key's own GETs still answer too");

  const conn = gw.services.clusters.get(CLUSTER) as WarmConnection;
  const health = await within(conn.probe(), ANSWER_WITHIN_MS);
  t.match(health, { ready: true, error: '' }, 'the health probe answers on its own connection');
});

t.test('requests in flight are limited per caller: 429 with Retry-After beyond it, other callers unaffected', async (t) => {
  const strict = await startGateway(t, { namespace: gw.namespace, env: { KITELINE_MAX_REQUESTS_PER_PRINCIPAL: '1' } });
  const busy = await apiKeyWithRoles(gw, admin, 'busy-reader', ['viewer']);
  const calm = await apiKeyWithRoles(gw, admin, 'calm-reader', ['viewer']);
  const list = (caller: Caller) => call(strict.url, 'GET', '/api/v1/configmaps/default', { headers: { ...caller.headers, 'x-cluster-name': CLUSTER } });
  // The keys reach this replica through its cache; the cluster is connected and discovered here.
  await eventually('both keys on the strict replica', async () => (await list(calm)).status === 200 && (await list(busy)).status === 200);
  const burst = await simultaneous(strict.url, 20, '/api/v1/configmaps/default', { ...busy.headers, 'x-cluster-name': CLUSTER });
  const tooMany = burst.filter((r) => r.status === 429);
  t.ok(tooMany.length > 0, `a burst of 20 with a limit of 1: ${tooMany.length} answered 429`);
  t.same(burst.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status), [], 'the others answered 200');
  t.match(JSON.parse(tooMany[0]?.body ?? '{}'), { reason: 'TooManyRequests', code: 429, error: /at most 1 per caller/ }, 'the 429 says why');
  t.ok(tooMany.every((r) => Number(r.retryAfter) > 0), 'each 429 carries Retry-After');
  t.equal((await list(calm)).status, 200, 'another caller is served');
  t.equal((await list(busy)).status, 200, 'the busy caller is served again once its requests are done');
});

/**
 * Sends `count` GETs that reach the gateway at the same moment: every connection is open before
 * any request is written, and all are written in one go (a client's own connection set-up would
 * otherwise spread them out, and on an idle machine each could finish before the next arrives).
 */
async function simultaneous(base: string, count: number, path: string, headers: Record<string, string>) {
  const { hostname, port } = new URL(base);
  const sockets = await Promise.all(
    Array.from({ length: count }, () => new Promise<Socket>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => resolve(socket));
      socket.once('error', reject);
    })),
  );
  const head = [`GET ${path} HTTP/1.1`, `host: ${hostname}:${port}`, 'connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n');
  const answers = sockets.map((socket) => new Promise<{ status: number; retryAfter: string | undefined; body: string }>((resolve) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('close', () => {
      const [head = '', body = ''] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1] ?? 0), retryAfter: /^retry-after: *(\S+)/im.exec(head)?.[1], body });
    });
  }));
  for (const socket of sockets) socket.write(head);
  return Promise.all(answers);
}
