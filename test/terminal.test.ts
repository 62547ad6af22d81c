// Issue 18 point 2: Kite's terminals against real pods on the target-a node. A pod terminal runs
// commands, reads stdin, follows a resize (`stty size`), ends with a clean close and the shell's
// exit code, picks bash when the container has it and sh otherwise, ends the shell when the client
// vanishes, and leaves one audit record per session. A node terminal reaches the host through its
// privileged pod, and the pod is deleted when the client is killed, when the shell exits and when
// the gateway shuts down. Then the refusals: the viewer (no create on pods/exec), a role that only
// gets pods/exec, a non-admin on the node terminal, anonymous callers, kiteline's own namespace on
// the host cluster, bad parameters, a missing pod or node; each a plain HTTP answer before the
// WebSocket opens.
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { hostname } from 'node:os';
import t from 'tap';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { auditRecordOf, startGateway, type TestGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl, openWs, wsRefusal, type WsClient } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const logName = uniqueName('terminal');
const gw = await startGateway(t, { logName });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

const ns = uniqueName('term');
const k = namespacedKubectl(target.kubeconfigPath, ns);
const kubeSystem = namespacedKubectl(target.kubeconfigPath, 'kube-system');
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));

const IDLE = 'trap "exit 0" TERM; while true; do sleep 1; done';
// A fake bash (a script that marks its environment, then runs sh) shows that bash is preferred.
const FAKE_BASH =
  `printf '#!/bin/sh\\nexport FAKE_BASH=yes\\nexec sh "$@"\\n' > /bin/bash && ` + `chmod +x /bin/bash && ${IDLE}`;
const twoContainers = busyboxPod('two', { app: 'two' }, ['sh', '-c', IDLE], {
  env: [{ name: 'WHO', value: 'first' }],
}) as { spec: { containers: object[] } };
twoContainers.spec.containers.push({
  name: 'second',
  image: 'kiteline.local/busybox:1',
  imagePullPolicy: 'Never',
  command: ['sh', '-c', IDLE],
  env: [{ name: 'WHO', value: 'second' }],
});
const pods = [
  busyboxPod('shell', { app: 'shell' }, ['sh', '-c', IDLE]),
  busyboxPod('with-bash', { app: 'with-bash' }, ['sh', '-c', FAKE_BASH]),
  twoContainers,
];
await k(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: pods }));
await k(['wait', '--for=condition=Ready', 'pod/shell', 'pod/with-bash', 'pod/two', '--timeout=120s']);

const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
const EXEC_GET_ROLE = uniqueName('exec-get-only');
await createRole(gw, admin, {
  name: EXEC_GET_ROLE,
  clusters: ['*'],
  namespaces: ['*'],
  resources: ['pods/exec', 'pods'],
  verbs: ['get', 'list', 'watch'],
});
const execGetter = await apiKeyWithRoles(gw, admin, uniqueName('exec-getter'), [EXEC_GET_ROLE]);
const ALMOST_ADMIN_ROLE = uniqueName('everything-but-admin');
await createRole(gw, admin, {
  name: ALMOST_ADMIN_ROLE,
  clusters: ['*'],
  namespaces: ['*'],
  resources: ['*'],
  verbs: ['*'],
});
const almostAdmin = await apiKeyWithRoles(gw, admin, uniqueName('almost-admin'), [ALMOST_ADMIN_ROLE]);

const wsBase = (g: TestGateway) => g.url.replace(/^http/, 'ws');
const podTerminal = (pod: string, query = '') => `${wsBase(gw)}/api/v1/terminal/${ns}/${pod}/ws${query}`;
const NODE = 'target-a-node';
/** How long a node terminal's host shell may take to read its first line (its rc files run first). */
const HOST_SHELL_START_MS = 150_000;

