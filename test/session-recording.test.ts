// Issue 36: session recording on real planes. A Kite terminal session, a `kubectl exec -it` and a
// `kubectl debug -it` through /k8s/clusters (kubectl in a pseudo-terminal made by util-linux's
// `script`) are each recorded: who, cluster, pod, container, command, exit code, the typed input
// and the output in order, found by searching what was typed or what was printed, and replayed in
// Chromium by asciinema-player. A session of 10 MB of output runs whole while its recording stops
// at the per-session limit; a replica killed mid-session leaves what it had flushed; the retention
// prunes recordings and their chunks; `required` recording refuses a stream it cannot read (SPDY);
// a viewer cannot list recordings, and a role naming `sessions` sees its own cluster's only.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { login } from './helpers/auth-session.js';
import { launchBrowser, policyViolations } from './helpers/browser.js';
import { kubectl, kubectlInBackground, TEST_DIR, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { call, spawnGatewayProcess, startGateway } from './helpers/gateway.js';
import { BUSYBOX, busyboxPod, namespacedKubectl, openWs, type WsClient } from './helpers/workload-streams.js';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { parseCastEvents } from '../src/recording/asciicast.js';

const FLUSH_MS = 300;
const target = await testControlPlane('target-a');
const host = await testControlPlane('host');
const gw = await startGateway(t, {
  logName: 'session-recording',
  env: {
    KITELINE_TLS_PORT: '0',
    KITELINE_SESSION_RECORDING_FLUSH_INTERVAL_MS: String(FLUSH_MS),
    KITELINE_SESSION_RECORDING_MAX_SESSION_MIB: '2',
    KITELINE_AUDIT_FLUSH_INTERVAL_MS: '300',
  },
});
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'a2', config: testKubeconfig('target-a') });
const cookie = await login(gw.url, 'admin', 'correct-horse-battery');
const asAdmin = { cookie };

const ns = uniqueName('rec');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
const IDLE = 'trap "exit 0" TERM; while true; do sleep 1; done';
await k(['apply', '-f', '-'], JSON.stringify(busyboxPod('shell', { app: 'shell' }, ['sh', '-c', IDLE])));
await k(['wait', '--for=condition=Ready', 'pod/shell', '--timeout=120s']);

const MARK = uniqueName('m');
const wsBase = gw.url.replace(/^http/, 'ws');

interface Recording {
  id: string;
  user: string;
  cluster: string;
  kind: string;
  namespace: string;
  pod: string;
  container: string;
  command: string;
  protocol?: string;
  width: number;
  height: number;
  start: string;
  end?: string;
  exitCode?: number;
  bytes: number;
  storedBytes: number;
  chunks: number;
  input: string;
  truncated?: boolean;
  requestId: string;
}

async function search(query: Record<string, string>, headers: Record<string, string> = asAdmin, base = gw.url) {
  const res = await call(base, 'GET', `/api/v1/admin/sessions?${new URLSearchParams(query)}`, { headers });
  if (res.status !== 200) throw new Error(`search: ${res.status} ${res.text}`);
  return res.body as { data: Recording[]; total: number; outputSearchComplete: boolean };
}

/** The one recording a search finds, once it is there and `ready` says it is complete enough. */
function found(query: Record<string, string>, ready: (r: Recording) => boolean = (r) => r.end !== undefined) {
  return eventually(
    `a recording matching ${JSON.stringify(query)}`,
    async () => {
      const { data } = await search(query);
      return data.length === 1 && ready(data[0]) ? data[0] : undefined;
    },
    30_000,
    200,
  );
}

async function castOf(id: string, base = gw.url) {
  const res = await call(base, 'GET', `/api/v1/admin/sessions/${id}/cast`, { headers: asAdmin });
  if (res.status !== 200) throw new Error(`cast: ${res.status} ${res.text}`);
  const [header, ...rest] = res.text.split('\n');
  const events = parseCastEvents(rest.join('\n'));
  return {
    header: JSON.parse(header) as { version: number; width: number; height: number; command: string; title: string },
    events,
    output: events
      .filter((e) => e[1] === 'o')
      .map((e) => e[2])
      .join(''),
    input: events
      .filter((e) => e[1] === 'i')
      .map((e) => e[2])
      .join(''),
  };
}

function stdoutOf(client: WsClient): string {
  return client.messages
    .filter((m) => m.type === 'stdout')
    .map((m) => m.data)
    .join('');
}

