// Issue 32 point 8: revocation ends what is already open. Authentication happens once per request,
// so before this a stream opened before a revocation went on for as long as it lasted: a kubectl
// exec or port-forward, a proxied watch, Kite's terminal, a live pod list. Now every open stream is
// checked again whenever the identity caches change (on every replica: the stream here runs on a
// second replica, the revocation goes through the first or through kubectl on the host) and when
// its credential expires, and ends within seconds. A bystander's streams stay open throughout.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { objectNameFor } from '../src/host/names.js';
import { login } from './helpers/auth-session.js';
import { kubectl, TEST_DIR, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl, openSse, openWs } from './helpers/workload-streams.js';

/** How soon after a revocation its streams must have ended. */
const REVOKED_WITHIN_MS = 10_000;

const target = await testControlPlane('target-a');
const host = await testControlPlane('host');
const gw = await startGateway(t, { logName: 'security-revocation' });
// A second replica on the same install namespace: the streams run there, the revocations land on gw
// (or on the host with kubectl), so what ends them is the replica's watch-backed caches.
// (kubectl sends its token over https only: the second replica's kubeconfigs point at its https listener.)
const gw2 = await startGateway(t, {
  logName: 'security-revocation-2',
  namespace: gw.namespace,
  env: { KITELINE_TLS_PORT: '0' },
});
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await eventually(
  'cluster a on the second replica',
  async () =>
    (await call(gw2.url, 'GET', '/api/v1/clusters', { headers: admin.headers })).text.includes('"ready":true'),
  60_000,
  200,
);

const ns = uniqueName('revoke');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
const IDLE = 'trap "exit 0" TERM; while true; do sleep 1; done';
await k(
  ['apply', '-f', '-'],
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      busyboxPod('shell', { app: 'shell' }, ['sh', '-c', IDLE]),
      busyboxPod('web', { app: 'web' }, ['httpd', '-f', '-p', '8080', '-h', '/www']),
    ],
  }),
);
await k(['wait', '--for=condition=Ready', 'pod/shell', 'pod/web', '--timeout=120s']);

const OPS_ROLE = uniqueName('ops');
await createRole(gw, admin, { name: OPS_ROLE, clusters: ['*'], namespaces: [ns], resources: ['*'], verbs: ['*'] });
const roles = await call(gw.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
const opsRoleId = (roles.body.roles as Array<{ id: number; name: string }>).find((r) => r.name === OPS_ROLE)!.id;

/** A password user holding the ops role; returns its id and a session cookie on the second replica. */
async function opsUser(username: string): Promise<{ id: number; cookie: string }> {
  const created = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers: admin.headers,
    body: { username, password: 'stream-password-1', name: username },
  });
  if (created.status !== 201) throw new Error(`create user ${username}: ${created.status} ${created.text}`);
  await eventually(
    `role ${OPS_ROLE} for ${username}`,
    async () =>
      (
        await call(gw.url, 'POST', `/api/v1/admin/roles/${opsRoleId}/assign`, {
          headers: admin.headers,
          body: { subjectType: 'user', subject: username },
        })
      ).status < 300,
  );
  const cookie = await eventually(`${username} to sign in on the second replica`, async () => {
    const session = await login(gw2.url, username, 'stream-password-1').catch(() => undefined);
    if (!session) return undefined;
    const me = await call(gw2.url, 'GET', '/api/auth/user', { headers: { cookie: session } });
    return me.status === 200 && JSON.stringify(me.body).includes(OPS_ROLE) ? session : undefined;
  });
  return { id: created.body.id as number, cookie };
}

/** A kubeconfig token of the user, minted on (and pointing at) the second replica, in a file. */
async function kubeconfigOf(cookie: string, name: string): Promise<{ path: string; token: string }> {
  const res = await call(gw2.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  if (res.status !== 200) throw new Error(`kubeconfig: ${res.status} ${res.text}`);
  const path = join(TEST_DIR, `${uniqueName(name)}.kubeconfig`);
  writeFileSync(path, res.text);
  return { path, token: /token: (\S+)/.exec(res.text)![1] };
}

/** An open HTTP answer that never ends by itself (a watch), and whether it has ended. */
interface OpenAnswer {
  status: number;
  ended: () => boolean;
  close: () => void;
}

function openWatch(base: string, path: string, headers: Record<string, string>): Promise<OpenAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { headers }, (res) => {
      let ended = false;
      res.on('data', () => undefined);
      res.once('close', () => (ended = true));
      res.once('error', () => (ended = true));
      resolve({ status: res.statusCode ?? 0, ended: () => ended, close: () => req.destroy() });
    });
    req.once('error', reject);
    req.end();
  });
}

/** A kubectl child that runs until something ends it. */
interface KubectlStream {
  output: () => string;
  exited: () => boolean;
  child: ChildProcess;
}

function kubectlStream(kubeconfig: string, args: string[]): KubectlStream {
  const child = spawn(ensureBinaries().kubectl, ['--kubeconfig', kubeconfig, '-n', ns, ...args]);
  let out = '';
  let exited = false;
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.once('exit', () => (exited = true));
  t.teardown(() => void (exited || child.kill('SIGKILL')));
  return { output: () => out, exited: () => exited, child };
}

