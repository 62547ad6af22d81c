// Pure logic: kubeconfig sanitizing (what is refused and why, what is kept, context selection).
import t, { type Test } from 'tap';
import { parse, stringify } from 'yaml';
import {
  KubeconfigError,
  listContexts,
  sanitizeAllContexts,
  sanitizeKubeconfig,
} from '../../src/credentials/kubeconfig.js';

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

function kubeconfig(
  overrides: { cluster?: object; user?: object; extraContexts?: object[]; current?: string | null } = {},
): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'c1',
        cluster: { server: 'https://10.0.0.1:6443', 'certificate-authority-data': CA, ...overrides.cluster },
      },
    ],
    users: [{ name: 'u1', user: { token: 'secret-token', ...overrides.user } }],
    contexts: [
      { name: 'prod', context: { cluster: 'c1', user: 'u1', namespace: 'x' } },
      ...(overrides.extraContexts ?? []),
    ],
    ...(overrides.current === null ? {} : { 'current-context': overrides.current ?? 'prod' }),
    preferences: { colors: true },
  });
}

function rejects(t: Test, text: string, pattern: RegExp, what: string) {
  t.throws(() => sanitizeKubeconfig(text), { name: 'KubeconfigError', message: pattern }, what);
}

t.test('a token kubeconfig is reduced to one context with inline data', async (t) => {
  const result = sanitizeKubeconfig(kubeconfig());
  t.equal(result.context, 'prod');
  t.same(result.credentials, {
    server: 'https://10.0.0.1:6443',
    caData: CA,
    insecureSkipTlsVerify: false,
    token: 'secret-token',
  });
  const doc = parse(result.kubeconfig);
  t.equal(doc['current-context'], 'prod');
  t.equal(doc.contexts.length, 1);
  t.equal(doc.clusters[0].cluster.server, 'https://10.0.0.1:6443');
  t.equal(doc.users[0].user.token, 'secret-token');
  t.notOk(doc.preferences, 'unrelated members are dropped');
  t.same(sanitizeKubeconfig(result.kubeconfig).credentials, result.credentials, 'sanitizing is idempotent');
});

t.test('client certificates and basic auth are kept', async (t) => {
  const cert = Buffer.from(TEST_CERT_PEM).toString('base64');
  const key = Buffer.from(TEST_KEY_PEM).toString('base64');
  const withCert = sanitizeKubeconfig(
    kubeconfig({ user: { token: undefined, 'client-certificate-data': cert, 'client-key-data': key } }),
  );
  t.equal(withCert.credentials.clientCertificateData, cert);
  t.equal(withCert.credentials.clientKeyData, key);
  t.notOk(withCert.credentials.token);
  const basic = sanitizeKubeconfig(kubeconfig({ user: { token: undefined, username: 'u', password: 'p' } }));
  t.equal(basic.credentials.username, 'u');
  t.equal(basic.credentials.password, 'p');
  rejects(t, kubeconfig({ user: { 'client-certificate-data': cert } }), /go together/, 'a certificate without its key');
  const notPem = Buffer.from('not a certificate').toString('base64');
  const brokenPem = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
  rejects(
    t,
    kubeconfig({ cluster: { 'certificate-authority-data': notPem } }),
    /certificate-authority-data holds no PEM certificate/,
    'a CA that is not PEM',
  );
  rejects(
    t,
    kubeconfig({ cluster: { 'certificate-authority-data': brokenPem } }),
    /certificate-authority-data holds a PEM certificate that does not parse/,
    'a broken CA',
  );
  rejects(
    t,
    kubeconfig({ user: { 'client-certificate-data': brokenPem, 'client-key-data': key } }),
    /client-certificate-data holds a PEM certificate that does not parse/,
    'a broken client certificate',
  );
  rejects(
    t,
    kubeconfig({ user: { 'client-certificate-data': cert, 'client-key-data': notPem } }),
    /client-key-data holds no PEM private key/,
    'a client key that is not PEM',
  );
});

t.test('plugins and file paths are refused with the reason', async (t) => {
  rejects(
    t,
    kubeconfig({ user: { exec: { command: 'aws', args: ['eks', 'get-token'] } } }),
    /exec credential plugins are not allowed/,
    'exec',
  );
  rejects(
    t,
    kubeconfig({ user: { 'auth-provider': { name: 'gcp' } } }),
    /auth-provider plugins are not allowed/,
    'auth-provider',
  );
  rejects(t, kubeconfig({ user: { tokenFile: '/etc/shadow' } }), /tokenFile is a file path/, 'tokenFile');
  rejects(
    t,
    kubeconfig({ user: { 'client-certificate': '/tmp/c.crt' } }),
    /client-certificate is a file path/,
    'client-certificate',
  );
  rejects(t, kubeconfig({ user: { 'client-key': '/tmp/c.key' } }), /client-key is a file path/, 'client-key');
  rejects(
    t,
    kubeconfig({ cluster: { 'certificate-authority': '/tmp/ca.crt' } }),
    /certificate-authority is a file path/,
    'certificate-authority',
  );
  rejects(t, kubeconfig({ cluster: { 'proxy-url': 'socks5://x:1080' } }), /proxy-url/, 'proxy-url');
  rejects(t, kubeconfig({ user: { as: 'system:admin' } }), /impersonation/, 'impersonation');
});

