// Security issue 13 as pure logic (the real-plane side: test/security-identity.test.ts):
// point 8, role globs match without backtracking; point 6, the login limiter's memory is bounded,
// password hashes take at most a few libuv threads, trustProxy is off unless configured;
// point 9, impersonated identities carry the "kiteline:" prefix; point 11, a broken kubeconfig
// server is reported without its text.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { pbkdf2 } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { stringify } from 'yaml';
import { RateLimiter } from '../../src/auth/rate-limiter.js';
import { hashPassword, verifyPassword } from '../../src/credentials/passwords.js';
import { globMatches, patternsMatch } from '../../src/auth/patterns.js';
import type { Principal } from '../../src/auth/principal.js';
import { sanitizeKubeconfig } from '../../src/credentials/kubeconfig.js';
import { loadConfig } from '../../src/config.js';
import { impersonationHeaders } from '../../src/cluster-access/impersonation.js';

t.test('issue 13 point 8: globs match without backtracking blow-up', async (t) => {
  const run = 'a'.repeat(63);
  t.notOk(globMatches('*a*a*a*a*a*a*b', run), '*a*a*a*a*a*a*b against 63 "a"s: no match, and no hang');
  t.ok(globMatches('*a*a*a*a*a*a*a', run), '*a*a*a*a*a*a*a does match');
  // Twelve and thirty stars: a backtracking RegExp would run for hours (about 63^stars / stars! steps).
  t.notOk(globMatches(`${'*a'.repeat(12)}*b`, run), 'twelve stars');
  t.notOk(globMatches(`${'*a'.repeat(30)}*b`, 'a'.repeat(253)), 'thirty stars, 253 characters');
  t.notOk(patternsMatch([`${'*a'.repeat(20)}*b`], run), 'through a pattern list as authorization uses it');

  // The same answers as an anchored RegExp (the oracle, fine on short inputs) for every pattern
  // and value over a small alphabet.
  const oracle = (glob: string, value: string) =>
    new RegExp(`^${[...glob].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c)).join('')}$`, 's').test(value);
  const words = (alphabet: string, maxLength: number): string[] => {
    const all = [''];
    for (let i = 0; i < all.length; i++) if (all[i].length < maxLength) for (const c of alphabet) all.push(all[i] + c);
    return all;
  };
  let disagreements = 0;
  const values = words('ab', 5);
  for (const glob of words('ab*?', 4))
    for (const value of values) if (globMatches(glob, value) !== oracle(glob, value)) disagreements++;
  t.equal(disagreements, 0, `agrees with the RegExp on ${words('ab*?', 4).length * values.length} pairs`);
  t.ok(globMatches('*', ''), '"*" matches the empty string');
  t.notOk(globMatches('?', ''), '"?" needs one character');
  t.ok(globMatches('a*b*c', 'a-b-c-b-c'), 'the last star takes the rest');
  t.notOk(globMatches('a*b', 'a*c'), 'a "*" in the value is just a character');
});

t.test('issue 13 point 6: the login limiter is bounded in entries and key length', async (t) => {
  let now = 1_000_000;
  const limiter = new RateLimiter(3, 60, () => now, 100);
  for (let i = 0; i < 1000; i++) limiter.record([`user:sprayed-${i}`, `addr:10.0.${i >> 8}.${i & 255}`]);
  t.ok(limiter.size <= 100, `at most 100 keys kept (kept ${limiter.size})`);
  const huge = `user:${'x'.repeat(10_000)}`;
  for (let i = 0; i < 3; i++) limiter.record([huge]);
  t.ok(limiter.retryAfter([huge]) !== undefined, 'a long key is still counted');
  t.ok(limiter.retryAfter([`user:${'x'.repeat(9_999)}y`]) === undefined, 'and not confused with another long key');
  t.ok(
    [...limiter.keys()].every((key) => key.length <= 128),
    'no kept key is longer than 128 characters',
  );
  for (let i = 0; i < 3; i++) limiter.record(['addr:192.0.2.1']);
  t.equal(limiter.retryAfter(['addr:192.0.2.1']), 60, 'the newest keys survive the eviction');
  now += 61_000;
  limiter.record(['addr:192.0.2.2']);
  t.equal(limiter.size, 1, 'expired keys go as soon as something is recorded');
});