/** `kubectl exec -i` into the shell pod, echoing stdin, once a line made the round trip. */
async function openExec(kubeconfig: string): Promise<KubectlStream> {
  const exec = kubectlStream(kubeconfig, [
    'exec',
    '-i',
    'shell',
    '--',
    'sh',
    '-c',
    'while read l; do echo "got $l"; done',
  ]);
  await eventually(
    'the exec to echo stdin',
    () => {
      if (exec.exited()) throw new Error(`kubectl exec exited: ${exec.output()}`);
      exec.child.stdin!.write('through-kiteline\n');
      return exec.output().includes('got through-kiteline');
    },
    60_000,
    500,
  );
  return exec;
}

/** `kubectl port-forward` to the web pod, once a page came through it. */
async function openPortForward(kubeconfig: string): Promise<KubectlStream> {
  const forward = kubectlStream(kubeconfig, ['port-forward', 'pod/web', ':8080']);
  const port = await eventually('the forwarded port', () => {
    if (forward.exited()) throw new Error(`kubectl port-forward exited: ${forward.output()}`);
    return /Forwarding from 127\.0\.0\.1:(\d+)/.exec(forward.output());
  });
  const page = await eventually('a page through the forwarded port', async () => {
    const res = await fetch(`http://127.0.0.1:${port[1]}/`).catch(() => undefined);
    return res?.status === 200 ? res : undefined;
  });
  t.equal(page.status, 200);
  return forward;
}

async function endedSoon(what: string, ended: () => boolean): Promise<void> {
  await eventually(what, ended, REVOKED_WITHIN_MS, 50);
}

const wsBase = (g: TestGateway) => g.url.replace(/^http/, 'ws');
const configmapWatch = `/k8s/clusters/a/api/v1/namespaces/${ns}/configmaps?watch=1`;

// A bystander holding the same role, with streams of every kind open through all the tests.
const bystander = await opsUser(uniqueName('bystander'));
const bystanderKc = await kubeconfigOf(bystander.cookie, 'bystander');
const bystanderKey = await apiKeyWithRoles(gw, admin, uniqueName('bystander-key'), ['admin']);
const bystanderStreams = {
  exec: await openExec(bystanderKc.path),
  watch: await openWatch(gw2.url, configmapWatch, { authorization: `Bearer ${bystanderKc.token}` }),
  keyWatch: await openWatch(gw2.url, configmapWatch, { authorization: `Bearer ${bystanderKey.key}` }),
  terminal: await openWs(`${wsBase(gw2)}/api/v1/terminal/${ns}/shell/ws`, { cookie: bystander.cookie }),
  sse: await openSse(`${gw2.url}/api/v1/pods/${ns}/watch`, { cookie: bystander.cookie }),
};
t.teardown(() => {
  bystanderStreams.watch.close();
  bystanderStreams.keyWatch.close();
  bystanderStreams.terminal.ws.terminate();
  bystanderStreams.sse.close();
});

t.test('disabling a user ends its kubectl exec and its proxied watch within seconds', async (t) => {
  const username = uniqueName('disabled');
  const user = await opsUser(username);
  const kc = await kubeconfigOf(user.cookie, username);
  const exec = await openExec(kc.path);
  const watch = await openWatch(gw2.url, configmapWatch, { authorization: `Bearer ${kc.token}` });
  t.equal(watch.status, 200, 'the watch is open');
  const plainWatch = await openWatch(gw2.url, `/api/v1/configmaps/${ns}?watch=true&x-cluster-name=a`, {
    cookie: user.cookie,
  });
  t.equal(plainWatch.status, 200, "a watch on kiteline's resource route is open too");
  t.teardown(() => {
    watch.close();
    plainWatch.close();
  });

  const disabled = await call(gw.url, 'POST', `/api/v1/admin/users/${user.id}/enable`, {
    headers: admin.headers,
    body: { enabled: false },
  });
  t.equal(disabled.status, 200, 'disabled on the first replica');
  await endedSoon('the exec to end', exec.exited);
  t.pass('kubectl exec ended');
  await endedSoon('the proxied watch to end', watch.ended);
  t.pass('the proxied watch ended');
  await endedSoon('the resource-route watch to end', plainWatch.ended);
  t.pass('the resource-route watch ended');
});

t.test("deleting a kubeconfig token's APIKey (kubectl on the host) ends its watch and port-forward", async (t) => {
  const username = uniqueName('tokened');
  const user = await opsUser(username);
  const kc = await kubeconfigOf(user.cookie, username);
  const forward = await openPortForward(kc.path);
  const watch = await openWatch(gw2.url, configmapWatch, { authorization: `Bearer ${kc.token}` });
  t.equal(watch.status, 200, 'the watch is open');
  t.teardown(() => watch.close());

  const id = /^kl_(\d+)_/.exec(kc.token)![1];
  const deleted = kubectl(host.kubeconfigPath, [
    '-n',
    gw.namespace,
    'delete',
    'apikeys.kiteline.io',
    '-l',
    `kiteline.io/id=${id}`,
  ]);
  t.equal(deleted.status, 0, `the token's APIKey deleted with kubectl: ${deleted.stdout.trim()}`);
  await endedSoon('the port-forward to end', forward.exited);
  t.pass('kubectl port-forward ended');
  await endedSoon('the watch to end', watch.ended);
  t.pass('the watch ended');
});