/** A terminal client: its output so far, typing, and how the WebSocket closed. */
interface Terminal extends WsClient {
  output(): string;
  type(line: string): void;
  waitOutput(what: string, pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  closeCode: Promise<number>;
}

async function openTerminal(url: string, caller: Caller, requestId?: string): Promise<Terminal> {
  const client = await openWs(url, { ...caller.headers, ...(requestId ? { 'x-request-id': requestId } : {}) });
  const closeCode = new Promise<number>((resolve) => client.ws.once('close', (code) => resolve(code)));
  const output = () =>
    client.messages
      .filter((m) => m.type === 'stdout' || m.type === 'stderr')
      .map((m) => m.data)
      .join('');
  return {
    ...client,
    output,
    closeCode,
    type: (line) => client.ws.send(JSON.stringify({ type: 'stdin', data: `${line}\r` })),
    waitOutput: (what, pattern, timeoutMs = 60_000) =>
      eventually(what, () => pattern.exec(output()) ?? undefined, timeoutMs, 20),
  };
}

const auditOf = (requestId: string) => auditRecordOf(logName, requestId);

/** The node-terminal pods on target-a: name -> node. */
async function nodeTerminalPods(): Promise<Map<string, string>> {
  const list = JSON.parse(await kubeSystem(['get', 'pods', '-l', 'kiteline.io/node-terminal=true', '-o', 'json'])) as {
    items: Array<{ metadata: { name: string; annotations?: Record<string, string> } }>;
  };
  return new Map(list.items.map((pod) => [pod.metadata.name, pod.metadata.annotations?.['kiteline.io/node'] ?? '']));
}

t.test("a pod terminal: Kite's messages, a command, stdin, a resize, the shell's exit, one audit record", async (t) => {
  const requestId = uniqueName('term-session');
  const term = await openTerminal(podTerminal('shell', '?container=main'), admin, requestId);
  t.teardown(() => term.ws.terminate());
  t.same(
    await term.waitFor('connected', (m) => m.type === 'connected'),
    { type: 'connected', data: 'Terminal connected successfully' },
    "Kite's first message",
  );

  term.type('echo "mark-$((6*7))"');
  await term.waitOutput('the command output', /mark-42/);
  t.pass('a command runs (its output, not the echo of the input)');

  term.type('read line; echo "got:[$line]"');
  term.type('hello terminal');
  await term.waitOutput('what the shell read from stdin', /got:\[hello terminal\]/);
  t.pass('stdin reaches the shell');

  term.ws.send(JSON.stringify({ type: 'resize', cols: 123, rows: 45 }));
  term.type('stty size');
  await term.waitOutput('the new size', /\b45 123\b/);
  term.ws.send(JSON.stringify({ type: 'resize', cols: 111, rows: 33 }));
  term.type('stty size');
  await term.waitOutput('the second size', /\b33 111\b/);
  t.pass('resizes reach the TTY');

  term.ws.send(JSON.stringify({ type: 'ping' }));
  t.same(await term.waitFor('pong', (m) => m.type === 'pong'), { type: 'pong', data: '' }, "Kite's pong");
  term.ws.send('not json');
  t.match(await term.waitFor('an error for a malformed message', (m) => m.type === 'error'), {
    type: 'error',
    data: /JSON/,
  });
  t.notOk(term.closed(), 'a malformed message does not end the session');

  term.type('exit 3');
  t.match(
    await term.waitFor('close', (m) => m.type === 'close'),
    { type: 'close', exitCode: 3 },
    "the shell's exit code",
  );
  t.equal(await term.closeCode, 1000, 'then a clean close');

  const record = await eventually('the audit record', () => auditOf(requestId));
  t.match(record, {
    who: 'apikey:admin-key',
    cluster: 'a',
    verb: 'create',
    resource: 'pods/exec',
    namespace: ns,
    name: 'shell',
    subject: 'main',
    result: 'success',
    status: 101,
    exitCode: 3,
  });
  t.ok(
    (record.bytesIn as number) > 40 && (record.bytesOut as number) > 40,
    `bytes each way (${String(record.bytesIn)} in, ${String(record.bytesOut)} out)`,
  );
  t.ok(Date.parse(record.end as string) >= Date.parse(record.start as string), 'start and end');
  t.notMatch(JSON.stringify(record), /hello terminal|mark-42/, 'no byte of the session');
});

t.test('the shell: bash when the container has it, else sh; `shell` picks one by name', async (t) => {
  const probe = 'echo "fake-bash=[$FAKE_BASH] zero=[$0] who=[$WHO]"';
  const run = async (pod: string, query: string) => {
    const term = await openTerminal(podTerminal(pod, query), admin);
    t.teardown(() => term.ws.terminate());
    await term.waitFor('connected', (m) => m.type === 'connected');
    term.type(probe);
    const [line] = await term.waitOutput('the probe', /fake-bash=\[[a-z]*\] zero=\[[^\]]*\] who=\[[a-z]*\]/);
    term.type('exit');
    t.equal(await term.closeCode, 1000);
    return line;
  };
  t.equal(await run('shell', ''), 'fake-bash=[] zero=[sh] who=[]', 'busybox has no bash: sh');
  t.equal(await run('with-bash', ''), 'fake-bash=[yes] zero=[sh] who=[]', 'a container with bash: bash');
  t.equal(await run('with-bash', '?shell=sh'), 'fake-bash=[] zero=[sh] who=[]', 'shell=sh: sh, bash or not');
  t.equal(
    await run('two', ''),
    'fake-bash=[] zero=[sh] who=[first]',
    "no container: the pod's first (kubectl's default)",
  );
  t.equal(await run('two', '?container=second'), 'fake-bash=[] zero=[sh] who=[second]', 'container=second');

  const missing = await openTerminal(podTerminal('shell', '?shell=bash'), admin);
  const error = await missing.waitFor('an error', (m) => m.type === 'error');
  t.match(error.data, /bash/, `a shell the container lacks: the cluster's message (${error.data})`);
  t.not(await missing.closeCode, 1000, 'and the WebSocket closes as a failure');
});

