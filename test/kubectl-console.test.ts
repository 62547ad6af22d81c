// Kite's kubectl console (GET /api/v1/kubectl-terminal/ws) against the target-a node: kubectl runs
// in a short-lived pod on the cluster with a kubeconfig that points back at kiteline's Kubernetes
// API for that cluster, so it acts as the signed-in user (a role limited to one namespace stays
// limited), its token is bound to that one cluster (a cluster the user's roles also reach is refused
// to it), and pod and token are gone when the session ends or the client vanishes. The gateway
// listens on the host side of target-a's node link, the address the node's pods reach, over https
// (kubectl sends tokens only over https). Then the refusals: the console switched off, an API key, a
// user without the cluster, anonymous callers, a plain GET.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { PACKAGE_ROOT } from '../src/config.js';
import { networkFor } from '../src/controlplane/network.js';
import { importIntoNode } from '../src/controlplane/node.js';
import { freePort } from '../src/controlplane/ports.js';
import { imageCacheDir } from '../src/controlplane/images.js';
import { kubectlInBackground, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  signedInUser,
  testKubeconfig,
} from './helpers/fixtures.js';
import { auditRecordOf, call, startGateway } from './helpers/gateway.js';
import { namespacedKubectl, openWs, wsRefusal, type WsClient } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
if (!target.node) throw new Error('target-a runs without its node');
const hostAddress = networkFor(target.node.slot).hostAddress;

// The console's image: this release's kubectl and busybox, imported into the node's containerd.
const built = spawnSync('bash', [join(PACKAGE_ROOT, 'scripts', 'build-kubectl-image.sh')], { encoding: 'utf8' });
if (built.status !== 0) throw new Error(`build-kubectl-image.sh: ${built.stderr}`);
const images = imageCacheDir();
const image = readFileSync(join(images, 'kubectl.ref'), 'utf8').trim();
importIntoNode(target.dir, [{ ref: image, archive: join(images, 'kubectl.tar') }]);

const tlsPort = await freePort();
const external = `https://${hostAddress}:${tlsPort}`;
const logName = uniqueName('kubectl-console');
const gw = await startGateway(t, {
  logName,
  env: { HOST: hostAddress, KITELINE_TLS_PORT: String(tlsPort), KITELINE_EXTERNAL_URL: external },
});
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

const ns = uniqueName('console');
const k = namespacedKubectl(target.kubeconfigPath, ns);
const kubeSystem = namespacedKubectl(target.kubeconfigPath, 'kube-system');
await k(['create', 'namespace', ns]);
await k(['create', 'configmap', 'marker', '--from-literal=seen=yes']);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
// The same namespace on the host cluster, which the user's role reaches too.
const hostPlane = await testControlPlane('host');
const onHost = namespacedKubectl(hostPlane.kubeconfigPath, ns);
await onHost(['create', 'namespace', ns]);
await onHost(['create', 'configmap', 'host-marker', '--from-literal=seen=yes']);
t.teardown(() => namespacedKubectl(hostPlane.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));

const GENERAL = '/api/v1/admin/general-setting';
async function setConsole(enabled: boolean): Promise<void> {
  const res = await call(gw.url, 'PUT', GENERAL, {
    headers: admin.headers,
    body: { kubectlEnabled: enabled, kubectlImage: image },
  });
  if (res.status !== 200) throw new Error(`general setting: ${res.status} ${res.text}`);
}
await setConsole(true);

// A user whose role reads configmaps and pods of one namespace, on every cluster, and who may open
// consoles (a role that grants create on kubectl-terminal).
const ONE_NAMESPACE = uniqueName('one-namespace');
await createRole(gw, admin, {
  name: ONE_NAMESPACE,
  clusters: ['*'],
  namespaces: [ns],
  resources: ['configmaps', 'pods'],
  verbs: ['get', 'list', 'watch'],
});
const CONSOLE_ROLE = uniqueName('console');
await createRole(gw, admin, {
  name: CONSOLE_ROLE,
  clusters: ['*'],
  namespaces: ['*'],
  resources: ['kubectl-terminal'],
  verbs: ['create'],
});
const username = uniqueName('console-user');
const cookie = await signedInUser(gw, admin, username, [ONE_NAMESPACE, CONSOLE_ROLE]);
const asUser = { cookie };

const consoleUrl = (query = '') => `${gw.url.replace(/^http/, 'ws')}/api/v1/kubectl-terminal/ws${query}`;

