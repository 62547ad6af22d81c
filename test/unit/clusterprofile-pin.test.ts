// Pure logic (issue 32 point 4): a ClusterProfile's credential goes only to the server its Secret
// pins. The profile's status is written by whoever may patch `clusterprofiles/status`; the Secret
// by whoever may write Secrets. A status that names another server than the Secret's pin is not
// connected, with the reason (never the credential).
import t from 'tap';
import { parse } from 'yaml';
import { fromClusterProfile, type SecretLike } from '../../src/credentials/source-kubeconfig.js';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

function credentials(data: Record<string, string>): SecretLike {
  return {
    metadata: { name: 'edge-creds', namespace: 'fleet', labels: { 'kiteline.io/clusterprofile': 'edge' } },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
  };
}

function profile(server: string) {
  return {
    metadata: { name: 'edge', namespace: 'fleet' },
    spec: { clusterManager: { name: 'ocm' } },
    status: { accessProviders: [{ name: 'kubeconfig', cluster: { server } }] },
  };
}

const credentialKubeconfig = (server: string) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server } }],
    users: [{ name: 'u', user: { token: 'kubeconfig-token' } }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'c',
  });

const serverOf = (kubeconfig: string | undefined) => parse(kubeconfig ?? '').clusters[0].cluster.server;

t.test('the pinned server: key "server", compared as a URL', async (t) => {
  const pinned = { token: 'secret-token', server: 'https://edge.example:6443' };
  for (const status of ['https://edge.example:6443', 'https://EDGE.example:6443/', 'https://edge.example:6443//']) {
    const out = fromClusterProfile(profile(status), credentials(pinned));
    t.equal(out.error, undefined, `${status} matches the pin`);
    t.equal(serverOf(out.kubeconfig), 'https://edge.example:6443');
  }
  const prefixed = fromClusterProfile(
    profile('https://rancher.example/k8s/clusters/c-1'),
    credentials({ token: 't', server: 'https://rancher.example/k8s/clusters/c-1/' }),
  );
  t.equal(prefixed.error, undefined, 'a path prefix is part of the server');
});

t.test('a status that names another server is not connected, and says why', async (t) => {
  const pinned = { token: 'secret-token', server: 'https://edge.example:6443' };
  for (const status of [
    'https://attacker.example:6443',
    'http://edge.example:6443',
    'https://edge.example:6444',
    'https://edge.example:6443/k8s/clusters/other',
    'https://edge.example.attacker.example:6443',
  ]) {
    const out = fromClusterProfile(profile(status), credentials(pinned));
    t.equal(out.kubeconfig, undefined, `${status}: no kubeconfig`);
    t.match(out.error, /is not the server its credential Secret fleet\/edge-creds pins/, `${status}: the reason`);
    t.notMatch(out.error, /secret-token/, 'never the credential');
  }
});

t.test('no pin: not connected, the reason says how to pin', async (t) => {
  const out = fromClusterProfile(profile('https://edge.example:6443'), credentials({ token: 'secret-token' }));
  t.equal(out.kubeconfig, undefined);
  t.match(out.error, /credential Secret fleet\/edge-creds pins no server: add the key "server"/);
  const bad = fromClusterProfile(
    profile('https://edge.example:6443'),
    credentials({ token: 'secret-token', server: 'not a url' }),
  );
  t.match(bad.error, /key "server" .* is not an http\(s\) URL/);
});

t.test('a kubeconfig credential pins its own cluster\'s server (key "server" wins)', async (t) => {
  const same = fromClusterProfile(
    profile('https://edge.example:6443'),
    credentials({ kubeconfig: credentialKubeconfig('https://edge.example:6443') }),
  );
  t.equal(same.error, undefined);
  t.equal(parse(same.kubeconfig!).users[0].user.token, 'kubeconfig-token');
  const other = fromClusterProfile(
    profile('https://attacker.example:6443'),
    credentials({ kubeconfig: credentialKubeconfig('https://edge.example:6443') }),
  );
  t.match(other.error, /is not the server its credential Secret fleet\/edge-creds pins/);
  const keyWins = fromClusterProfile(
    profile('https://edge.example:6443'),
    credentials({ kubeconfig: credentialKubeconfig('https://old.example:6443'), server: 'https://edge.example:6443' }),
  );
  t.equal(keyWins.error, undefined, 'the key "server" is the pin when both are there');
});
