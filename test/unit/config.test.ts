// Pure logic: configuration parsing and validation, the error hierarchy's mapping.
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import t from 'tap';
import { loadConfig, parseFlags } from '../../src/config.js';
import { ConfigError, fromKubeStatus, NotFoundError } from '../../src/errors.js';
import { toHttpError } from '../../src/gateway/plugins/errors.js';

const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kl-config-')), 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

t.test('flags: --a b, --a=b, --flag, --no-flag', async (t) => {
  t.same(parseFlags(['--port', '9', '--host=0.0.0.0', '--install-crds', '--no-secure-cookies']), {
    port: '9',
    host: '0.0.0.0',
    'install-crds': 'true',
    'secure-cookies': 'false',
  });
  t.throws(() => parseFlags(['stray']), ConfigError);
});

t.test('defaults and overrides', async (t) => {
  const c = loadConfig([], { KUBECONFIG: kubeconfig });
  t.equal(c.port, 8080);
  t.equal(c.host, '127.0.0.1');
  t.equal(c.namespace, 'kiteline-system');
  t.equal(c.bodyLimitBytes, 3 * 1024 * 1024);
  const o = loadConfig(['--port', '9000'], { KUBECONFIG: kubeconfig, PORT: '1', KITELINE_NAMESPACE: 'ops' });
  t.equal(o.port, 9000, 'flags win over the environment');
  t.equal(o.namespace, 'ops');
});

t.test('invalid values are refused with the rule', async (t) => {
  t.throws(() => loadConfig([], {}), /no host cluster/);
  t.throws(() => loadConfig([], { KUBECONFIG: '/nope/kubeconfig' }), /not found/);
  t.throws(() => loadConfig([], { KUBECONFIG: kubeconfig, PORT: 'http' }), /whole number/);
  t.throws(() => loadConfig([], { KUBECONFIG: kubeconfig, PORT: '70000' }), /between 0 and 65535/);
  t.throws(() => loadConfig([], { KUBECONFIG: kubeconfig, KITELINE_NAMESPACE: 'Bad_NS' }), /DNS label/);
  t.throws(() => loadConfig([], { KUBECONFIG: kubeconfig, LOG_LEVEL: 'loud' }), /log level/);
  t.throws(() => loadConfig([], { KUBECONFIG: kubeconfig, KITELINE_INSTALL_CRDS: 'maybe' }), /true or false/);
});

t.test('cluster Status objects keep code, reason and details; 5xx becomes 502', async (t) => {
  const conflict = fromKubeStatus({
    kind: 'Status',
    code: 409,
    reason: 'AlreadyExists',
    message: 'exists',
    details: { name: 'x' },
  });
  t.same(conflict.toBody(), { error: 'exists', reason: 'AlreadyExists', code: 409, details: { name: 'x' } });
  t.equal(fromKubeStatus({ kind: 'Status', code: 422, message: 'bad' }).reason, 'Invalid');
  t.equal(fromKubeStatus({ kind: 'Status', code: 500, message: 'etcd down' }).status, 502);
  t.equal(fromKubeStatus({ kind: 'Status', code: 503 }).status, 503);
});

t.test('framework errors map to 4xx, unknown errors to a 500 (undefined)', async (t) => {
  t.equal(toHttpError(new NotFoundError('x'))?.status, 404);
  t.equal(toHttpError(Object.assign(new Error('bad'), { validation: [{}] }))?.status, 400);
  t.equal(
    toHttpError(Object.assign(new Error('big'), { code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 }))?.status,
    413,
  );
  t.equal(toHttpError(Object.assign(new Error('json'), { statusCode: 400 }))?.reason, 'BadRequest');
  t.equal(toHttpError(new TypeError('oops')), undefined);
});

t.test('the https listener: a port, and a certificate and key together or not at all', async (t) => {
  t.equal(loadConfig([], { KUBECONFIG: kubeconfig }).tls, undefined, 'off by default');
  t.same(
    loadConfig(['--tls-port', '8443'], { KUBECONFIG: kubeconfig }).tls,
    { port: 8443, certFile: undefined, keyFile: undefined },
    'self-signed when no certificate is given',
  );
  t.same(
    loadConfig([], { KUBECONFIG: kubeconfig, KITELINE_TLS_PORT: '' }).tls,
    undefined,
    'an empty port turns it off (make run: KITELINE_TLS_PORT=)',
  );
  t.same(
    loadConfig(['--tls-port', '9443', '--tls-cert-file', kubeconfig, '--tls-key-file', kubeconfig], {
      KUBECONFIG: kubeconfig,
    }).tls,
    { port: 9443, certFile: kubeconfig, keyFile: kubeconfig },
  );
  t.throws(
    () => loadConfig(['--tls-port', '8443', '--tls-cert-file', kubeconfig], { KUBECONFIG: kubeconfig }),
    /go together/,
    'a certificate without its key',
  );
  t.throws(
    () => loadConfig(['--tls-cert-file', kubeconfig, '--tls-key-file', kubeconfig], { KUBECONFIG: kubeconfig }),
    /needs tls-port/,
    'a certificate without a port',
  );
  t.throws(
    () =>
      loadConfig(['--tls-port', '8443', '--tls-cert-file', '/nope.crt', '--tls-key-file', kubeconfig], {
        KUBECONFIG: kubeconfig,
      }),
    /file not found/,
  );
  t.throws(() => loadConfig(['--tls-port', 'https'], { KUBECONFIG: kubeconfig }), /whole number/);
});

