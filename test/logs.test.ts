// Issue 18 point 1: logs of real pods on the target-a node through kiteline, Kite's way. A pod
// prints a counter every 0.2 s; the tests read its tail, the last seconds, follow it over
// server-sent events and over the WebSocket (one pod; every pod of a label selector, with a new
// pod joining), read the previous container's log after a restart, and check that the API
// server's log streams end when the client leaves. Then the attacks: the viewer may read logs, a
// namespace-limited role not outside its namespace, nobody kiteline's own namespace on the host
// cluster, an anonymous caller nothing; bad parameters are a 400 before anything goes upstream.
import t from 'tap';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { apiserverLongRunning } from './helpers/faults.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import {
  busyboxPod,
  namespacedKubectl,
  openSse,
  openWs,
  wsRefusal,
  type WsMessage,
} from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const gw = await startGateway(t, { logName: 'logs' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

const ns = uniqueName('logs');
const elsewhere = uniqueName('logs-other');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));

// PID 1 only gets signals it handles: the trap lets `kill 1` end the container (status 3).
const COUNTER = [
  'sh',
  '-c',
  'trap "exit 3" TERM; echo boot $RANDOM$RANDOM; i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done',
];
// One line per run (a fast counter's older lines are rotated away by the node after a while).
const RESTARTER = ['sh', '-c', 'trap "exit 3" TERM; echo boot $RANDOM$RANDOM; while true; do sleep 1; done'];
const pods = [
  busyboxPod('counter', { app: 'counter' }, COUNTER),
  busyboxPod('counter2', { app: 'counter' }, COUNTER),
  busyboxPod('restarter', { app: 'restarter' }, RESTARTER),
];
await k(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: pods }));
await k(['wait', '--for=condition=Ready', 'pod/counter', 'pod/counter2', 'pod/restarter', '--timeout=120s']);

const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
const LIMITED_ROLE = uniqueName('only-elsewhere');
await createRole(gw, admin, {
  name: LIMITED_ROLE,
  clusters: ['*'],
  namespaces: [elsewhere],
  resources: ['*'],
  verbs: ['*'],
});
const limited = await apiKeyWithRoles(gw, admin, uniqueName('limited'), [LIMITED_ROLE]);

const wsBase = gw.url.replace(/^http/, 'ws');
const logsOf = (pod: string, query: string, headers = admin.headers) =>
  call(gw.url, 'GET', `/api/v1/logs/${ns}/${pod}?${query}`, { headers });
const numberOf = (line: string) => Number(/line (\d+)$/.exec(line)?.[1] ?? NaN);
// The API server files a log stream under verb LIST or GET (it has varied by release): count both.
const LOG_STREAMS = { resource: 'pods', subresource: 'log' };

t.test("tail, timestamps and since: Kite's {logs: [...]} answer", async (t) => {
  // At least a second of output, so the since window below is smaller than the whole log.
  await eventually(
    'a few lines',
    async () => (await logsOf('counter', 'tailLines=-1&timestamps=false')).body?.logs?.length > 8,
    30_000,
    200,
  );
  const tail = await logsOf('counter', 'tailLines=3&timestamps=false');
  t.equal(tail.status, 200, tail.text);
  t.same(Object.keys(tail.body).sort(), ['container', 'logs', 'namespace', 'pod'], "Kite's shape");
  t.match(tail.body, { pod: 'counter', namespace: ns, container: '' });
  t.equal(tail.body.logs.length, 3, 'the last 3 lines');
  const numbers = tail.body.logs.map(numberOf);
  t.ok(
    numbers.every((n: number, i: number) => i === 0 || n === numbers[i - 1] + 1),
    `consecutive: ${tail.body.logs.join(' | ')}`,
  );

  const stamped = await logsOf('counter', 'tailLines=1&container=main');
  t.match(stamped.body.logs[0], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z line \d+$/, 'timestamps by default (Kite)');
  t.equal(stamped.body.container, 'main');

  const whole = await logsOf('counter', 'tailLines=-1&timestamps=false');
  t.ok(whole.body.logs.length > 8, `tailLines=-1: the whole log (${whole.body.logs.length} lines)`);
  await new Promise((r) => setTimeout(r, 1500));
  const recent = await logsOf('counter', 'tailLines=-1&sinceSeconds=1&timestamps=false');
  t.equal(recent.status, 200);
  t.ok(
    recent.body.logs.length > 0 && recent.body.logs.length < whole.body.logs.length,
    `sinceSeconds=1: ${recent.body.logs.length} recent lines of ${whole.body.logs.length}+`,
  );
  const oldest = whole.body.logs.map(numberOf).find((n: number) => !Number.isNaN(n));
  t.ok(
    numberOf(recent.body.logs[0]) > oldest,
    `not the old ones (${recent.body.logs[0]}, the log starts at line ${oldest})`,
  );
});