/** Types a line into a Kite terminal and waits until `expect` is in its output. */
async function typeLine(client: WsClient, line: string, expect: string, timeoutMs = 30_000): Promise<void> {
  client.ws.send(JSON.stringify({ type: 'stdin', data: `${line}\r` }));
  await eventually(`"${expect}" in the terminal`, () => stdoutOf(client).includes(expect), timeoutMs, 50);
}

function terminal(base: string, cluster: string, headers: Record<string, string> = asAdmin) {
  return openWs(
    `${base.replace(/^http/, 'ws')}/api/v1/terminal/${ns}/shell/ws?shell=sh&x-cluster-name=${cluster}`,
    headers,
  );
}

t.test(
  'a Kite terminal session: recorded, found by what was typed or printed, its audit record names it',
  async (t) => {
    const client = await openWs(`${wsBase}/api/v1/terminal/${ns}/shell/ws?shell=sh`, asAdmin);
    await client.waitFor('connected', (m) => m.type === 'connected');
    client.ws.send(JSON.stringify({ type: 'resize', cols: 100, rows: 30 }));
    await typeLine(client, `echo hello-${MARK}`, `hello-${MARK}\r\n`);
    await typeLine(client, `mkdir -p /tmp/doomed-${MARK} && rm -rf /tmp/doomed-${MARK} && echo gone`, 'gone\r\n');
    await typeLine(client, `echo $((6*7))-printed-${MARK}`, `42-printed-${MARK}`);
    client.ws.send(JSON.stringify({ type: 'stdin', data: 'exit 3\r' }));
    await client.waitFor('close', (m) => m.type === 'close');

    const recording = await found({ q: `rm -rf /tmp/doomed-${MARK}` });
    t.match(
      recording,
      {
        user: 'admin',
        cluster: 'a',
        kind: 'pod-terminal',
        namespace: ns,
        pod: 'shell',
        container: 'main',
        command: 'sh',
        width: 100,
        height: 30,
        exitCode: 3,
      },
      'who, where, what and how it ended',
    );
    t.match(recording.input, `rm -rf /tmp/doomed-${MARK}`, 'the typed line is kept');
    t.ok(Date.parse(recording.end!) >= Date.parse(recording.start), 'an end after the start');

    const byOutput = await search({ q: `42-PRINTED-${MARK}` });
    t.same(
      byOutput.data.map((r) => r.id),
      [recording.id],
      'a text only the output has (the shell computed it) is found too, in any case',
    );
    t.equal((await search({ q: `never-typed-${MARK}` })).total, 0, 'a text in neither is not found');
    t.equal((await search({ q: `hello-${MARK}`, cluster: 'a2' })).total, 0, 'filters apply with q');
    t.equal((await search({ q: `hello-${MARK}`, pod: `${ns}/shell`, user: 'admin' })).total, 1);
    t.equal((await search({ q: `hello-${MARK}`, from: new Date(Date.now() + 60_000).toISOString() })).total, 0);

    const cast = await castOf(recording.id);
    t.match(cast.header, { version: 2, width: 100, height: 30, command: 'sh' }, 'an asciicast v2 header');
    t.match(cast.header.title, `admin on a: ${ns}/shell (main)`);
    t.match(cast.input, `echo hello-${MARK}\r`, 'keystrokes are input events');
    const times = cast.events.map((e) => e[0]);
    t.same(
      times,
      [...times].sort((x, y) => x - y),
      'events in time order',
    );
    const output = cast.output;
    t.ok(
      output.indexOf(`hello-${MARK}\r\n`) < output.indexOf('gone\r\n') &&
        output.indexOf('gone\r\n') < output.indexOf(`42-printed-${MARK}`),
      'the output in the order the terminal showed it',
    );
    t.equal(output, stdoutOf(client), 'every byte the terminal showed, and nothing else');
    t.ok(
      cast.events.some((e) => e[1] === 'r' && e[2] === '100x30'),
      'the resize is an event',
    );

    const audit = await eventually(
      'the audit record naming the recording',
      async () => {
        const res = await call(gw.url, 'GET', '/api/v1/admin/audit-logs?resourceType=pods/exec&size=100', {
          headers: asAdmin,
        });
        return (res.body.data as Array<{ recording?: string; requestId: string }>).find(
          (r) => r.recording === recording.id,
        );
      },
      30_000,
      200,
    );
    t.equal(audit.requestId, recording.requestId, "the session's audit record and its recording share a request id");

    await t.test('replayed in Chromium by asciinema-player, from the page the audit record leads to', async (t) => {
      const browser = await launchBrowser(t);
      const page = await browser.newPage();
      // What went wrong on the page: refused or failed loads (but the favicon no page here has),
      // and the content security policy's refusals (recorded before any of the page's scripts runs).
      const failures: string[] = [];
      page.on('response', (r) => {
        if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) failures.push(`${r.status()} ${r.url()}`);
      });
      page.on('requestfailed', (r) => failures.push(`failed ${r.url()}`));
      const violations = await policyViolations(page);
      const url = new URL(gw.url);
      await page.setCookie({ name: 'auth_token', value: cookie.split('=')[1], domain: url.hostname, path: '/' });
      const res = await page.goto(`${gw.url}/api/v1/admin/sessions/${recording.id}/replay?speed=50`, {
        waitUntil: 'load',
      });
      t.equal(res?.status(), 200);
      t.match(await page.$eval('dd[data-field="User"]', (e) => e.textContent), 'admin', 'who');
      t.match(await page.$eval('dd[data-field="Where"]', (e) => e.textContent), `pod ${ns}/shell, container main`);
      await page.waitForFunction(
        (text: string) =>
          (
            (
              globalThis as unknown as { document: { querySelector(s: string): { textContent: string } | null } }
            ).document.querySelector('#player')?.textContent ?? ''
          ).includes(text),
        { timeout: 30_000 },
        `42-printed-${MARK}`,
      );
      t.pass('the player showed the output');
      t.same(failures, [], 'every file of the page loaded');
      t.same(await violations(), [], 'the content security policy refused nothing the player does');
      const anonymous = await call(gw.url, 'GET', `/api/v1/admin/sessions/${recording.id}/replay`);
      t.equal(anonymous.status, 401, 'no page without signing in');
    });
  },
);