t.test('the client vanishes: the exec ends, and the shell and its foreground program with it', async (t) => {
  const term = await openTerminal(podTerminal('shell'), admin);
  await term.waitFor('connected', (m) => m.type === 'connected');
  term.type(`echo "shell=[$$]"; sh -c 'echo "sleep=[$$]"; exec sleep 4242'`);
  const [, shell, sleep] = await term.waitOutput('the pids', /shell=\[(\d+)\]\s+sleep=\[(\d+)\]/);
  const running = async (pid: string) => {
    try {
      await k(['exec', 'shell', '--', 'kill', '-0', pid]);
      return true;
    } catch {
      return false;
    }
  };
  t.ok(
    (await running(shell)) && (await running(sleep)),
    `the shell runs (pid ${shell}), sleep in the foreground (pid ${sleep})`,
  );
  term.ws.terminate(); // no close frame: the socket just dies
  await eventually('the shell to end', async () => !(await running(shell)), 60_000, 500);
  t.notOk(await running(sleep), 'nor its foreground program');
});

t.test('who may open a pod terminal: a plain HTTP answer before the WebSocket opens', async (t) => {
  t.equal(await wsRefusal(podTerminal('shell'), viewer.headers), 403, 'the viewer: no create on pods/exec');
  t.equal(await wsRefusal(podTerminal('shell'), execGetter.headers), 403, 'get on pods/exec is not enough');
  t.equal(await wsRefusal(podTerminal('shell'), {}), 401, 'anonymous');
  const onHost = `${wsBase(gw)}/api/v1/terminal/${gw.namespace}/anything/ws?x-cluster-name=self`;
  t.equal(
    await wsRefusal(onHost, admin.headers),
    403,
    "kiteline's own namespace on the host cluster, even for an admin",
  );
  for (const query of ['?shell=/bin/bash', '?shell=bash%20-c%20id', '?shell=Bash', '?container=Bad_Name']) {
    t.equal(await wsRefusal(podTerminal('shell', query), admin.headers), 400, query);
  }
  t.equal(await wsRefusal(podTerminal('no-such-pod'), admin.headers), 404, "a missing pod: the cluster's 404");
  t.equal(
    await wsRefusal(podTerminal('shell', '?container=nope'), admin.headers),
    400,
    "a missing container: the cluster's 400",
  );
  const plain = await fetch(`${gw.url}/api/v1/terminal/${ns}/shell/ws`, { headers: admin.headers });
  t.equal(plain.status, 400, 'a plain GET (no upgrade)');
  const requestId = uniqueName('term-refused');
  await t.rejects(openTerminal(podTerminal('shell'), viewer, requestId));
  t.match(await eventually('the refusal in the audit log', () => auditOf(requestId)), {
    resource: 'pods/exec',
    name: 'shell',
    result: 'failure',
    status: 403,
  });
});

