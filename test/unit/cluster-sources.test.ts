// Pure logic of cluster sources: the translation of Argo CD cluster Secrets, Cluster API
// kubeconfig Secrets and ClusterProfiles into sanitized kubeconfigs (and the reasons when they
// cannot be used), the configuration of the sources, and which of two claimants serves a name.
import t from 'tap';
import { parse } from 'yaml';
import { clusterSources, loadConfig } from '../../src/config.js';
import {
  fromArgoCdSecret,
  fromCapiSecret,
  fromClusterProfile,
  isCapiKubeconfigSecret,
  type SecretLike,
} from '../../src/credentials/source-kubeconfig.js';
import { servesFirst } from '../../src/clusters/registry.js';
import { ConfigError } from '../../src/errors.js';
import { sourcedObjectName } from '../../src/host/clusters.js';
import { objectNameFor } from '../../src/host/names.js';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A throwaway self-signed certificate and its key (EC P-256), generated for these tests only:
// kubeconfigs must carry certificates and keys that parse.
const TEST_CERT_PEM = [
  '-----BEGIN CERTIFICATE-----',
  'MIIBkjCCATegAwIBAgIUIr6x3rh5mz7qyLDKAK9u5jYuzi4wCgYIKoZIzj0EAwIw',
  'HTEbMBkGA1UEAwwSa2l0ZWxpbmUtdW5pdC10ZXN0MCAXDTI2MTEyMTE1MDQzN1oY',
  'DzIxMjYxMDI4MTUwNDM3WjAdMRswGQYDVQQDDBJraXRlbGluZS11bml0LXRlc3Qw',
  'WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASG3TeQI9WSiUbRGnoSJkqalDuuJHr8',
  'AbioAqS53UVY34Beoe36ISUrOfjjuT9B2Gv8aUB1NAEVe2HEJMKDCFquo1MwUTAd',
  'BgNVHQ4EFgQUHjsVgCHJoIxc2iZHyY+brmqgiVEwHwYDVR0jBBgwFoAUHjsVgCHJ',
  'oIxc2iZHyY+brmqgiVEwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBG',
  'AiEA161WUVK3YeikpmZ2pM3lKNTAVsb7wIAu9/LEQWlkowkCIQDbOBHycznChVtH',
  'TCDPzAznxcUtAGuXqAkqj37OL1t4EA==',
  '-----END CERTIFICATE-----',
  '',
].join('\n');
const TEST_KEY_PEM = [
  '-----BEGIN PRIVATE KEY-----',
  'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgklMMCvt3fMH77kB9',
  'dUWMHNez2ygnWV90TabZ0ENA+u+hRANCAASG3TeQI9WSiUbRGnoSJkqalDuuJHr8',
  'AbioAqS53UVY34Beoe36ISUrOfjjuT9B2Gv8aUB1NAEVe2HEJMKDCFqu',
  '-----END PRIVATE KEY-----',
  '',
].join('\n');
const CA = Buffer.from(TEST_CERT_PEM).toString('base64');
const CERT = CA;
const KEY = Buffer.from(TEST_KEY_PEM).toString('base64');

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

function secret(name: string, data: Record<string, string>, labels: Record<string, string> = {}): SecretLike {
  return {
    metadata: { name, namespace: 'argocd', labels },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
  };
}

function argo(config: unknown, extra: Record<string, string> = {}): SecretLike {
  return secret('prod-secret', {
    name: 'prod',
    server: 'https://prod.example:6443',
    config: typeof config === 'string' ? config : JSON.stringify(config),
    ...extra,
  });
}

/** The stored kubeconfig's cluster and user. */
function parts(kubeconfig: string | undefined) {
  const doc = parse(kubeconfig ?? '');
  return { cluster: doc.clusters[0].cluster, user: doc.users[0].user };
}

