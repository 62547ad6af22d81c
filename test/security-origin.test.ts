// Issue 32, point 10: a page of another site (or of a sibling subdomain, which SameSite=Lax does
// not stop) cannot use the signed-in user's cookie for anything with side effects. A cross-site
// WebSocket to Kite's terminals is refused before an exec is opened or a node terminal pod created
// (a fake bash in the pod marks every exec that starts; a watch from the resourceVersion before the
// attempt shows every pod created); the body-less POSTs (cordon, logout of all sessions) sent as a
// cross-site form would send them change nothing. The same requests from kiteline's own origin work.
import t from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl, openWs, wsRefusal } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const node = target.node!.name;
const gw = await startGateway(t, { logName: 'security-origin' });
// A name of its own: node terminal pods name who opened them, and other files use target-a's node too.
const ADMIN = uniqueName('origin-admin');
const admin = await bootstrapAdmin(gw, ADMIN);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
const login = await call(gw.url, 'POST', '/api/auth/login/password', {
  body: { username: ADMIN, password: 'correct-horse-battery' },
});
if (login.status !== 204) throw new Error(`login: ${login.status} ${login.text}`);
const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
const OWN = gw.url; // http://127.0.0.1:<port>
const EVIL = 'http://evil.example';
const wsBase = gw.url.replace(/^http/, 'ws');

const ns = uniqueName('origin');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => kubectl(target.kubeconfigPath, ['delete', 'namespace', ns, '--wait=false']));
// A bash that leaves a mark, then runs sh: every terminal exec starts it (bash is preferred).
const MARKING_BASH =
  `printf '#!/bin/sh\\ntouch /tmp/exec-opened\\nexec sh "$@"\\n' > /bin/bash && chmod +x /bin/bash && ` +
  'trap "exit 0" TERM; while true; do sleep 1; done';
await k(['apply', '-f', '-'], JSON.stringify(busyboxPod('marked', { app: 'marked' }, ['sh', '-c', MARKING_BASH])));
await k(['wait', '--for=condition=Ready', 'pod/marked', '--timeout=120s']);
const execOpened = () =>
  kubectl(target.kubeconfigPath, ['-n', ns, 'exec', 'marked', '--', 'ls', '/tmp/exec-opened']).status === 0;

t.test('a cross-site WebSocket with a valid cookie opens no exec', async (t) => {
  const url = `${wsBase}/api/v1/terminal/${ns}/marked/ws`;
  t.equal(await wsRefusal(url, { cookie, origin: EVIL }), 403, 'refused');
  await new Promise((resolve) => setTimeout(resolve, 2000));
  t.notOk(execOpened(), 'no exec was started in the pod');
  // From kiteline's own origin the terminal opens, and the mark shows the check above can see an exec.
  const client = await openWs(url, { cookie, origin: OWN });
  await client.waitFor('connected', (m) => m.type === 'connected');
  client.ws.close();
  await eventually('the exec mark', () => execOpened(), 30_000, 500);
});

t.test('a cross-site WebSocket with a valid cookie creates no node terminal pod', async (t) => {
  const list = JSON.parse(
    kubectl(target.kubeconfigPath, ['get', '--raw', '/api/v1/namespaces/kube-system/pods?limit=1']).stdout,
  );
  const from = list.metadata.resourceVersion as string;
  const url = `${wsBase}/api/v1/node-terminal/${node}/ws`;
  t.equal(await wsRefusal(url, { cookie, origin: EVIL }), 403, 'refused');
  t.equal(await wsRefusal(url, { cookie, 'sec-fetch-site': 'same-site' }), 403, 'a sibling site is refused too');
  const events = kubectl(target.kubeconfigPath, [
    'get',
    '--raw',
    `/api/v1/namespaces/kube-system/pods?watch=1&resourceVersion=${from}&timeoutSeconds=3` +
      '&labelSelector=kiteline.io%2Fnode-terminal%3Dtrue',
  ]).stdout;
  const ours = events
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as { type: string; object: { metadata: { annotations?: Record<string, string> } } })
    .filter(
      (event) => event.type === 'ADDED' && event.object.metadata.annotations?.['kiteline.io/opened-by'] === ADMIN,
    );
  t.same(ours, [], 'no node terminal pod was created');
});

t.test('a cross-site body-less POST changes nothing', async (t) => {
  t.teardown(() => kubectl(target.kubeconfigPath, ['uncordon', node]));
  const unschedulable = () =>
    !!JSON.parse(kubectl(target.kubeconfigPath, ['get', 'node', node, '-o', 'json']).stdout).spec.unschedulable;
  const cordon = (headers: Record<string, string>) =>
    call(gw.url, 'POST', `/api/v1/nodes/_all/${node}/cordon?x-cluster-name=a`, {
      headers: { cookie, ...headers },
      raw: '',
    });

  // What a form on another site sends: text/plain, its Origin, Sec-Fetch-Site cross-site.
  const form = await cordon({ 'content-type': 'text/plain', origin: EVIL, 'sec-fetch-site': 'cross-site' });
  t.equal(form.status, 403, form.text);
  t.notOk(unschedulable(), 'the node was not cordoned');
  const sibling = await cordon({ 'content-type': 'text/plain', 'sec-fetch-site': 'same-site' });
  t.equal(sibling.status, 403, `a sibling subdomain is another origin: ${sibling.text}`);
  t.notOk(unschedulable(), 'the node was not cordoned');

  const logoutAll = await call(gw.url, 'POST', '/api/auth/logout?all=true', {
    headers: { cookie, 'content-type': 'text/plain', origin: EVIL },
    raw: '',
  });
  t.equal(logoutAll.status, 403, logoutAll.text);
  t.equal((await call(gw.url, 'GET', '/api/auth/user', { headers: { cookie } })).status, 200, 'the session lives');

  // Kite's UI: same origin, JSON content type and no body.
  const own = await cordon({ 'content-type': 'application/json', origin: OWN, 'sec-fetch-site': 'same-origin' });
  t.equal(own.status, 200, own.text);
  t.ok(unschedulable(), 'cordoned from kiteline’s own origin');
  const uncordon = await call(gw.url, 'POST', `/api/v1/nodes/_all/${node}/uncordon?x-cluster-name=a`, {
    headers: { cookie, 'content-type': 'application/json', origin: OWN },
    raw: '',
  });
  t.equal(uncordon.status, 200, uncordon.text);
  t.notOk(unschedulable(), 'uncordoned');
});
