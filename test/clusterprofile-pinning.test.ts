// ClusterProfile sources cannot redirect a credential (issue 32 point 4), on real control planes.
// A ClusterProfile's server comes from its status, its credential from a Secret: whoever may patch
// `clusterprofiles/status` could point the server at a host of their own and receive the token on
// the first probe. The credential Secret pins the server (key "server", or the server of a
// kubeconfig credential); a status naming another server is not connected and says why. The
// attacker's host here is a plain HTTP listener on loopback that records every Authorization header.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../src/config.js';
import { sourcedObjectName } from '../src/host/clusters.js';
import type { ClusterResource, Condition } from '../src/host/resources.js';
import { kubectl, kubectlInBackground, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const CRD = 'clusterprofiles.multicluster.x-k8s.io';

function must(res: { status: number; stderr: string }, what: string): void {
  if (res.status !== 0) throw new Error(`${what}: ${res.stderr}`);
}

const hostKubeconfig = (await testControlPlane('host')).kubeconfigPath;
// As in cluster-sources.test.ts: the published CRD, its CEL rules dropped by the planes.
must(
  kubectl(hostKubeconfig, [
    'apply',
    '--validate=false',
    '-f',
    join(PACKAGE_ROOT, 'test', 'fixtures', 'clusterprofile-crd.yaml'),
  ]),
  'install the ClusterProfile CRD',
);
must(
  kubectl(hostKubeconfig, ['wait', '--for=condition=Established', `crd/${CRD}`, '--timeout=60s']),
  'the ClusterProfile CRD is established',
);
const profileNs = uniqueName('src-pin');
must(kubectl(hostKubeconfig, ['create', 'namespace', profileNs]), `namespace ${profileNs}`);
t.teardown(() => kubectl(hostKubeconfig, ['delete', 'namespace', profileNs, '--wait=false']));

const targetAKubeconfig = testKubeconfig('target-a');
const targetA = parse(targetAKubeconfig);
const a = {
  server: targetA.clusters[0].cluster.server as string,
  caData: targetA.clusters[0].cluster['certificate-authority-data'] as string,
  token: targetA.users[0].user.token as string,
};

/** The attacker's API server: answers like one, and keeps every Authorization header it is sent. */
const received: string[] = [];
const listener = createServer((req: IncomingMessage, res: ServerResponse) => {
  received.push(req.headers.authorization ?? '');
  res.setHeader('content-type', 'application/json');
  res.end(req.url === '/version' ? JSON.stringify({ gitVersion: 'v1.35.4' }) : '{}');
});
await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise((resolve) => listener.close(resolve)));
const attackerServer = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;

const gw = await startGateway(t, {
  env: { KITELINE_CLUSTER_SOURCES: `clusterprofile=${profileNs}`, KITELINE_PROBE_INTERVAL_MS: '500' },
  logName: 'clusterprofile-pinning',
});
const admin = await bootstrapAdmin(gw);

const hostKc = new k8s.KubeConfig();
hostKc.loadFromFile(hostKubeconfig);
const customObjects = hostKc.makeApiClient(k8s.CustomObjectsApi);

async function apply(obj: object): Promise<void> {
  const res = await kubectlInBackground(hostKubeconfig, ['apply', '-f', '-'], JSON.stringify(obj));
  if (res.status !== 0) throw new Error(`kubectl apply: ${res.stderr}`);
}