t.test('Argo CD: bearer token, CA, client certificate, insecure', async (t) => {
  const token = fromArgoCdSecret(argo({ bearerToken: 'tok', tlsClientConfig: { caData: CA } }));
  t.same(
    { kind: token.kind, namespace: token.namespace, objectName: token.objectName, clusterName: token.clusterName },
    { kind: 'argocd', namespace: 'argocd', objectName: 'prod-secret', clusterName: 'prod' },
  );
  t.equal(token.error, undefined);
  t.same(parts(token.kubeconfig), {
    cluster: { server: 'https://prod.example:6443', 'certificate-authority-data': CA },
    user: { token: 'tok' },
  });
  const cert = fromArgoCdSecret(argo({ tlsClientConfig: { caData: CA, certData: CERT, keyData: KEY } }));
  t.same(parts(cert.kubeconfig).user, { 'client-certificate-data': CERT, 'client-key-data': KEY });
  const insecure = fromArgoCdSecret(argo({ bearerToken: 'tok', tlsClientConfig: { insecure: true } }));
  t.equal(parts(insecure.kubeconfig).cluster['insecure-skip-tls-verify'], true);
  const noName = fromArgoCdSecret(secret('s', { server: 'https://x:6443', config: '{}' }));
  t.equal(noName.clusterName, 's', 'no name: the Secret name');
});

t.test('Argo CD: refused with the reason, never the credential', async (t) => {
  const cases: Array<[SecretLike, RegExp]> = [
    [argo({ execProviderConfig: { command: 'sh' } }), /execProviderConfig is not supported/],
    [argo({ awsAuthConfig: { clusterName: 'x' } }), /awsAuthConfig is not supported/],
    [argo('{nope'), /config is not valid JSON/],
    [argo('[1]'), /config must be a JSON object/],
    [argo({ bearerToken: 5 }), /bearerToken must be a string/],
    [argo({ bearerToken: 't', tlsClientConfig: { insecure: 'yes' } }), /insecure must be true or false/],
    [argo({ bearerToken: 't', tlsClientConfig: { caData: b64('not a pem') } }), /holds no PEM certificate/],
    [argo({ tlsClientConfig: { certData: CERT } }), /go together/],
    [argo({ bearerToken: 'secret-token' }, { server: 'ftp://secret-token@x' }), /server must be an http\(s\) URL/],
    [argo({ bearerToken: 't' }, { server: 'https://user:pw@x' }), /must not carry credentials/],
    [argo({ bearerToken: 't' }, { server: '' }), /has no server/],
  ];
  for (const [input, reason] of cases) {
    const out = fromArgoCdSecret(input);
    t.match(out.error, reason, String(reason));
    t.equal(out.kubeconfig, undefined);
    t.notMatch(out.error, /secret-token|pw@/, 'the error does not echo a credential');
  }
});

const capiKubeconfig = (user: Record<string, unknown>) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: 'https://c.example:6443', 'certificate-authority-data': CA } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'c',
  });

t.test('Cluster API: the kubeconfig under value, named after the cluster; other Secrets are not sources', async (t) => {
  const labels = { 'cluster.x-k8s.io/cluster-name': 'work' };
  const good = secret('work-kubeconfig', { value: capiKubeconfig({ token: 't' }) }, labels);
  t.ok(isCapiKubeconfigSecret(good));
  t.notOk(isCapiKubeconfigSecret(secret('work-ca', { 'tls.crt': 'x' }, labels)), 'the CA Secret');
  t.notOk(isCapiKubeconfigSecret(secret('other-kubeconfig', {}, labels)), 'a kubeconfig of another name');
  const out = fromCapiSecret(good);
  t.match(out, { kind: 'capi', clusterName: 'work', objectName: 'work-kubeconfig', error: undefined });
  t.same(parts(out.kubeconfig).user, { token: 't' });
  t.match(fromCapiSecret(secret('work-kubeconfig', {}, labels)).error, /no key "value"/);
  t.match(
    fromCapiSecret(secret('work-kubeconfig', { value: capiKubeconfig({ exec: { command: 'aws' } }) }, labels)).error,
    /exec credential plugins are not allowed/,
  );
  t.match(
    fromCapiSecret(secret('work-kubeconfig', { value: capiKubeconfig({ tokenFile: '/etc/passwd' }) }, labels)).error,
    /tokenFile is a file path/,
  );
});

