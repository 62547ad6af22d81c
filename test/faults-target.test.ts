// Fault tests on a target cluster of the test's own (.kiteline/test/fault-target): killed with
// SIGKILL and restarted while traffic runs (fast 502/503 while down, served again after, the shared
// target-a unaffected), and 1,000 watch clients that vanish (every upstream watch is closed, no
// socket is left behind).
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { eventually } from './helpers/eventually.js';
import {
  callWithin,
  faultControlPlane,
  killControlPlane,
  openSockets,
  restartControlPlane,
  apiserverLongRunning,
  sleep,
} from './helpers/faults.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { uniqueName } from './helpers/clusters.js';
import { startGateway } from './helpers/gateway.js';

const target = await faultControlPlane(t, 'fault-target');
// The default probe interval (5 s, backing off to 30 s while the cluster is down): requests for the
// not-ready cluster trigger probes of their own, so it is served again within seconds of its return.
const gw = await startGateway(t, { logName: 'faults-target', env: { KITELINE_CONNECT_TIMEOUT_MS: '2000' } });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'alpha', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'fault', config: readFileSync(target.kubeconfigPath, 'utf8') });
const on = (cluster: string) => ({ headers: { ...admin.headers, 'x-cluster-name': cluster } });

/** The watches the test opens (the controller manager's own watches are cluster-scoped). */
const GATEWAY_WATCHES = { verb: 'WATCH', resource: 'configmaps', scope: 'namespace' };

type Phase = 'up' | 'down' | 'restarting' | 'restarted';
interface Sample {
  cluster: string;
  phase: Phase;
  status: number;
  text: string;
}

t.test(
  'a target killed mid-traffic: fast 502/503 while down, served again after restart, others unaffected',
  async (t) => {
    let phase: Phase = 'up';
    let running = true;
    const samples: Sample[] = [];
    const loop = async (cluster: string) => {
      while (running) {
        const started = phase;
        const res = await callWithin(gw.url, 'GET', '/api/v1/configmaps/kube-system', on(cluster), 10_000);
        samples.push({ cluster, phase: started, status: res.status, text: res.text.slice(0, 300) });
        await sleep(50);
      }
    };
    const loops = [loop('alpha'), loop('fault')];
    const served = (cluster: string, p: Phase) =>
      samples.filter((s) => s.cluster === cluster && s.phase === p && s.status === 200).length;

    await eventually(
      'traffic to both clusters',
      () => served('fault', 'up') >= 3 && served('alpha', 'up') >= 3,
      30_000,
    );
    await killControlPlane(target);
    phase = 'down';
    await eventually(
      'requests to the dead cluster to fail',
      () => samples.filter((s) => s.cluster === 'fault' && s.phase === 'down').length >= 10,
      60_000,
    );
    phase = 'restarting';
    await restartControlPlane(target);
    phase = 'restarted';
    // Within seconds: without the on-demand probe the backed-off probe could wait up to 30 s.
    await eventually('the restarted cluster to be served again', () => served('fault', 'restarted') >= 3, 15_000, 100);
    await eventually('more traffic to the other cluster', () => served('alpha', 'restarted') >= 3, 30_000);
    running = false;
    await Promise.all(loops);

    const down = samples.filter((s) => s.cluster === 'fault' && s.phase === 'down');
    t.ok(down.length >= 10, `${down.length} requests while the cluster was down`);
    t.same(
      down.filter((s) => s.status !== 502 && s.status !== 503),
      [],
      'every one answered 502 or 503, none hung',
    );
    const alpha = samples.filter((s) => s.cluster === 'alpha');
    t.same(
      alpha.filter((s) => s.status !== 200),
      [],
      `the other cluster answered all ${alpha.length} requests`,
    );
    t.same(
      samples.filter((s) => s.status === 0 || s.status === 500),
      [],
      'no request hung and none failed with 500',
    );
    const badBody = down.find(
      (s) => !/"reason":"(BadGateway|ServiceUnavailable)"/.test(s.text) || !/fault/.test(s.text),
    );
    t.notOk(badBody, 'the error bodies name the cluster and the reason');

    const write = await callWithin(gw.url, 'POST', '/api/v1/configmaps/default', {
      ...on('fault'),
      body: { metadata: { name: uniqueName('after-restart') }, data: { a: '1' } },
    });
    t.equal(write.status, 201, `writes work after the restart: ${write.text.slice(0, 200)}`);
  },
);

