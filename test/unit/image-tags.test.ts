// Pure logic of GET /api/v1/image/tags: image references read as Docker reads them (Docker Hub's
// default and library/ prefix, registry hosts with ports and IPv6, tags and digests dropped,
// malformed ones refused in linear time), the addresses outside the public internet, Bearer
// challenges, credentials picked from a docker config, and the configuration of internal registries.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadConfig, registryEndpoint } from '../../src/config.js';
import { internalAddress, refusedAddress } from '../../src/credentials/refused-addresses.js';
import { BadRequestError } from '../../src/errors.js';
import { parseImageRepository } from '../../src/registries/image-reference.js';
import { credentialsFor, parseChallenge } from '../../src/registries/image-tags.js';

t.test('image references: registry, port and repository as Docker reads them', async (t) => {
  const cases: Array<[string, string, string, number | undefined, string]> = [
    // image, registry, API host, port, repository
    ['nginx', 'docker.io', 'registry-1.docker.io', undefined, 'library/nginx'],
    ['nginx:1.27', 'docker.io', 'registry-1.docker.io', undefined, 'library/nginx'],
    ['nginx@sha256:' + 'a'.repeat(64), 'docker.io', 'registry-1.docker.io', undefined, 'library/nginx'],
    ['nginx@sha256', 'docker.io', 'registry-1.docker.io', undefined, 'library/nginx'], // Kite UI's prefix of a digest
    ['bitnami/redis', 'docker.io', 'registry-1.docker.io', undefined, 'bitnami/redis'],
    ['docker.io/nginx', 'docker.io', 'registry-1.docker.io', undefined, 'library/nginx'],
    ['index.docker.io/library/nginx:1', 'docker.io', 'registry-1.docker.io', undefined, 'library/nginx'],
    ['ghcr.io/org/team/app:v1', 'ghcr.io', 'ghcr.io', undefined, 'org/team/app'],
    ['registry:5000/app', 'registry:5000', 'registry', 5000, 'app'],
    ['registry:5000/app:1.0', 'registry:5000', 'registry', 5000, 'app'],
    ['localhost/app', 'localhost', 'localhost', undefined, 'app'],
    ['Registry.Example.com/app', 'Registry.Example.com', 'registry.example.com', undefined, 'app'],
    ['[::1]:5000/app', '[::1]:5000', '::1', 5000, 'app'],
    ['10.0.0.1/a_b__c-d--e.f', '10.0.0.1', '10.0.0.1', undefined, 'a_b__c-d--e.f'],
  ];
  for (const [image, registry, host, port, repository] of cases) {
    t.same(parseImageRepository(image), { registry, host, port, repository }, image);
  }
});

t.test('malformed references: 400 with the reason, in linear time', async (t) => {
  const bad: Array<[string, RegExp]> = [
    ['', /empty/],
    ['nginx latest', /spaces/],
    ['nginx:bad!', /not a tag/],
    ['team/App', /lower case/],
    ['foo//bar', /not a repository name/],
    ['_x', /not a repository name/],
    ['host:70000/x', /not a registry host/],
    ['ho_st.io/x', /not a registry host/],
    ['[::1/x', /not a registry host/],
    ['[10.0.0.1]:5000/x', /not a registry host/],
    [`r.io/${'a/'.repeat(130)}x`, /longer than 255/],
  ];
  for (const [image, why] of bad) t.throws(() => parseImageRepository(image), { message: why }, image);
  t.throws(() => parseImageRepository('x!'), BadRequestError);
  // The old distribution grammar ("[-]*" between components) backtracks exponentially on these.
  const started = Date.now();
  for (const image of [`${'a'.repeat(5000)}!`, `${'a-'.repeat(3000)}!`, `r.io/${'a__'.repeat(2000)}!`]) {
    t.throws(() => parseImageRepository(image), BadRequestError);
  }
  t.ok(Date.now() - started < 500, 'long hostile references cost no time');
});

t.test('internal addresses: loopback, private, shared, link-local, reserved, in every spelling', async (t) => {
  const internal = [
    '127.0.0.1',
    '127.8.9.10',
    '0.0.0.0',
    '10.96.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '100.64.0.1',
    '169.254.169.254',
    '100.100.100.200',
    '198.18.0.1',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '[::1]',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a00:1',
    '2002:a00:1::1',
    'fd00:ec2::254',
    'fc00::1',
    'fe80::1%eth0',
    'ff02::1',
  ];
  for (const address of internal) t.ok(internalAddress(address), `${address} is internal`);
  const publicOnes = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '2001:4860::8888'];
  for (const address of publicOnes) t.equal(internalAddress(address), undefined, `${address} is public`);
  t.equal(internalAddress('registry.example.com'), undefined, 'a name is resolved at connect time');
  t.equal(refusedAddress('127.0.0.1'), undefined, 'the clusters’ rule stays as it was: loopback allowed there');
});