/** What whoever may patch clusterprofiles/status does: names the server (and its CA). */
async function patchStatus(name: string, cluster: Record<string, unknown>): Promise<void> {
  await customObjects.patchNamespacedCustomObjectStatus(
    {
      group: 'multicluster.x-k8s.io',
      version: 'v1alpha1',
      namespace: profileNs,
      plural: 'clusterprofiles',
      name,
      body: { status: { accessProviders: [{ name: 'kubeconfig', cluster }] } },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}

async function profileWithCredential(name: string, data: Record<string, string>): Promise<void> {
  await apply({
    apiVersion: 'multicluster.x-k8s.io/v1alpha1',
    kind: 'ClusterProfile',
    metadata: { name, namespace: profileNs },
    spec: { displayName: name, clusterManager: { name: 'test-manager' } },
  });
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${name}-credentials`, namespace: profileNs, labels: { 'kiteline.io/clusterprofile': name } },
    stringData: data,
  });
}

function namespaceThrough(cluster: string) {
  return call(gw.url, 'GET', '/api/v1/namespaces/_all/default', {
    headers: { ...admin.headers, 'x-cluster-name': cluster },
  });
}

async function served(cluster: string): Promise<void> {
  await eventually(`${cluster} to serve`, async () => (await namespaceThrough(cluster)).status === 200, 30_000, 50);
}

function readyCondition(name: string): Condition | undefined {
  const objectName = sourcedObjectName('clusterprofile', profileNs, name);
  const res = kubectl(hostKubeconfig, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', objectName, '-o', 'json']);
  if (res.status !== 0) return undefined;
  return (JSON.parse(res.stdout) as ClusterResource).status?.conditions?.find((c) => c.type === 'Ready');
}

/**
 * Waits until the cluster reports that its server is not the pinned one, or until the attacker's
 * listener got a request (today's code sends the token there on the first probe); returns the
 * Ready condition then.
 */
async function refusedOrLeaked(name: string, why: RegExp): Promise<Condition | undefined> {
  return eventually(
    `${name} to refuse the status server`,
    () => {
      if (received.length > 0) return { type: 'Ready', status: 'Unknown', reason: 'Leaked', message: '' };
      const ready = readyCondition(name);
      return ready?.reason === 'SourceInvalid' && why.test(ready.message ?? '') ? ready : undefined;
    },
    30_000,
    200,
  );
}

/** The attacker's server got nothing (counted, never printed: a failure must not show the token). */
function noRequest(t: Test, what = ''): void {
  t.equal(received.length, 0, `the attacker's server got no request${what ? ` (${what})` : ''}`);
  t.notOk(
    received.some((header) => header.includes(a.token)),
    'no Authorization header carried the token',
  );
}

/** A few probe intervals, in which a connection to the attacker's server would have probed it. */
const probesLater = () => new Promise((resolve) => setTimeout(resolve, 3000));

t.test('a status patch pointing a token Secret at another server never gets the token', async (t) => {
  received.length = 0;
  const name = uniqueName('pin');
  await profileWithCredential(name, { token: a.token, server: a.server });
  await patchStatus(name, { server: a.server, 'certificate-authority-data': a.caData });
  await served(name);
  t.pass('the pinned server in the status: served');

  await patchStatus(name, { server: attackerServer });
  const ready = await refusedOrLeaked(name, /is not the server its credential Secret .* pins/);
  await probesLater();
  noRequest(t, 'and so no token');
  t.equal(ready?.status, 'False', 'Ready=False');
  t.equal(ready?.reason, 'SourceInvalid');
  t.match(ready?.message, `${profileNs}/${name}-credentials pins ${a.server}`, 'the message names the pin');
  t.notOk(ready?.message?.includes(a.token), 'never the token');
  const shown = (await call(gw.url, 'GET', '/api/v1/admin/clusters/', { headers: admin.headers })).body.find(
    (c: { name: string }) => c.name === name,
  );
  t.match(shown?.error, /is not the server its credential Secret/, 'the admin list says why too');
  t.not((await namespaceThrough(name)).status, 200, 'not served');

  await patchStatus(name, { server: a.server, 'certificate-authority-data': a.caData });
  await served(name);
  t.pass('the status back on the pinned server: served again');
});

t.test('a kubeconfig credential pins its own server', async (t) => {
  received.length = 0;
  const name = uniqueName('pin-kc');
  await profileWithCredential(name, { kubeconfig: targetAKubeconfig });
  await patchStatus(name, { server: a.server, 'certificate-authority-data': a.caData });
  await served(name);
  t.pass('served');
  await patchStatus(name, { server: attackerServer });
  const ready = await refusedOrLeaked(name, /is not the server its credential Secret .* pins/);
  await probesLater();
  noRequest(t);
  t.equal(ready?.reason, 'SourceInvalid');
});

t.test('a token Secret that pins no server is not used, and says how to pin', async (t) => {
  received.length = 0;
  const name = uniqueName('unpinned');
  await profileWithCredential(name, { token: a.token });
  await patchStatus(name, { server: attackerServer });
  const ready = await refusedOrLeaked(name, /pins no server/);
  await probesLater();
  noRequest(t);
  t.match(ready?.message, /add the key "server"/);
});