/** Opens a watch through the gateway; `untilHeaders` waits for the answer's head before vanishing. */
function vanishingWatch(untilHeaders: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const url = new URL('/api/v1/configmaps/default?watch=true', gw.url);
    const req = request(url, { headers: on('fault').headers, agent: false });
    req.on('error', (err) =>
      (err as NodeJS.ErrnoException).code === 'ECONNRESET' || req.destroyed ? resolve(0) : reject(err),
    );
    if (untilHeaders) {
      req.on('response', (res) => {
        resolve(res.statusCode ?? 0);
        res.socket.destroy();
      });
    } else {
      req.on('socket', (socket) =>
        socket.once('connect', () =>
          setImmediate(() => {
            req.destroy();
            resolve(0);
          }),
        ),
      );
    }
    req.end();
  });
}

/** Opens n watches and holds them until the returned close function is called. */
async function heldWatches(n: number): Promise<() => void> {
  const sockets: Array<{ destroy(): void }> = [];
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve, reject) => {
          const req = request(new URL('/api/v1/configmaps/default?watch=true', gw.url), {
            headers: on('fault').headers,
            agent: false,
          });
          req.on('response', (res) => {
            if (res.statusCode !== 200) reject(new Error(`watch answered ${res.statusCode}`));
            sockets.push(res.socket);
            resolve();
          });
          req.on('error', () => undefined);
          req.end();
        }),
    ),
  );
  return () => sockets.forEach((s) => s.destroy());
}

t.test('1,000 watch clients that vanish leave no upstream watch and no socket behind', async (t) => {
  // Settle: no request of the previous test is still in flight.
  await eventually(
    'the fault cluster to be served',
    async () => (await callWithin(gw.url, 'GET', '/api/v1/configmaps/default', on('fault'))).status === 200,
    60_000,
    200,
  );
  const baselineWatches = await apiserverLongRunning(target, GATEWAY_WATCHES);
  const baselineSockets = openSockets();

  // The measure works: watches held open through the gateway show up on the API server.
  const closeHeld = await heldWatches(50);
  const held = await eventually(
    'the held watches upstream',
    async () => {
      const n = await apiserverLongRunning(target, GATEWAY_WATCHES);
      return n >= baselineWatches + 50 ? n : undefined;
    },
    30_000,
    200,
  );
  t.ok(held >= baselineWatches + 50, `50 open watches counted upstream (${baselineWatches} -> ${held})`);
  closeHeld();

  const backToBaseline = async (what: string) => {
    const n = await eventually(
      `the upstream watches to close (${what})`,
      async () => {
        const now = await apiserverLongRunning(target, GATEWAY_WATCHES);
        return now <= baselineWatches ? now : undefined;
      },
      60_000,
      500,
    ).catch(async () => apiserverLongRunning(target, GATEWAY_WATCHES));
    t.ok(n <= baselineWatches, `${what}: upstream watches back to the baseline (${baselineWatches}, now ${n})`);
  };
  const statuses: number[] = [];
  const batch = 50;
  // 500 vanish once the watch answered, 500 right after connecting (before any answer).
  for (const untilHeaders of [true, false]) {
    for (let i = 0; i < 500; i += batch) {
      statuses.push(...(await Promise.all(Array.from({ length: batch }, () => vanishingWatch(untilHeaders)))));
    }
    await backToBaseline(untilHeaders ? 'clients gone once watching' : 'clients gone before an answer');
  }
  t.equal(statuses.length, 1000, '1,000 clients came and went');
  t.same(
    statuses.filter((s) => s !== 200 && s !== 0),
    [],
    'every watch that answered answered 200',
  );
  t.ok(statuses.filter((s) => s === 200).length >= 500, 'at least half of them were watching');

  const sockets = await eventually(
    'the sockets to close',
    () => {
      const n = openSockets();
      return n <= baselineSockets + 5 ? n : undefined;
    },
    60_000,
    500,
  );
  t.ok(sockets <= baselineSockets + 5, `open sockets back to the baseline (${baselineSockets}, now ${sockets})`);

  const res = await callWithin(gw.url, 'GET', '/api/v1/configmaps/default', on('fault'));
  t.equal(res.status, 200, 'the cluster still serves');
});