t.test('Bearer and Basic challenges', async (t) => {
  t.same(
    parseChallenge(
      'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"',
    ),
    {
      scheme: 'bearer',
      params: {
        realm: 'https://auth.docker.io/token',
        service: 'registry.docker.io',
        scope: 'repository:library/nginx:pull',
      },
    },
  );
  t.same(parseChallenge('Basic realm="a \\"quoted\\" realm", charset=UTF-8'), {
    scheme: 'basic',
    params: { realm: 'a "quoted" realm', charset: 'UTF-8' },
  });
  t.same(parseChallenge('Bearer'), { scheme: 'bearer', params: {} });
  t.equal(parseChallenge(''), undefined);
});

t.test('credentials from a docker config: by registry and port, Docker Hub by any of its names', async (t) => {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const config = JSON.stringify({
    auths: {
      'https://index.docker.io/v1/': { auth: b64('hub-user:hub:pass') },
      'registry.example.com:5000': { username: 'ex', password: 'ex-pass' },
      'https://other.example.com': { auth: b64('no-colon') },
    },
  });
  const at = (host: string, port: number) => credentialsFor(config, { host, port, http: false });
  t.same(at('registry-1.docker.io', 443), { username: 'hub-user', password: 'hub:pass' });
  t.same(at('registry.example.com', 5000), { username: 'ex', password: 'ex-pass' });
  t.equal(at('registry.example.com', 443), undefined, 'another port is another registry');
  t.equal(at('other.example.com', 443), undefined, 'an auth without user:password is none');
  t.equal(at('unknown.example.com', 443), undefined);
  t.equal(credentialsFor('not json', { host: 'x', port: 443, http: false }), undefined);
  t.equal(credentialsFor(undefined, { host: 'x', port: 443, http: false }), undefined);
});

t.test('configuration: internal registries, credentials Secret, CA, deadline', async (t) => {
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kl-registries-')), 'kubeconfig');
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
  const base = { KUBECONFIG: kubeconfig };
  t.same(loadConfig([], base).imageRegistries, {
    internal: [],
    credentialsSecret: 'kiteline-registry-credentials',
    ca: undefined,
    timeoutMs: 10_000,
  });
  const set = loadConfig([], {
    ...base,
    KITELINE_IMAGE_REGISTRIES_INTERNAL: 'registry.kube-system.svc:5000, http://127.0.0.1:5001,[::1]:5002,Reg.Local',
    KITELINE_IMAGE_REGISTRY_SECRET: 'pull-secret',
    KITELINE_IMAGE_REGISTRY_TIMEOUT_MS: '2500',
  }).imageRegistries;
  t.same(set.internal, [
    { host: 'registry.kube-system.svc', port: 5000, http: false },
    { host: '127.0.0.1', port: 5001, http: true },
    { host: '::1', port: 5002, http: false },
    { host: 'reg.local', port: 443, http: false },
  ]);
  t.equal(set.credentialsSecret, 'pull-secret');
  t.equal(set.timeoutMs, 2500);
  for (const entry of ['http://x/path', 'ftp://x', 'user:pw@x', 'x:99999']) {
    t.throws(
      () => loadConfig([], { ...base, KITELINE_IMAGE_REGISTRIES_INTERNAL: entry }),
      { message: /is not a registry/ },
      entry,
    );
  }
  t.throws(() => loadConfig([], { ...base, KITELINE_IMAGE_REGISTRY_SECRET: 'Bad_Name' }), { message: /Secret name/ });
  t.throws(() => loadConfig([], { ...base, KITELINE_IMAGE_REGISTRY_TIMEOUT_MS: '10' }), { message: /between/ });
  t.throws(() => loadConfig([], { ...base, KITELINE_IMAGE_REGISTRY_CA_FILE: '/nope' }), { message: /not found/ });
  t.same(registryEndpoint('https://index.docker.io/v1/'), { host: 'index.docker.io', port: 443, http: false });
});