/** kubectl in a pseudo-terminal (util-linux `script`), typed into as a user would. */
function kubectlInTerminal(kubeconfig: string, args: string[], env: Record<string, string> = {}) {
  // A terminal of 120 by 40 (script's pseudo-terminal starts at 0 by 0 when its input is a pipe).
  const kubectlCommand = [ensureBinaries().kubectl, '--kubeconfig', kubeconfig, ...args].join(' ');
  const command = `stty cols 120 rows 40 && exec ${kubectlCommand}`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: { ...process.env, TERM: 'xterm', ...env },
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => {
    output += c.toString('utf8');
    // busybox's line editor asks where the cursor is after each prompt: answered as a terminal does.
    if (c.includes('\x1b[6n')) child.stdin.write('\x1b[24;5R');
  });
  child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const exited = new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? -1)));
  t.teardown(() => child.kill('SIGKILL'));
  /** Waits until the output holds `expect`; the error shows what kubectl printed. */
  const waitFor = (expect: string, timeoutMs: number) =>
    eventually(`"${expect}" from kubectl`, () => output.includes(expect), timeoutMs, 50).catch((err: Error) => {
      throw new Error(`${err.message}; kubectl printed: ${JSON.stringify(output.slice(-600))}`);
    });
  return {
    exited,
    waitFor,
    async type(line: string, expect: string) {
      child.stdin.write(`${line}\r`);
      await waitFor(expect, 60_000);
    },
  };
}

const kubeconfigPath = join(TEST_DIR, `${uniqueName('rec')}.kubeconfig`);
{
  const res = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: asAdmin });
  if (res.status !== 200) throw new Error(`kubeconfig: ${res.status} ${res.text}`);
  writeFileSync(kubeconfigPath, res.text);
}