t.test('a node terminal: a shell on the host; its pod goes when the client is killed', async (t) => {
  const marker = `/tmp/${uniqueName('kiteline-node-terminal')}`;
  const secret = uniqueName('written-on-the-host');
  writeFileSync(marker, `${secret}\n`);
  t.teardown(() => rmSync(marker, { force: true }));
  const before = await nodeTerminalPods();
  const requestId = uniqueName('node-session');
  const term = await openTerminal(`${wsBase(gw)}/api/v1/node-terminal/${NODE}/ws`, admin, requestId);
  t.teardown(() => term.ws.terminate());
  t.match(await term.waitFor('progress', (m) => m.type === 'info'), {
    type: 'info',
    data: /starting pod kube-system\/kiteline-node-shell-\w+ on node target-a-node/,
  });
  await term.waitFor('connected', (m) => m.type === 'connected', 150_000);
  term.type(`cat ${marker}`);
  // The host's own shell runs first: its start-up files may be slow (on these machines root's
  // .bashrc runs `pyenv rehash`, which waits up to 60 s on a stale lock). Typed lines wait for it.
  await term.waitOutput("the host's file", new RegExp(secret), HOST_SHELL_START_MS);
  t.pass("the shell sees the host's files");

  const [pod] = [...(await nodeTerminalPods()).entries()].filter(([name]) => !before.has(name));
  t.ok(pod, 'a pod of its own');
  t.equal(pod[1], NODE, 'pinned to the node');
  const spec = JSON.parse(await kubeSystem(['get', 'pod', pod[0], '-o', 'json'])).spec;
  t.match(spec, {
    nodeName: NODE,
    hostPID: true,
    hostNetwork: true,
    tolerations: [{ operator: 'Exists' }],
    containers: [
      { image: 'kiteline.local/busybox:1', imagePullPolicy: 'IfNotPresent', securityContext: { privileged: true } },
    ],
  });

  term.ws.terminate(); // the socket dies without a close frame
  await eventually('the pod to be deleted', async () => !(await nodeTerminalPods()).has(pod[0]), 90_000, 500);
  t.pass('the pod is gone');
  t.match(await eventually('the audit record', () => auditOf(requestId)), {
    resource: 'nodes/terminal',
    name: NODE,
    pod: `kube-system/${pod[0]}`,
    result: 'success',
    status: 101,
  });
});

t.test('a node terminal with the shell asked for, which exits: close, then the pod goes', async (t) => {
  const before = await nodeTerminalPods();
  // sh by name: the host's sh, which reads no .bashrc (and so starts at once on these machines).
  const term = await openTerminal(`${wsBase(gw)}/api/v1/node-terminal/${NODE}/ws?shell=sh`, admin);
  t.teardown(() => term.ws.terminate());
  await term.waitFor('connected', (m) => m.type === 'connected', 150_000);
  const [pod] = [...(await nodeTerminalPods()).keys()].filter((name) => !before.has(name));
  t.ok(pod, 'its pod runs');
  term.type('echo "zero=[$0] $(hostname)"');
  await term.waitOutput('the named shell on the host', new RegExp(`zero=\\[sh\\] ${hostname()}`), HOST_SHELL_START_MS);
  term.type('exit 0');
  t.match(await term.waitFor('close', (m) => m.type === 'close', HOST_SHELL_START_MS), { exitCode: 0 });
  t.equal(await term.closeCode, 1000);
  await eventually('the pod to be deleted', async () => !(await nodeTerminalPods()).has(pod), 90_000, 500);
  t.pass('the pod is gone');
});