t.test(
  "a user losing its role: Kite's terminal closes (1008) and the live pod list sends an error, then ends",
  async (t) => {
    const username = uniqueName('demoted');
    const user = await opsUser(username);
    const terminal = await openWs(`${wsBase(gw2)}/api/v1/terminal/${ns}/shell/ws`, { cookie: user.cookie });
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      terminal.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    t.teardown(() => terminal.ws.terminate());
    await terminal.waitFor('connected', (m) => m.type === 'connected');
    const sse = await openSse(`${gw2.url}/api/v1/pods/${ns}/watch`, { cookie: user.cookie });
    t.teardown(() => sse.close());
    t.equal(sse.status, 200);
    await sse.waitFor('the pods there', (e) => e.event === 'added');

    const removed = await call(
      gw.url,
      'DELETE',
      `/api/v1/admin/roles/${opsRoleId}/assign?subjectType=user&subject=${encodeURIComponent(username)}`,
      { headers: admin.headers },
    );
    t.equal(removed.status, 200, 'the role taken from the user');
    await endedSoon('the terminal to close', terminal.closed);
    t.match(await closed, { code: 1008, reason: /revoked/ }, 'closed with 1008 and why');
    const error = await sse.waitFor('an error event', (e) => e.event === 'error', REVOKED_WITHIN_MS);
    t.match(error.data, /revoked/, `the error event says why (${error.data})`);
    await endedSoon('the event stream to end', sse.ended);
    t.pass('the event stream ended');
  },
);

t.test('a role edited so it no longer allows what a stream does ends that stream', async (t) => {
  const role = uniqueName('cm-watcher');
  await createRole(gw, admin, {
    name: role,
    clusters: ['*'],
    namespaces: [ns],
    resources: ['configmaps'],
    verbs: ['watch'],
  });
  const key = await apiKeyWithRoles(gw2, admin, uniqueName('cm-watcher'), [role]);
  const watch = await openWatch(gw2.url, configmapWatch, { authorization: `Bearer ${key.key}` });
  t.equal(watch.status, 200, 'the watch is open');
  t.teardown(() => watch.close());
  const patched = kubectl(host.kubeconfigPath, [
    '-n',
    gw.namespace,
    'patch',
    'roles.kiteline.io',
    objectNameFor('role', role),
    '--type',
    'merge',
    '-p',
    JSON.stringify({ spec: { verbs: ['get', 'list'] } }),
  ]);
  t.equal(patched.status, 0, `the role edited with kubectl: ${patched.stderr.trim()}`);
  await endedSoon('the watch to end', watch.ended);
  t.pass('the watch ended once its role no longer allows watch');
});

t.test("an API key's expiry ends its open watch when it passes", async (t) => {
  const expiresAt = new Date(Date.now() + 12_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const created = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    headers: admin.headers,
    body: { name: uniqueName('short-lived'), roles: [OPS_ROLE], expiresAt },
  });
  t.equal(created.status, 201);
  const headers = { authorization: created.body.key as string };
  await eventually('the key on the second replica', async () => {
    return (await call(gw2.url, 'GET', '/api/v1/clusters', { headers })).status === 200;
  });
  const watch = await openWatch(gw2.url, configmapWatch, headers);
  t.equal(watch.status, 200, 'the watch is open');
  t.teardown(() => watch.close());
  await eventually('the watch to end', watch.ended, Date.parse(expiresAt) - Date.now() + REVOKED_WITHIN_MS, 50);
  t.ok(Date.now() >= Date.parse(expiresAt), 'not before the key expired');
});

t.test("the bystander's streams, opened before every revocation above, are all still open", async (t) => {
  t.notOk(bystanderStreams.exec.exited(), 'kubectl exec');
  bystanderStreams.exec.child.stdin!.write('still-here\n');
  await eventually('the exec to echo', () => bystanderStreams.exec.output().includes('got still-here'));
  t.notOk(bystanderStreams.watch.ended(), 'the proxied watch with a kubeconfig token');
  t.notOk(bystanderStreams.keyWatch.ended(), 'the proxied watch with an API key');
  t.notOk(bystanderStreams.terminal.closed(), 'the terminal');
  t.notOk(bystanderStreams.sse.ended(), 'the live pod list');
  t.notOk(
    bystanderStreams.sse.events.some((e) => e.event === 'error'),
    'with no error event',
  );
  bystanderStreams.exec.child.kill();
  t.ok(WebSocket.OPEN === bystanderStreams.terminal.ws.readyState, 'the terminal WebSocket is open');
});