t.test('LDAP: off by default, checked when on', async (t) => {
  t.equal(loadConfig([], { KUBECONFIG: kubeconfig }).ldap, undefined);
  const base = {
    KUBECONFIG: kubeconfig,
    KITELINE_LDAP_URL: 'ldaps://ldap.example.com:636',
    KITELINE_LDAP_BIND_DN: 'cn=kiteline,dc=example,dc=org',
    KITELINE_LDAP_USER_BASE: 'ou=people,dc=example,dc=org',
  };
  t.match(loadConfig([], base).ldap, {
    url: 'ldaps://ldap.example.com:636',
    startTls: false,
    bindPasswordSecret: 'kiteline-ldap-bind',
    userFilter: '(uid={username})',
    groupFilter: '(member={dn})',
    groupAttribute: 'cn',
    groupBase: '',
    recheckIntervalMs: 300_000,
  });
  t.throws(() => loadConfig([], { ...base, KITELINE_LDAP_URL: 'http://ldap.example.com' }), /ldap:\/\/ or ldaps:\/\//);
  t.throws(() => loadConfig([], { ...base, KITELINE_LDAP_START_TLS: 'true' }), /ldaps is TLS already/);
  t.throws(() => loadConfig([], { ...base, KITELINE_LDAP_BIND_DN: '' }), /needs ldap-bind-dn/);
  t.throws(() => loadConfig([], { ...base, KITELINE_LDAP_USER_FILTER: '(uid=alice)' }), /must contain \{username\}/);
  t.throws(() => loadConfig([], { ...base, KITELINE_LDAP_CA_FILE: '/nope/ca.pem' }), /not found/);
  // Passwords never cross the network in clear text: ldap:// needs StartTLS, except on loopback.
  const plain = { ...base, KITELINE_LDAP_URL: 'ldap://ldap.example.com:389' };
  t.throws(() => loadConfig([], plain), /clear text/);
  t.equal(loadConfig([], { ...plain, KITELINE_LDAP_START_TLS: 'true' }).ldap?.startTls, true);
  t.equal(loadConfig([], { ...base, KITELINE_LDAP_URL: 'ldap://127.0.0.1:3389' }).ldap?.url, 'ldap://127.0.0.1:3389');
});

t.test('a sub-path install and a UI directory', async (t) => {
  const env = { KUBECONFIG: kubeconfig };
  t.equal(loadConfig([], env).basePath, '', 'at the root by default');
  t.equal(loadConfig([], { ...env, KITELINE_BASE_PATH: '/kite/' }).basePath, '/kite', 'a trailing slash dropped');
  t.equal(loadConfig(['--base-path', '/tools/kite'], env).basePath, '/tools/kite', 'several segments');
  t.equal(loadConfig([], { ...env, KITELINE_BASE_PATH: '/' }).basePath, '', '/ is the root');
  t.equal(
    loadConfig([], { ...env, KITELINE_EXTERNAL_URL: 'https://example.com/kite/' }).basePath,
    '/kite',
    "unset: the external URL's path",
  );
  for (const own of ['/api', '/docs/kite', '/healthz']) {
    t.throws(() => loadConfig([], { ...env, KITELINE_BASE_PATH: own }), /kiteline's own paths/, `refused: ${own}`);
  }
  t.throws(
    () => loadConfig([], { ...env, KITELINE_EXTERNAL_URL: 'https://example.com/%6Bite' }),
    /^external-url's path must be a URL path/,
    'a bad path of the external URL, named as such',
  );
  t.equal(loadConfig([], { ...env, KITELINE_BASE_PATH: '/apis' }).basePath, '/apis', 'a prefix of a name is fine');
  for (const bad of ['kite', '/kite/../admin', '/./kite', '/ki te', '/kite?x', '/%6Bite', '//kite', '/..']) {
    t.throws(() => loadConfig([], { ...env, KITELINE_BASE_PATH: bad }), /must be a URL path/, `refused: ${bad}`);
  }
  t.throws(
    () => loadConfig([], { ...env, KITELINE_BASE_PATH: '/kite', KITELINE_EXTERNAL_URL: 'https://example.com/other' }),
    /must agree/,
    'links and requests in two places: refused',
  );
  t.equal(
    loadConfig([], { ...env, KITELINE_BASE_PATH: '/kite', KITELINE_EXTERNAL_URL: 'https://example.com/kite' }).basePath,
    '/kite',
  );

  const ui = mkdtempSync(join(tmpdir(), 'kl-ui-'));
  t.throws(() => loadConfig([], { ...env, KITELINE_UI_DIR: ui }), /index\.html/, 'a directory without a page');
  writeFileSync(join(ui, 'index.html'), '<html></html>');
  t.equal(loadConfig([], { ...env, KITELINE_UI_DIR: ui }).uiDir, ui);
  t.equal(
    loadConfig([], { ...env, KITELINE_UI_DIR: relative(process.cwd(), ui) }).uiDir,
    ui,
    'a relative directory, made absolute',
  );
  t.equal(loadConfig([], env).uiDir, undefined, 'no UI by default');
});