interface Console extends WsClient {
  output(): string;
  run(command: string, done: RegExp, timeoutMs?: number): Promise<string>;
  closeCode: Promise<number>;
}

async function openConsole(headers: Record<string, string>, requestId: string, cluster = 'a'): Promise<Console> {
  const client = await openWs(consoleUrl(`?x-cluster-name=${cluster}`), { ...headers, 'x-request-id': requestId });
  const closeCode = new Promise<number>((resolve) => client.ws.once('close', (code) => resolve(code)));
  const output = () =>
    client.messages
      .filter((m) => m.type === 'stdout')
      .map((m) => m.data)
      .join('');
  return {
    ...client,
    output,
    closeCode,
    run: async (command, done, timeoutMs = 60_000) => {
      const before = output().length;
      client.ws.send(JSON.stringify({ type: 'stdin', data: `${command}\r` }));
      await eventually(command, () => done.test(output().slice(before)), timeoutMs, 50);
      return output().slice(before);
    },
  };
}

/** The console pods on target-a (by the label every console pod carries). */
async function consolePods(): Promise<string[]> {
  const list = JSON.parse(
    await kubeSystem(['get', 'pods', '-l', 'kiteline.io/kubectl-console=true', '-o', 'json']),
  ) as {
    items: Array<{ metadata: { name: string; deletionTimestamp?: string } }>;
  };
  return list.items.filter((pod) => !pod.metadata.deletionTimestamp).map((pod) => pod.metadata.name);
}

/** The signed-in user's tokens, as GET /api/users/me/kubeconfig-tokens lists them. */
async function ownTokens(): Promise<Array<{ name: string; audience: string; clusters?: string[] }>> {
  const res = await call(gw.url, 'GET', '/api/users/me/kubeconfig-tokens', { headers: asUser });
  return res.body.tokens;
}

const auditOf = (requestId: string) => auditRecordOf(logName, requestId);

t.test("kubectl in the console acts as the user, on the console's cluster only", async (t) => {
  const requestId = uniqueName('console-session');
  const term = await openConsole(asUser, requestId);
  t.teardown(() => term.ws.terminate());
  await term.waitFor('connected', (m) => m.type === 'connected', 150_000);
  const info = term.messages.find((m) => m.type === 'info');
  t.match(info?.data, /kube-system\/kiteline-kubectl-/, 'the pod it starts is named while it starts');

  const pods = await consolePods();
  t.equal(pods.length, 1, 'one console pod runs');
  const tokens = await ownTokens();
  const bound = tokens.filter((token) => token.clusters !== undefined);
  t.same(
    bound.map((token) => token.clusters),
    [['a']],
    "the user holds one token for the console, bound to the console's cluster",
  );
  t.match(bound[0], { name: /^console-/, audience: 'console' }, 'a console token');

  const listed = await term.run(`kubectl -n ${ns} get configmaps -o name; echo "done-$((1+1))"`, /done-2/);
  t.match(listed, /configmap\/marker/, "the user's own namespace: kubectl lists it");
  const refused = await term.run(`kubectl -n kube-system get pods; echo "done-$((2+1))"`, /done-3/);
  t.match(refused, /forbidden/i, 'another namespace: refused, as the user is refused there');
  t.notMatch(refused, /kiteline-kubectl-/, "and nothing of it shows (not the console's own pod)");
  const server = `${external}/k8s/clusters/self`;
  const elsewhere = await term.run(
    `kubectl --server ${server} -n ${ns} get configmaps -o name; echo "done-$((3+1))"`,
    /done-4/,
  );
  t.notMatch(elsewhere, /host-marker/, "another cluster the user's roles reach: the console's token does not");
  t.match(elsewhere, /unauthorized|forbidden|not ?found/i, `and kiteline says no (${elsewhere.trim().slice(0, 200)})`);
  // The same user's own kubeconfig (POST /api/v1/kubeconfig) reads it there: the refusal is the console token's.
  const minted = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: asUser });
  t.equal(minted.status, 200, "the user's own kubeconfig");
  const ownKubeconfig = join(mkdtempSync(join(tmpdir(), 'console-')), 'kubeconfig');
  writeFileSync(ownKubeconfig, minted.text, { mode: 0o600 });
  const own = await kubectlInBackground(ownKubeconfig, [
    '--context',
    'self',
    '-n',
    ns,
    'get',
    'configmaps',
    '-o',
    'name',
  ]);
  t.match(own.stdout, /configmap\/host-marker/, 'with which the user reads that cluster');
  const whoCanSee = await term.run('ls -la /kube; id; echo "done-$((4+1))"', /done-5/);
  t.match(whoCanSee, /uid=65534/, 'the shell runs as nobody');
  t.match(whoCanSee, /-rw[-r]+ +1 +nobody +nogroup +\d+ .* config/, 'its kubeconfig is in the in-memory home');

  term.ws.send(JSON.stringify({ type: 'stdin', data: 'exit\r' }));
  t.equal(await term.closeCode, 1000, 'exit ends the session cleanly');
  await eventually('the console pod to go', async () => (await consolePods()).length === 0, 60_000);
  t.pass('the pod is deleted when the session ends');
  await eventually('the token to be revoked', async () => (await ownTokens()).every((x) => !x.clusters), 30_000);
  t.pass('and its token revoked');

  const audit = await eventually('the audit record', () => auditOf(requestId), 30_000);
  t.match(
    audit,
    { who: username, cluster: 'a', resource: 'kubectl-terminal', verb: 'create', status: 101, result: 'success' },
    'one audit record of the session, as the user',
  );
});