t.test('kubectl exec -it through the proxy: recorded from the passing WebSocket stream', async (t) => {
  const session = kubectlInTerminal(kubeconfigPath, ['exec', '-it', '-n', ns, 'shell', '--', 'sh']);
  // busybox's prompt (then its cursor-position query).
  await session.waitFor('/ # ', 60_000);
  await session.type(`echo via-kubectl-$((40+2))-${MARK}`, `via-kubectl-42-${MARK}`);
  session.type('exit 0', '').catch(() => undefined);
  t.equal(await session.exited, 0, 'kubectl ended with the shell');
  const recording = await found({ q: `via-kubectl-$((40+2))-${MARK}` });
  t.match(recording, {
    user: 'admin',
    cluster: 'a',
    kind: 'exec',
    namespace: ns,
    pod: 'shell',
    command: 'sh',
    protocol: 'websocket v5.channel.k8s.io',
    exitCode: 0,
  });
  t.match(recording, { width: 120, height: 40 }, "kubectl's terminal size (its resize channel)");
  const cast = await castOf(recording.id);
  t.match(cast.input, `echo via-kubectl-$((40+2))-${MARK}\r`, 'stdin, as typed');
  t.match(cast.output, `via-kubectl-42-${MARK}\r\n`, "the shell's answer");
  t.ok(
    cast.output.indexOf(`via-kubectl-42-${MARK}`) > cast.output.indexOf(`echo via-kubectl-$((40+2))`),
    'the echo of the typed line comes before its answer',
  );
});

t.test('kubectl debug -it through the proxy: the attach to the debug container is recorded', async (t) => {
  const container = `dbg-${MARK}`.slice(0, 60);
  const session = kubectlInTerminal(kubeconfigPath, [
    'debug',
    '-it',
    '-n',
    ns,
    'shell',
    `--image=${BUSYBOX}`,
    '--image-pull-policy=Never',
    `--container=${container}`,
    '--',
    'sh',
  ]);
  await session.waitFor("If you don't see a command prompt, try pressing enter.", 90_000);
  await session.type('', '/ # ');
  await session.type(`echo debugging-$((1+1))-${MARK}`, `debugging-2-${MARK}`);
  session.type('exit', '').catch(() => undefined);
  await session.exited;
  const recording = await found({ q: `debugging-$((1+1))-${MARK}` });
  t.match(recording, { user: 'admin', cluster: 'a', kind: 'attach', namespace: ns, pod: 'shell', container });
  const cast = await castOf(recording.id);
  t.match(cast.output, `debugging-2-${MARK}`);
});

t.test('10 MB of output: the session gets all of it, the recording stops at its limit', async (t) => {
  const client = await terminal(gw.url, 'a');
  await client.waitFor('connected', (m) => m.type === 'connected');
  const line = '0123456789'.repeat(9);
  await typeLine(
    client,
    `yes ${line} | head -c 10500000; echo; echo big-done-$((2+3))-${MARK}`,
    `big-done-5-${MARK}`,
    180_000,
  );
  client.ws.send(JSON.stringify({ type: 'stdin', data: 'exit\r' }));
  await client.waitFor('close', (m) => m.type === 'close', 60_000);
  const received = Buffer.byteLength(stdoutOf(client));
  t.ok(received > 10_500_000, `the terminal got every byte (${received})`);
  const recording = await found({ q: `big-done-$((2+3))-${MARK}` });
  t.equal(recording.truncated, true, 'marked truncated');
  t.ok(recording.bytes <= 2 * 1024 * 1024 + 1024, `the recording kept ${recording.bytes} bytes: the 2 MiB limit`);
  t.ok(recording.chunks >= 8, `written in chunks as it went (${recording.chunks})`);
  t.ok(recording.storedBytes < recording.bytes, 'compressed');
  const chunks = JSON.parse(
    kubectl(host.kubeconfigPath, [
      'get',
      'sessionchunks.kiteline.io',
      '-n',
      gw.namespace,
      '-l',
      `kiteline.io/recording=${recording.id}`,
      '-o',
      'json',
    ]).stdout,
  ) as { items: Array<{ spec: { bytes: number; data: string } }> };
  t.equal(chunks.items.length, recording.chunks);
  t.ok(
    chunks.items.every((c) => c.spec.bytes <= 256 * 1024 && c.spec.data.length < 400 * 1024),
    'every chunk is far below the object size limit',
  );
  const cast = await castOf(recording.id);
  t.match(cast.events.at(-1), [Number, 'm', 'kiteline: recording limit reached'], 'the cast says where it stops');
});