t.test('ClusterProfile: server and CA from accessProviders, the credential from its Secret', async (t) => {
  const profile = (cluster?: Record<string, unknown>) => ({
    metadata: { name: 'edge', namespace: 'fleet' },
    spec: { clusterManager: { name: 'ocm' } },
    status: cluster ? { accessProviders: [{ name: 'kubeconfig', cluster }] } : {},
  });
  const access = { server: 'https://edge.example:6443', 'certificate-authority-data': CA };
  const token = fromClusterProfile(profile(access), secret('edge-creds', { token: 'tok\n', server: access.server }));
  t.match(token, { kind: 'clusterprofile', clusterName: 'edge', namespace: 'fleet', error: undefined });
  t.same(parts(token.kubeconfig), { cluster: access, user: { token: 'tok' } });
  const kc = fromClusterProfile(
    profile(access),
    secret('edge-creds', { kubeconfig: capiKubeconfig({ token: 'k' }), server: access.server }),
  );
  t.same(
    parts(kc.kubeconfig),
    { cluster: access, user: { token: 'k' } },
    "the profile's server, the kubeconfig's user",
  );
  t.match(
    fromClusterProfile(profile(), secret('c', { token: 't', server: access.server })).error,
    /no status\.accessProviders/,
  );
  t.match(fromClusterProfile(profile(access), undefined).error, /labelled kiteline\.io\/clusterprofile=edge/);
  t.match(
    fromClusterProfile(profile(access), secret('c', { server: access.server })).error,
    /neither a "token" nor a "kubeconfig"/,
  );
  t.match(
    fromClusterProfile(
      profile(access),
      secret('c', { kubeconfig: capiKubeconfig({ exec: { command: 'x' } }), server: access.server }),
    ).error,
    /exec credential plugins are not allowed/,
  );
  t.match(
    fromClusterProfile(
      profile({ ...access, 'certificate-authority': '/etc/ca.crt' }),
      secret('c', { token: 't', server: access.server }),
    ).error,
    /certificate-authority is a file path/,
  );
  t.match(
    fromClusterProfile(
      profile({ ...access, 'proxy-url': 'http://proxy' }),
      secret('c', { token: 't', server: access.server }),
    ).error,
    /proxy-url is not supported/,
  );
});

t.test('the sources configuration', async (t) => {
  t.same(clusterSources('x', undefined), { argocd: [], capi: [], clusterprofile: [] }, 'all off by default');
  t.same(clusterSources('x', 'argocd=argocd, team-a ; capi=capi-system;clusterprofile=fleet;argocd=argocd'), {
    argocd: ['argocd', 'team-a'],
    capi: ['capi-system'],
    clusterprofile: ['fleet'],
  });
  t.throws(() => clusterSources('x', 'rancher=x'), ConfigError, 'an unknown kind');
  t.throws(() => clusterSources('x', 'argocd'), /lists no namespace/);
  t.throws(() => clusterSources('x', 'argocd=Not_A_Namespace'), /not a namespace name/);
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kl-sources-')), 'kubeconfig');
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
  const c = loadConfig(['--cluster-sources', 'capi=a'], {
    KUBECONFIG: kubeconfig,
    KITELINE_CLUSTER_SOURCES: 'argocd=b',
  });
  t.same(c.clusterSources, { argocd: [], capi: ['a'], clusterprofile: [] }, 'the flag wins');
  t.equal(c.publishClusterProfiles, undefined, 'publishing is off by default');
  t.throws(() => loadConfig([], { KUBECONFIG: kubeconfig, KITELINE_PUBLISH_CLUSTERPROFILES: 'A B' }), ConfigError);
});

t.test('names: a sourced object name is never a REST cluster object name; REST wins a clash', async (t) => {
  const sourced = sourcedObjectName('argocd', 'argocd', 'prod');
  t.match(sourced, /^source-/);
  t.not(sourced, objectNameFor('cluster', 'src-argocd.argocd.prod'));
  t.equal(sourcedObjectName('argocd', 'argocd', 'prod'), sourced, 'deterministic: the same object every time');
  const rest = { id: 9, meta: { objectName: 'cluster-prod' } };
  const fromSource = { id: 1, meta: { objectName: sourced, source: { kind: 'argocd' } } };
  t.ok(servesFirst(rest, fromSource) < 0, 'a REST cluster serves the name over a source, whatever the ids');
  t.ok(
    servesFirst({ id: 2, meta: { objectName: 'b' } }, { id: 3, meta: { objectName: 'a' } }) < 0,
    'else the lower id',
  );
});