t.test('a client that vanishes before the handshake leaves no pod', async (t) => {
  const requestId = uniqueName('node-gone-early');
  const { port } = new URL(gw.url);
  const socket = connect(Number(port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const head = [
    `GET /api/v1/node-terminal/${NODE}/ws HTTP/1.1`,
    `host: 127.0.0.1:${port}`,
    'upgrade: websocket',
    'connection: Upgrade',
    `sec-websocket-key: ${randomBytes(16).toString('base64')}`,
    'sec-websocket-version: 13',
    `authorization: ${admin.key}`,
    `x-request-id: ${requestId}`,
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n`);
  socket.destroy(); // gone before the gateway could answer
  const record = await eventually('the audit record', () => auditOf(requestId), 60_000, 200);
  t.match(
    record,
    { resource: 'nodes/terminal', name: NODE, result: 'failure', pod: /^kube-system\/kiteline-node-shell-/ },
    `the pod was created (${String(record.pod)}), the session refused (${String(record.status)})`,
  );
  const pod = String(record.pod).split('/')[1];
  await eventually('the pod to be deleted', async () => !(await nodeTerminalPods()).has(pod), 60_000, 500);
  t.pass('and deleted');
});

t.test('who may open a node terminal', async (t) => {
  const url = `${wsBase(gw)}/api/v1/node-terminal/${NODE}/ws`;
  const before = await nodeTerminalPods();
  t.equal(await wsRefusal(url, viewer.headers), 403, 'the viewer');
  t.equal(await wsRefusal(url, almostAdmin.headers), 403, 'every verb on everything, but not the admin role');
  t.equal(await wsRefusal(url, {}), 401, 'anonymous');
  t.equal(await wsRefusal(`${url}?shell=sh%3Breboot`, admin.headers), 400, 'a shell that is no plain name');
  t.equal(
    await wsRefusal(`${wsBase(gw)}/api/v1/node-terminal/no-such-node/ws`, admin.headers),
    404,
    "a missing node: the cluster's 404",
  );
  t.same(
    [...(await nodeTerminalPods()).keys()].filter((name) => !before.has(name)),
    [],
    'no pod was created for any of them',
  );
  // Root on a node of kiteline's own host cluster would read kiteline's Secrets there.
  const host = await testControlPlane('host');
  t.equal(
    await wsRefusal(`${wsBase(gw)}/api/v1/node-terminal/${host.node!.name}/ws?x-cluster-name=self`, admin.headers),
    403,
    "kiteline's own host cluster, even for an admin",
  );
  const onHost = await namespacedKubectl(
    host.kubeconfigPath,
    'kube-system',
  )(['get', 'pods', '-l', 'kiteline.io/node-terminal=true', '-o', 'name']);
  t.equal(onHost.trim(), '', 'no pod was created on the host cluster');
});

t.test('the gateway shuts down: the node terminal pod goes too', async (t) => {
  const other = await startGateway(t, { logName });
  const otherAdmin = await bootstrapAdmin(other);
  await addReadyCluster(other, otherAdmin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
  const before = await nodeTerminalPods();
  // sh by name: bash would be killed while its start-up files run, and on these machines root's
  // .bashrc then leaves `pyenv rehash`'s lock behind, which makes every later host shell wait 60 s.
  const term = await openTerminal(`${wsBase(other)}/api/v1/node-terminal/${NODE}/ws?shell=sh`, otherAdmin);
  await term.waitFor('connected', (m) => m.type === 'connected', 150_000);
  const [pod] = [...(await nodeTerminalPods()).keys()].filter((name) => !before.has(name));
  t.ok(pod, 'its pod runs');
  await other.close();
  t.notOk((await nodeTerminalPods()).has(pod), 'deleted before the gateway finished closing');
  t.not(await term.closeCode, 1000, 'the session ended with the gateway');
});