t.test('a client that vanishes leaves no pod and no token behind', async (t) => {
  const term = await openConsole(asUser, uniqueName('console-vanish'));
  await term.waitFor('connected', (m) => m.type === 'connected', 150_000);
  t.equal((await consolePods()).length, 1, 'the console runs');
  t.equal((await ownTokens()).filter((x) => x.audience === 'console').length, 1, 'with its token');
  term.ws.terminate();
  await eventually('the console pod to go', async () => (await consolePods()).length === 0, 90_000);
  await eventually('the token to be revoked', async () => (await ownTokens()).every((x) => !x.clusters), 30_000);
  t.pass('pod deleted and token revoked');
});

t.test('who may not open a console', async (t) => {
  const url = consoleUrl('?x-cluster-name=a');
  t.equal(await wsRefusal(url, {}), 401, 'anonymous: 401');
  const key = await apiKeyWithRoles(gw, admin, uniqueName('key'), ['admin']);
  t.equal(
    await wsRefusal(url, key.headers),
    403,
    "an API key (even an admin's): 403, consoles are for signed-in users",
  );
  const outsider = await signedInUser(gw, admin, uniqueName('outsider'), []);
  t.equal(await wsRefusal(url, { cookie: outsider }), 404, 'a user with no role on the cluster: 404, as the cluster');
  const viewer = await signedInUser(gw, admin, uniqueName('viewer'), ['viewer']);
  t.equal(await wsRefusal(url, { cookie: viewer }), 403, 'a viewer (no create on kubectl-terminal): 403');
  const onHostCluster = await openConsole(asUser, uniqueName('console-host'), 'self').catch((err: unknown) => err);
  t.match(
    onHostCluster,
    { status: 403, body: /host cluster/ },
    "kiteline's own host cluster: 403, a shell on its pod network reaches kiteline's pods",
  );
  // At most three open at once per user: the fourth waits.
  const open = await Promise.all([1, 2, 3].map(() => openConsole(asUser, uniqueName('console-many'))));
  t.teardown(() => open.forEach((c) => c.ws.terminate()));
  t.equal(await wsRefusal(url, asUser), 429, 'a fourth console at once: 429');
  open.forEach((c) => c.ws.terminate());
  await eventually('the consoles to go', async () => (await consolePods()).length === 0, 90_000);
  const plain = await call(gw.url, 'GET', '/api/v1/kubectl-terminal/ws?x-cluster-name=a', { headers: asUser });
  t.equal(plain.status, 400, 'a plain GET: 400');

  const capability = async () =>
    (await call(gw.url, 'GET', '/api/v1/bootstrap', { headers: asUser })).body.capabilities.kubectlConsole;
  t.equal(await capability(), true, "GET /api/v1/bootstrap: the console is on (Kite's UI shows its button)");
  await setConsole(false);
  t.teardown(() => setConsole(true));
  t.equal(await capability(), false, 'and off once switched off');
  t.equal(await wsRefusal(url, asUser), 403, 'the console switched off in the general settings: 403');
  t.same(await consolePods(), [], 'no refusal started a pod');
  await eventually('no console token left', async () => {
    const every = await call(gw.url, 'GET', '/api/v1/admin/kubeconfig-tokens?size=100', { headers: admin.headers });
    return every.status === 200 && every.body.tokens.every((x: { audience: string }) => x.audience !== 'console');
  });
  t.pass("nor left a console token, of anyone's");
});
