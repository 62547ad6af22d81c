// Issue 13 point 5: one reader cannot exhaust a cluster's connections. One API key opens more
// watches than the cluster's request pool holds (256 connections); the key gets 429 with
// Retry-After beyond its limit, while another user's GET and the cluster's health probe still
// answer at once. And requests in flight are limited per caller too (a gateway with a limit of 1).
import { request } from 'node:http';
import t, { type Test } from 'tap';
import type { WarmConnection } from '../src/clusters/connection.js';
import { within } from '../src/within.js';
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
    const req = request(new URL('/api/v1/configmaps/default?watch=true', gw.url), {
      headers: { ...caller.headers, 'x-cluster-name': CLUSTER },
      agent: false,
    });
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

t.test(
  'one key opening more watches than the pool holds: 429 beyond its limit; others and the probe still answer',
  async (t) => {
    const reader = await apiKeyWithRoles(gw, admin, 'greedy-reader', ['viewer']);
    const other = await apiKeyWithRoles(gw, admin, 'other-user', ['viewer']);
    const limit = gw.config.maxWatchesPerPrincipal;
    t.ok(limit < WATCHES, `the default watch limit (${limit}) is below the ${WATCHES} watches opened`);

    const answers = await Promise.all(Array.from({ length: WATCHES }, () => openWatch(t, reader)));
    const watching = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    t.equal(watching, limit, `the key holds as many watches as its limit (${watching} of ${WATCHES})`);
    t.equal(refused.length, WATCHES - limit, 'every watch beyond the limit: 429 at once');
    t.ok(
      refused.every((a) => Number(a.retryAfter) > 0),
      'each 429 carries Retry-After',
    );

    const started = Date.now();
    const get = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
      headers: { ...other.headers, 'x-cluster-name': CLUSTER },
      signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
    }).catch(() => undefined);
    t.equal(get?.status, 200, `another user's GET answers (${Date.now() - started} ms)`);
    const readerGet = await call(gw.url, 'GET', '/api/v1/configmaps/default', {
      headers: { ...reader.headers, 'x-cluster-name': CLUSTER },
      signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
    }).catch(() => undefined);
    t.equal(readerGet?.status, 200, "the watching key's own GETs still answer too");

    const conn = gw.services.clusters.get(CLUSTER) as WarmConnection;
    const health = await within(conn.probe(), ANSWER_WITHIN_MS);
    t.match(health, { ready: true, error: '' }, 'the health probe answers on its own connection');
  },
);

t.test(
  'requests in flight are limited per caller: 429 with Retry-After beyond it, other callers unaffected',
  async (t) => {
    const strict = await startGateway(t, {
      namespace: gw.namespace,
      env: { KITELINE_MAX_REQUESTS_PER_PRINCIPAL: '1' },
    });
    const busy = await apiKeyWithRoles(gw, admin, 'busy-reader', ['viewer']);
    const calm = await apiKeyWithRoles(gw, admin, 'calm-reader', ['viewer']);
    const list = (caller: Caller) =>
      call(strict.url, 'GET', '/api/v1/configmaps/default', {
        headers: { ...caller.headers, 'x-cluster-name': CLUSTER },
      });
    // The keys reach this replica through its cache; the cluster is connected and discovered here.
    await eventually(
      'both keys on the strict replica',
      async () => (await list(calm)).status === 200 && (await list(busy)).status === 200,
    );
    // A request the API server holds for about 3 s (a list at a resourceVersion it has not reached:
    // it waits for it, then answers 504) keeps the busy caller's one slot taken.
    const held = call(strict.url, 'GET', '/api/v1/configmaps/default?resourceVersion=999999999', {
      headers: { ...busy.headers, 'x-cluster-name': CLUSTER },
    });
    const refused = await eventually(
      'a second request of the busy caller refused',
      async () => {
        const res = await list(busy);
        return res.status === 429 ? res : undefined;
      },
      10_000,
      20,
    );
    t.match(refused.body, { reason: 'TooManyRequests', code: 429, error: /at most 1 per caller/ }, 'the 429 says why');
    t.ok(Number(refused.headers.get('retry-after')) > 0, 'it carries Retry-After');
    t.equal((await list(calm)).status, 200, 'another caller is served meanwhile');
    t.equal((await held).status, 504, "the held request: the API server's own answer");
    t.equal((await list(busy)).status, 200, 'the busy caller is served again once its requests are done');
  },
);