t.test('follow=true: server-sent events with lines written after the request', async (t) => {
  const before = numberOf((await logsOf('counter', 'tailLines=1&timestamps=false')).body.logs[0]);
  const sse = await openSse(
    `${gw.url}/api/v1/logs/${ns}/counter?follow=true&tailLines=0&timestamps=false`,
    admin.headers,
  );
  t.teardown(() => sse.close());
  t.equal(sse.status, 200);
  t.match(sse.headers.get('content-type'), /^text\/event-stream/);
  await sse.waitFor('connected', (e) => e.event === 'connected');
  t.same(JSON.parse(sse.events[0].data), { status: 'connected' }, "Kite's first event");
  await sse.waitFor('three new lines', () => sse.events.filter((e) => e.event === 'log').length >= 3);
  const lines = sse.events.filter((e) => e.event === 'log').map((e) => numberOf(e.data));
  t.ok(lines[0] > before, `lines after the request (${lines[0]} > ${before})`);
  t.same(lines.slice(0, 3), [lines[0], lines[0] + 1, lines[0] + 2], 'in order, one event per line');
});

t.test('WebSocket, one pod: log messages, ping and pong', async (t) => {
  const client = await openWs(`${wsBase}/api/v1/logs/${ns}/counter/ws?tailLines=2&timestamps=false`, admin.headers);
  t.teardown(() => client.ws.terminate());
  const first = await client.waitFor('a line', (m) => m.type === 'log');
  t.match(first, { type: 'log', pod: 'counter' });
  t.match(first.data, /^line \d+$/, 'the line itself as data (Kite)');
  client.ws.send(JSON.stringify({ type: 'ping' }));
  t.match(await client.waitFor('pong', (m) => m.type === 'pong'), { type: 'pong', data: 'pong' });
  const count = () => client.messages.filter((m) => m.type === 'log').length;
  const seen = count();
  await eventually('more lines as they are written', () => count() >= seen + 3, 30_000);
});

t.test('WebSocket, labelSelector: every pod tagged, a new pod joins, streams end when the client leaves', async (t) => {
  const client = await openWs(
    `${wsBase}/api/v1/logs/${ns}/_all/ws?labelSelector=app%3Dcounter&tailLines=1&timestamps=false`,
    admin.headers,
  );
  t.teardown(() => client.ws.terminate());
  const from = (pod: string) => (m: WsMessage) => m.type === 'log' && m.pod === pod;
  for (const pod of ['counter', 'counter2']) {
    const line = await client.waitFor(`a line of ${pod}`, from(pod));
    t.equal(line.container, 'main');
    t.match(line.data, new RegExp(`^\\[${pod}/main\\]: (line \\d+|boot \\d+)$`), 'tagged with pod and container');
  }
  t.notOk(client.messages.some(from('restarter')), 'no pod outside the selector');

  await k(['apply', '-f', '-'], JSON.stringify(busyboxPod('counter3', { app: 'counter' }, COUNTER)));
  const joined = await client.waitFor('a line of the new pod', from('counter3'), 90_000);
  t.match(joined.data, /^\[counter3\/main\]: /);

  // All three streams are open (their lines arrive), so the API server's count includes them
  // (streams of earlier tests may still be ending: no baseline from before).
  await client.waitFor(
    'another line of counter',
    (m) => from('counter')(m) && m !== client.messages.find(from('counter')),
  );
  const open = await apiserverLongRunning(target, LOG_STREAMS);
  client.ws.close();
  await eventually(
    'the log streams to end upstream',
    async () => (await apiserverLongRunning(target, LOG_STREAMS)) <= open - 3,
    30_000,
    200,
  );
  t.pass(`the API server's open log streams went from ${open} back down by 3`);
  await k(['delete', 'pod', 'counter3', '--wait=false']);
});