t.test('servers must be http(s) URLs without credentials', async (t) => {
  rejects(t, kubeconfig({ cluster: { server: 'file:///etc/passwd' } }), /http\(s\) URL, got file/, 'file:');
  rejects(t, kubeconfig({ cluster: { server: 'unix:///var/run/x.sock' } }), /http\(s\) URL/, 'unix:');
  rejects(t, kubeconfig({ cluster: { server: 'not a url' } }), /not a URL/, 'garbage');
  rejects(t, kubeconfig({ cluster: { server: '' } }), /server is missing/, 'missing');
  rejects(t, kubeconfig({ cluster: { server: 'https://user:pw@h:6443' } }), /credentials/, 'userinfo');
  rejects(t, kubeconfig({ cluster: { server: 'http://169.254.169.254' } }), /link-local/, 'cloud metadata (IPv4)');
  rejects(t, kubeconfig({ cluster: { server: 'http://[fd00:ec2::254]' } }), /link-local/, 'cloud metadata (IPv6)');
  rejects(t, kubeconfig({ cluster: { server: 'https://[fe80::1]:6443' } }), /link-local/, 'IPv6 link-local');
  t.equal(
    sanitizeKubeconfig(kubeconfig({ cluster: { server: 'https://rancher.example/k8s/clusters/c-1/' } })).credentials
      .server,
    'https://rancher.example/k8s/clusters/c-1',
    'a path prefix is kept',
  );
});

t.test('insecure-skip-tls-verify is allowed only explicitly and without a CA', async (t) => {
  const insecure = sanitizeKubeconfig(
    kubeconfig({ cluster: { 'certificate-authority-data': undefined, 'insecure-skip-tls-verify': true } }),
  );
  t.equal(insecure.credentials.insecureSkipTlsVerify, true);
  t.match(insecure.kubeconfig, /insecure-skip-tls-verify: true/);
  rejects(t, kubeconfig({ cluster: { 'insecure-skip-tls-verify': true } }), /cannot both be set/, 'CA plus insecure');
  rejects(t, kubeconfig({ cluster: { 'insecure-skip-tls-verify': 'yes' } }), /true or false/, 'non-boolean');
});

t.test('bad YAML and unusable contexts', async (t) => {
  rejects(t, 'clusters: [unclosed', /not valid YAML/, 'bad YAML');
  rejects(t, '', /empty/, 'empty');
  rejects(t, '- a\n- b\n', /mapping/, 'a list');
  rejects(t, 'apiVersion: v1\nkind: Pod\n', /kind must be Config/, 'another kind');
  rejects(t, 'apiVersion: v1\nkind: Config\ncontexts: []\n', /no contexts/, 'no contexts');
  rejects(t, kubeconfig({ current: 'nope' }), /current-context "nope" is not one of/, 'unknown current-context');
  rejects(
    t,
    kubeconfig({ current: null, extraContexts: [{ name: 'dev', context: { cluster: 'c1', user: 'u1' } }] }),
    /several contexts and no current-context/,
    'ambiguous',
  );
  rejects(
    t,
    kubeconfig({ current: 'dev', extraContexts: [{ name: 'dev', context: { cluster: 'missing', user: 'u1' } }] }),
    /cluster "missing" is not in/,
    'dangling cluster',
  );
  rejects(
    t,
    kubeconfig({ current: 'dev', extraContexts: [{ name: 'dev', context: { cluster: 'c1', user: 'ghost' } }] }),
    /user "ghost" is not in/,
    'dangling user',
  );
  t.equal(
    sanitizeKubeconfig(kubeconfig({ current: null })).context,
    'prod',
    'a single context needs no current-context',
  );
  t.ok(new KubeconfigError('x') instanceof Error);
});

t.test('every context of a multi-context kubeconfig, failures with reasons', async (t) => {
  const text = kubeconfig({
    extraContexts: [
      { name: 'dev', context: { cluster: 'c1', user: 'u1' } },
      { name: 'broken', context: { cluster: 'nowhere', user: 'u1' } },
    ],
  });
  t.same(listContexts(text), { contexts: ['prod', 'dev', 'broken'], current: 'prod' });
  const all = sanitizeAllContexts(text);
  t.equal(all.current, 'prod');
  t.same(
    all.usable.map((c) => c.context),
    ['prod', 'dev'],
  );
  t.equal(all.skipped.length, 1);
  t.equal(all.skipped[0].context, 'broken');
  t.match(all.skipped[0].reason, /cluster "nowhere"/);
  t.equal(sanitizeKubeconfig(text, 'dev').context, 'dev', 'a context can be chosen by name');
  t.throws(
    () => sanitizeAllContexts(kubeconfig({ current: 'nope' })),
    { name: 'KubeconfigError', message: /current-context "nope" is not one of/ },
    'an unknown current-context',
  );
});