t.test('issue 13 point 6: password hashes leave libuv threads for other work', async (t) => {
  const stored = await hashPassword('burst-password');
  let finished = 0;
  // A burst of 16 logins (each one scrypt) is under way...
  const burst = Array.from({ length: 16 }, () => verifyPassword('burst-password', stored).finally(() => finished++));
  await new Promise((resolve) => setImmediate(resolve));
  // ...when something else needs a thread-pool thread (file system, DNS and crypto work share it).
  await new Promise((resolve, reject) =>
    pbkdf2('x', 'salt', 1, 32, 'sha256', (err) => (err ? reject(err) : resolve(undefined))),
  );
  t.ok(finished < 8, `the other work did not wait for the burst (${finished} of 16 hashes had finished)`);
  t.same(await Promise.all(burst), Array(16).fill(true), 'every hash of the burst completes');
});

t.test('issue 13 point 6: trustProxy is off unless configured, and validated', async (t) => {
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kl-hardening-')), 'kubeconfig');
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
  const trust = (value?: string) =>
    loadConfig([], { KUBECONFIG: kubeconfig, ...(value === undefined ? {} : { KITELINE_TRUST_PROXY: value }) })
      .trustProxy;
  t.equal(trust(), false, 'default: X-Forwarded-For is not believed');
  t.equal(trust('false'), false, 'false');
  t.same(trust('10.0.0.0/8, 192.168.1.1,fd00::/8'), ['10.0.0.0/8', '192.168.1.1', 'fd00::/8'], 'addresses and CIDRs');
  t.same(trust('loopback,uniquelocal'), ['loopback', 'uniquelocal'], "proxy-addr's range names");
  // true and hop counts would believe whoever connects; Fastify 5 ignores hop counts anyway.
  for (const bad of ['true', '1', '10.0.0.0/33', 'proxy.example', '10.0.0.1/8/8', '::1/129']) {
    t.throws(() => trust(bad), { name: 'ConfigError', message: /trust-proxy must be/ }, `refused: ${bad}`);
  }
  const config = loadConfig([], { KUBECONFIG: kubeconfig });
  t.equal(config.passwordHashConcurrency, 2, 'two hashes at once by default');
  t.equal(config.sessionMaxLifetimeSeconds, 7 * 24 * 3600, 'sessions end a week after login by default');
  t.throws(
    () => loadConfig([], { KUBECONFIG: kubeconfig, KITELINE_PASSWORD_HASH_CONCURRENCY: '0' }),
    /between 1 and 64/,
    'at least one hash at a time',
  );
});

t.test('issue 13 point 9: impersonated users and groups carry the kiteline: prefix', async (t) => {
  const alice: Principal = {
    kind: 'user',
    id: 3,
    name: 'alice',
    roles: ['viewer'],
    groups: ['kiteline:authenticated', 'kiteline:role:viewer'],
  };
  t.same(
    impersonationHeaders({ impersonate: true }, alice),
    {
      'impersonate-user': 'kiteline:alice',
      'impersonate-group': ['kiteline:authenticated', 'kiteline:role:viewer'],
    },
    'a user is kiteline:<username>',
  );
  const key: Principal = { kind: 'apikey', id: 4, name: 'apikey:ci', roles: [], groups: ['kiteline:authenticated'] };
  t.equal(
    impersonationHeaders({ impersonate: true }, key)['impersonate-user'],
    'kiteline:apikey:ci',
    'an API key is kiteline:apikey:<name>',
  );
});

t.test('issue 13 point 11: an unparsable kubeconfig server is reported without its text', async (t) => {
  const withServer = (server: string) =>
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 'tok' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
  const messageOf = (server: string) => {
    try {
      sanitizeKubeconfig(withServer(server));
      return 'accepted';
    } catch (err) {
      return (err as Error).message;
    }
  };
  const broken = messageOf('https://ops:S3cret-pw@bad host:6443');
  t.match(broken, /server is not a URL/, 'the reason');
  t.notMatch(broken, /S3cret|bad host/, 'no part of the server text');
  const scheme = messageOf('S3cretT0ken9:rest');
  t.match(scheme, /http\(s\) URL, got another scheme/, 'a scheme that looks like a token');
  t.notMatch(scheme, /s3cret/i, 'a token parsed as a URL scheme is not named either');
  t.match(messageOf('ftp://files.example/'), /got ftp$/, 'a real scheme is still named');
});