t.test('a replica killed mid-session leaves what it had flushed', async (t) => {
  const replica = await spawnGatewayProcess(t, {
    kubeconfig: host.kubeconfigPath,
    namespace: gw.namespace,
    logName: 'session-recording-replica',
    env: { KITELINE_SESSION_RECORDING_FLUSH_INTERVAL_MS: String(FLUSH_MS) },
  });
  const client = await eventually(
    'a terminal on the replica',
    () => terminal(replica.url, 'a').catch(() => undefined),
    60_000,
    500,
  );
  await client.waitFor('connected', (m) => m.type === 'connected');
  await typeLine(client, `echo before-$((3*3))-${MARK}`, `before-9-${MARK}`);
  const recording = await found({ q: `before-$((3*3))-${MARK}` }, () => true);
  await eventually(
    'the output flushed',
    async () => (await castOf(recording.id)).output.includes(`before-9-${MARK}`),
    30_000,
    200,
  );
  process.kill(replica.pid, 'SIGKILL');
  await replica.exited;
  const after = (await search({ q: `before-$((3*3))-${MARK}` })).data[0];
  t.equal(after.end, undefined, 'no end: the replica died');
  t.match((await castOf(recording.id)).output, `before-9-${MARK}`, 'what was flushed is there');
});

t.test('retention prunes; `required` recording refuses a stream it cannot read', async (t) => {
  const namespace = uniqueName('kl-rec');
  const other = await spawnGatewayProcess(t, {
    kubeconfig: host.kubeconfigPath,
    namespace,
    logName: 'session-recording-required',
    env: {
      KITELINE_SESSION_RECORDING: 'required',
      KITELINE_SESSION_RECORDING_FLUSH_INTERVAL_MS: String(FLUSH_MS),
      KITELINE_SESSION_RECORDING_MAX_AGE: '10',
      KITELINE_SESSION_RECORDING_PRUNE_INTERVAL_MS: '500',
      KITELINE_TLS_PORT: '0',
    },
  });
  const otherGw = { url: other.url } as Parameters<typeof bootstrapAdmin>[0];
  const otherAdmin = await bootstrapAdmin(otherGw);
  await addReadyCluster(otherGw, otherAdmin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
  const client = await terminal(other.url, 'a', otherAdmin.headers);
  await client.waitFor('connected', (m) => m.type === 'connected');
  await typeLine(client, `echo kept-briefly-${MARK}`, `kept-briefly-${MARK}\r\n`);
  client.ws.send(JSON.stringify({ type: 'stdin', data: 'exit\r' }));
  await client.waitFor('close', (m) => m.type === 'close');
  const listed = await eventually(
    'the recording listed',
    async () => (await search({ q: `kept-briefly` }, otherAdmin.headers, other.url)).data[0],
    30_000,
    200,
  );
  const chunksOf = () =>
    JSON.parse(
      kubectl(host.kubeconfigPath, [
        'get',
        'sessionchunks.kiteline.io',
        '-n',
        namespace,
        '-l',
        `kiteline.io/recording=${listed.id}`,
        '-o',
        'json',
      ]).stdout,
    ).items.length as number;
  t.ok(chunksOf() > 0, 'its chunks are stored');
  await eventually(
    'the recording pruned after 10 s',
    async () => (await search({}, otherAdmin.headers, other.url)).total === 0,
    60_000,
    500,
  );
  await eventually('its chunks deleted', () => chunksOf() === 0, 30_000, 500);
  t.pass('recording and chunks gone past the retention');

  const kubeconfig = join(TEST_DIR, `${uniqueName('rec-required')}.kubeconfig`);
  const downloaded = await call(other.url, 'POST', '/api/v1/kubeconfig', {
    headers: { cookie: await login(other.url, 'admin', 'correct-horse-battery') },
  });
  t.equal(downloaded.status, 200, 'a kubeconfig from the required-recording replica');
  writeFileSync(kubeconfig, downloaded.text);
  const spdy = await new Promise<{ status: number; stderr: string }>((resolve) => {
    const child = spawn(
      ensureBinaries().kubectl,
      ['--kubeconfig', kubeconfig, 'exec', '-n', ns, 'shell', '--', 'true'],
      {
        env: { ...process.env, KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' },
      },
    );
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (code) => resolve({ status: code ?? -1, stderr }));
  });
  t.not(spdy.status, 0, 'an exec over SPDY is refused');
  t.match(spdy.stderr, /recording is required/, 'saying why');
  const ws = await kubectlInBackground(kubeconfig, ['exec', '-n', ns, 'shell', '--', 'echo', `ws-ok-${MARK}`]);
  t.match(ws.stdout, `ws-ok-${MARK}`, 'the same exec over WebSocket runs, recorded');
});

let nodeRecording: Recording | undefined;
t.test('a node terminal session: recorded with its node, on the same path as the pod terminal', async (t) => {
  const client = await openWs(`${wsBase}/api/v1/node-terminal/target-a-node/ws?shell=sh`, asAdmin);
  await client.waitFor('connected', (m) => m.type === 'connected', 150_000);
  await typeLine(client, `echo on-the-node-$((5*5))-${MARK}`, `on-the-node-25-${MARK}`);
  client.ws.send(JSON.stringify({ type: 'stdin', data: 'exit 0\r' }));
  await client.waitFor('close', (m) => m.type === 'close', 60_000);
  nodeRecording = await found({ q: `on-the-node-$((5*5))-${MARK}` });
  t.match(nodeRecording, { user: 'admin', cluster: 'a', kind: 'node-terminal', node: 'target-a-node', exitCode: 0 });
  t.match((await castOf(nodeRecording.id)).output, `on-the-node-25-${MARK}`);
});

t.test('who may list and replay: admins, and a role naming sessions (its clusters only)', async (t) => {
  // One more session, on cluster a2 (the same target under another name).
  const client = await terminal(gw.url, 'a2');
  await client.waitFor('connected', (m) => m.type === 'connected');
  await typeLine(client, `echo on-a2-${MARK}`, `on-a2-${MARK}\r\n`);
  client.ws.send(JSON.stringify({ type: 'stdin', data: 'exit\r' }));
  await client.waitFor('close', (m) => m.type === 'close');
  const onA2 = await found({ q: `on-a2-${MARK}` });
  const onA = (await search({ q: `hello-${MARK}` })).data[0];

  const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
  for (const path of ['', `/${onA.id}`, `/${onA.id}/cast`, `/${onA.id}/replay`]) {
    const res = await call(gw.url, 'GET', `/api/v1/admin/sessions${path}`, { headers: viewer.headers });
    t.equal(res.status, 403, `a viewer (every resource, by wildcard) is refused ${path || 'the list'}`);
  }
  t.equal((await call(gw.url, 'GET', '/api/v1/admin/sessions')).status, 401, 'anonymous: 401');

  const AUDITOR = uniqueName('session-auditor');
  await createRole(gw, admin, {
    name: AUDITOR,
    clusters: ['a'],
    namespaces: ['*'],
    resources: ['sessions'],
    verbs: ['get', 'list'],
  });
  const auditor: Caller = await apiKeyWithRoles(gw, admin, uniqueName('auditor'), [AUDITOR]);
  const seen = await search({ q: MARK }, auditor.headers);
  t.ok(
    seen.data.some((r) => r.id === onA.id),
    "the auditor finds cluster a's sessions",
  );
  t.notOk(
    seen.data.some((r) => r.cluster !== 'a'),
    'and none of another cluster',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/admin/sessions/${onA2.id}/cast`, { headers: auditor.headers })).status,
    404,
    "another cluster's recording is not found",
  );
  if (nodeRecording) {
    const ONE_NAMESPACE = uniqueName('kube-system-sessions');
    await createRole(gw, admin, {
      name: ONE_NAMESPACE,
      clusters: ['*'],
      namespaces: ['kube-system'],
      resources: ['sessions'],
      verbs: ['get', 'list'],
    });
    const narrow = await apiKeyWithRoles(gw, admin, uniqueName('narrow-auditor'), [ONE_NAMESPACE]);
    t.notOk(
      (await search({ q: MARK }, narrow.headers)).data.some((r) => r.id === nodeRecording!.id),
      'a role of one namespace does not see a node terminal, though its pod runs in that namespace',
    );
    t.ok(
      (await search({ q: MARK }, auditor.headers)).data.some((r) => r.id === nodeRecording!.id),
      'a role of every namespace on the cluster does',
    );
  }
  const cast = await call(gw.url, 'GET', `/api/v1/admin/sessions/${onA.id}/cast`, { headers: auditor.headers });
  t.equal(cast.status, 200, 'its own cluster’s cast is served');
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/sessions/../users', { headers: auditor.headers })).status,
    403,
    'the exemption is these routes only: other admin routes stay admin-only',
  );
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/sessions/not-an-id', { headers: asAdmin })).status,
    400,
    'a malformed id is a 400',
  );
  t.equal(
    (await call(gw.url, 'GET', '/api/v1/admin/sessions?from=yesterday', { headers: asAdmin })).status,
    400,
    'a malformed time is a 400',
  );
});