t.test('a gateway shutting down ends an open log WebSocket (1001) instead of waiting for it', async (t) => {
  const other = await startGateway(t, { logName: 'logs' });
  const otherAdmin = await bootstrapAdmin(other);
  await addReadyCluster(other, otherAdmin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
  const client = await openWs(
    `${other.url.replace(/^http/, 'ws')}/api/v1/logs/${ns}/counter/ws?tailLines=1`,
    otherAdmin.headers,
  );
  t.teardown(() => client.ws.terminate());
  await client.waitFor('a line', (m) => m.type === 'log');
  // Another gateway in this process keeps its sockets: only the closing one's are ended.
  const bystander = await openWs(`${wsBase}/api/v1/logs/${ns}/counter/ws?tailLines=1`, admin.headers);
  t.teardown(() => bystander.ws.terminate());
  await bystander.waitFor('a line', (m) => m.type === 'log');
  const code = new Promise<number>((resolve) => client.ws.once('close', (c: number) => resolve(c)));
  await other.close();
  t.equal(await code, 1001, 'going away: the client may reconnect elsewhere');
  const seen = bystander.messages.length;
  await eventually("the other gateway's stream goes on", () => bystander.messages.length > seen + 2, 30_000);
  t.notOk(bystander.closed(), 'still open');
});

t.test('a followed log over server-sent events ends upstream when the client leaves', async (t) => {
  const readers = await Promise.all(
    [1, 2].map(() => openSse(`${gw.url}/api/v1/logs/${ns}/counter2?follow=true&tailLines=0`, viewer.headers)),
  );
  t.teardown(() => readers.forEach((sse) => sse.close()));
  for (const sse of readers) await sse.waitFor('a line', (e) => e.event === 'log');
  const open = await apiserverLongRunning(target, LOG_STREAMS);
  t.ok(open >= 2, `the API server counts the open log streams (${open})`);
  for (const sse of readers) sse.close();
  await eventually(
    'the streams to end upstream',
    async () => (await apiserverLongRunning(target, LOG_STREAMS)) <= open - 2,
    30_000,
    200,
  );
});

t.test('previous=true: the log of the container before the restart', async (t) => {
  const current = await logsOf('restarter', 'tailLines=-1&timestamps=false');
  const firstBoot = current.body.logs[0];
  t.match(firstBoot, /^boot \d+$/, `the first line: ${JSON.stringify(current.body).slice(0, 300)}`);
  const noPrevious = await logsOf('restarter', 'previous=true');
  t.equal(noPrevious.status, 400, `no previous container yet: the cluster's 400 (${noPrevious.body?.error})`);
  await k(['exec', 'restarter', '--', 'kill', '1']);
  await eventually(
    'the container to run again',
    async () => {
      const status = JSON.parse(await k(['get', 'pod', 'restarter', '-o', 'json'])).status.containerStatuses[0];
      return status.restartCount >= 1 && status.ready;
    },
    90_000,
    300,
  );
  // The trap runs once the current `sleep 1` ends: the first run's log stays one line.
  const previous = await logsOf('restarter', 'previous=true&tailLines=-1&timestamps=false');
  t.equal(previous.status, 200, previous.text);
  t.equal(previous.body.logs[0], firstBoot, "the first run's log");
  const now = await eventually('the new run to print', async () => {
    const res = await logsOf('restarter', 'tailLines=-1&timestamps=false');
    return res.body.logs.length > 0 ? res : undefined;
  });
  t.not(now.body.logs[0], firstBoot, 'the current log is the new run');
});

t.test('the viewer reads logs; a namespace-limited role does not outside its namespace', async (t) => {
  t.equal((await logsOf('counter', 'tailLines=1', viewer.headers)).status, 200, 'viewer: GET');
  const viewerWs = await openWs(`${wsBase}/api/v1/logs/${ns}/counter/ws?tailLines=1`, viewer.headers);
  t.teardown(() => viewerWs.ws.terminate());
  await viewerWs.waitFor('a line', (m) => m.type === 'log');
  viewerWs.ws.close();
  const denied = await logsOf('counter', 'tailLines=1', limited.headers);
  t.equal(denied.status, 403, 'limited: GET');
  t.match(denied.body.error, /may not get pods\/log/);
  t.equal(
    await wsRefusal(`${wsBase}/api/v1/logs/${ns}/counter/ws`, limited.headers),
    403,
    'limited: WebSocket, a plain 403',
  );
  t.equal(
    await wsRefusal(`${wsBase}/api/v1/logs/${ns}/_all/ws?labelSelector=app%3Dcounter`, limited.headers),
    403,
    'limited: label selector',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/logs/${ns}/counter?follow=true`, { headers: limited.headers })).status,
    403,
    'limited: follow',
  );
});

t.test("anonymous callers and kiteline's own namespace", async (t) => {
  t.equal((await call(gw.url, 'GET', `/api/v1/logs/${ns}/counter`)).status, 401, 'anonymous: GET');
  t.equal(await wsRefusal(`${wsBase}/api/v1/logs/${ns}/counter/ws`, {}), 401, 'anonymous: WebSocket');
  const onHost = { ...admin.headers, 'x-cluster-name': 'self' };
  const own = await call(gw.url, 'GET', `/api/v1/logs/${gw.namespace}/anything`, { headers: onHost });
  t.equal(own.status, 403, "admin: kiteline's install namespace on the host");
  t.match(own.body.error, /not reachable through kiteline/);
  t.equal(
    await wsRefusal(
      `${wsBase}/api/v1/logs/${gw.namespace}/_all/ws?labelSelector=a%3Db&x-cluster-name=self`,
      admin.headers,
    ),
    403,
    'nor its pods by selector',
  );
});

t.test('bad parameters: a 400 before anything goes upstream', async (t) => {
  for (const query of [
    'tailLines=-5',
    'tailLines=abc',
    'sinceSeconds=abc',
    'sinceSeconds=0',
    'previous=maybe',
    'follow=yes',
    'container=Bad_Name',
  ]) {
    const res = await logsOf('counter', query);
    t.equal(res.status, 400, query);
    t.type(res.body.error, 'string');
  }
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/logs/${ns}/Bad%20Name!`, { headers: admin.headers })).status,
    400,
    'an invalid pod name',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/logs/${ns}/_all`, { headers: admin.headers })).status,
    400,
    '_all outside the WebSocket',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/logs/Bad_NS/counter`, { headers: admin.headers })).status,
    400,
    'an invalid namespace',
  );
  t.equal(
    await wsRefusal(`${wsBase}/api/v1/logs/${ns}/_all/ws`, admin.headers),
    400,
    'pod _all without a labelSelector',
  );
  t.equal(
    await wsRefusal(`${wsBase}/api/v1/logs/${ns}/counter/ws?tailLines=-5`, admin.headers),
    400,
    'tailLines=-5 on the WebSocket',
  );
  t.equal(
    await wsRefusal(`${wsBase}/api/v1/logs/${ns}/_all/ws?labelSelector=%3D%3D%3D`, admin.headers),
    400,
    'a selector the cluster refuses: its 400',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/logs/${ns}/counter/ws`, { headers: admin.headers })).status,
    400,
    'the WebSocket route without an upgrade',
  );
  const missing = await logsOf('no-such-pod', 'tailLines=1');
  t.equal(missing.status, 404, "a missing pod: the cluster's 404");
  t.equal(
    await wsRefusal(`${wsBase}/api/v1/logs/${ns}/no-such-pod/ws`, admin.headers),
    404,
    'the same, before the WebSocket opens',
  );
});
