// Pure pieces of authentication: password hashing, session tokens, API key values, the login
// rate limiter, cookies, input rules, and the door each token minted for a user opens.
import t from 'tap';
import {
  apiKeySecretMatches,
  generateApiKey,
  parseApiKey,
  storedKeyDigest,
} from '../../src/credentials/apikey-token.js';
import { clearedSessionCookies, readCookie, sessionCookie } from '../../src/auth/cookies.js';
import { escapeFilterValue } from '../../src/auth/ldap.js';
import { RateLimiter } from '../../src/auth/rate-limiter.js';
import { hashPassword, verifyPassword } from '../../src/credentials/passwords.js';
import { checkPassword, checkUsername, parseId } from '../../src/gateway/input-rules.js';
import { sessionStamp, signSession, verifySession } from '../../src/auth/session-token.js';
import { BadRequestError } from '../../src/errors.js';
import { tokenRefusal } from '../../src/auth/principal.js';
import { guardedByStepUp } from '../../src/auth/auth-service.js';
import { STEP_UP_LABEL, stepUpMinutesOf } from '../../src/host/clusters.js';
import { tokenAudience } from '../../src/host/apikeys.js';
import type { APIKeyResource } from '../../src/host/resources.js';

t.test('scrypt hashes verify, are salted and self-describing', async (t) => {
  const a = await hashPassword('correct horse');
  const b = await hashPassword('correct horse');
  t.match(a, /^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+$/);
  t.not(a, b, 'a fresh salt each time');
  t.ok(await verifyPassword('correct horse', a));
  t.notOk(await verifyPassword('correct horsE', a));
  t.notOk(await verifyPassword('x', 'plain-text'), 'an unreadable hash never verifies');
  t.notOk(
    await verifyPassword('x', 'scrypt$1073741824$8$1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA'),
    'absurd parameters are refused',
  );
});

t.test('session tokens: signed, expiring, tamper-evident', async (t) => {
  const key = Buffer.alloc(32, 7);
  const token = signSession(key, { uid: 3, st: 'stamp', iat: 100, exp: 200 });
  t.same(verifySession(key, token, 150), { uid: 3, st: 'stamp', iat: 100, exp: 200 });
  t.equal(verifySession(key, token, 200), undefined, 'expired at exp');
  t.equal(verifySession(Buffer.alloc(32, 8), token, 150), undefined, 'another key does not verify');
  const [v, payload, sig] = token.split('.');
  const forged = Buffer.from(JSON.stringify({ uid: 1, st: 'stamp', iat: 100, exp: 200 })).toString('base64url');
  t.equal(verifySession(key, `${v}.${forged}.${sig}`, 150), undefined, 'a changed payload does not verify');
  t.equal(verifySession(key, `${v}.${payload}`, 150), undefined);
  t.equal(verifySession(key, 'garbage', 150), undefined);
  t.not(sessionStamp(key, 'hash1', '0'), sessionStamp(key, 'hash2', '0'), 'a new password changes the stamp');
  t.not(sessionStamp(key, 'hash1', '0'), sessionStamp(key, 'hash1', '1'), 'a new epoch changes the stamp');
});

t.test('API key values', async (t) => {
  const { key, keyHash } = generateApiKey(42);
  t.match(key, /^kl_42_[A-Za-z0-9_-]{43}$/, '256 bits of base64url');
  const parts = parseApiKey(key)!;
  t.equal(parts.id, 42);
  t.ok(apiKeySecretMatches(parts.secret, keyHash));
  t.notOk(
    apiKeySecretMatches(
      parts.secret.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')),
      keyHash,
    ),
  );
  t.notOk(apiKeySecretMatches(parts.secret, 'short'), 'a malformed stored hash never matches');
  const digest = storedKeyDigest(keyHash)!;
  t.equal(digest.length, 32, 'the stored hex hash decodes to a 32-byte digest');
  t.ok(apiKeySecretMatches(parts.secret, digest), 'the decoded digest checks the same secret');
  t.notOk(
    apiKeySecretMatches(
      parts.secret.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')),
      digest,
    ),
  );
  t.equal(storedKeyDigest(keyHash.toUpperCase()), undefined, 'only lower-case hex is a stored hash');
  t.notOk(apiKeySecretMatches(parts.secret, Buffer.alloc(16)), 'a digest of the wrong length never matches');
  t.equal(parseApiKey('kite1-'), undefined, "Kite's empty-secret bypass does not parse");
  t.equal(parseApiKey('kl_0_' + 'a'.repeat(43)), undefined);
  t.equal(parseApiKey(key + 'x'), undefined);
});

t.test('login limiter: per key, window, retry-after', async (t) => {
  let now = 1_000_000;
  const limiter = new RateLimiter(3, 60, () => now);
  const keys = ['user:a', 'addr:1.2.3.4'];
  for (let i = 0; i < 3; i++) {
    t.equal(limiter.retryAfter(keys), undefined);
    limiter.record(keys);
  }
  t.equal(limiter.retryAfter(keys), 60);
  t.equal(limiter.retryAfter(['user:b', 'addr:1.2.3.4']), 60, 'the address is limited for every user');
  t.equal(limiter.retryAfter(['user:a', 'addr:5.6.7.8']), 60, 'the user is limited from every address');
  t.equal(limiter.retryAfter(['user:b', 'addr:5.6.7.8']), undefined);
  now += 30_000;
  t.equal(limiter.retryAfter(keys), 30);
  now += 30_001;
  t.equal(limiter.retryAfter(keys), undefined, 'the window passed');
  limiter.record(keys);
  limiter.reset('user:a');
  t.equal(limiter.retryAfter(['user:a']), undefined);
});

t.test('cookies', async (t) => {
  t.equal(readCookie('a=1; auth_token=abc.def; b=2', 'auth_token'), 'abc.def');
  t.equal(readCookie('a=1', 'auth_token'), undefined);
  t.equal(readCookie(undefined, 'auth_token'), undefined);
  const set = sessionCookie('tok', 60, true, '');
  t.match(set, /HttpOnly/);
  t.match(set, /SameSite=Lax/);
  t.match(set, /Secure/);
  t.match(set, /Path=\/;/, 'at the root: every path');
  t.notMatch(sessionCookie('tok', 60, false, ''), /Secure/);
  t.match(sessionCookie('tok', 60, false, '/kite'), /Path=\/kite;/, 'a sub-path install: only its own paths');
  t.same(
    clearedSessionCookies(false, '/kite'),
    [
      'auth_token=; Path=/kite; Max-Age=0; HttpOnly; SameSite=Lax',
      'auth_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax',
    ],
    'cleared where it is set, and where it was before the base path',
  );
  t.equal(clearedSessionCookies(true, '').length, 1, 'at the root: one');
});

t.test('input rules', async (t) => {
  t.doesNotThrow(() => checkUsername('Jane.Doe_1@example-org'));
  t.throws(() => checkUsername(''), BadRequestError);
  t.throws(() => checkUsername('a'.repeat(64)), BadRequestError);
  t.throws(() => checkUsername('with space'), BadRequestError);
  t.throws(() => checkPassword('1234567'), BadRequestError);
  t.doesNotThrow(() => checkPassword('12345678'));
  t.throws(() => checkPassword('x'.repeat(129)), BadRequestError);
  t.equal(parseId('12'), 12);
  for (const bad of ['0', '-1', '1.5', 'abc', '01', '']) t.throws(() => parseId(bad), BadRequestError, bad);
});

t.test('LDAP filter values are escaped (RFC 4515)', async (t) => {
  t.equal(escapeFilterValue('alice'), 'alice');
  t.equal(escapeFilterValue('*)(uid=*'), '\\2a\\29\\28uid=\\2a');
  t.equal(escapeFilterValue('a\\b\0'), 'a\\5cb\\00');
  t.equal(escapeFilterValue('cn=Smith\\, John,ou=people'), 'cn=Smith\\5c, John,ou=people');
});

t.test('a token minted for a user opens its own door only; an audience this release does not know, none', async (t) => {
  const key = (spec: Record<string, unknown>) =>
    ({ metadata: { name: 'k' }, spec: { secretRef: { name: 's' }, ...spec } }) as unknown as APIKeyResource;
  const owner = { username: 'carol', id: 7 };
  t.equal(tokenAudience(key({})), undefined, 'a plain API key has none');
  t.equal(tokenAudience(key({ owner })), 'kubernetes', 'an owned key without one: a kubeconfig token');
  t.equal(tokenAudience(key({ owner, audience: 'mcp' })), 'mcp');
  t.equal(tokenAudience(key({ owner, audience: 'future' })), null, 'unknown: null (AuthService refuses it)');

  const as = (tokenAudience?: 'kubernetes' | 'mcp') => ({
    kind: 'apikey' as const,
    id: 1,
    name: 'carol',
    roles: [],
    groups: [],
    ...(tokenAudience ? { tokenAudience } : {}),
  });
  for (const door of ['kiteline', 'kubernetes', 'mcp'] as const)
    t.equal(tokenRefusal(as(), door), undefined, `a plain key: every door (${door})`);
  t.equal(tokenRefusal(as('kubernetes'), 'kubernetes'), undefined);
  t.match(tokenRefusal(as('kubernetes'), 'mcp'), /kubeconfig token is accepted only on the Kubernetes API/);
  t.match(tokenRefusal(as('kubernetes'), 'kiteline'), /kubeconfig token/);
  t.equal(tokenRefusal(as('mcp'), 'mcp'), undefined);
  t.match(tokenRefusal(as('mcp'), 'kubernetes'), /an MCP token is accepted only on \/mcp/);
  t.match(tokenRefusal(as('mcp'), 'kiteline'), /an MCP token/);
});

t.test('step-up: what it guards, what a cluster label asks, what a session cookie carries', async (t) => {
  t.ok(guardedByStepUp({ resource: 'configmaps', verb: 'delete' }), 'every delete');
  t.ok(guardedByStepUp({ resource: 'pods/exec', verb: 'create' }), 'exec');
  t.ok(guardedByStepUp({ resource: 'pods/attach', verb: 'get' }), 'attach');
  t.ok(guardedByStepUp({ resource: 'kubectl-terminal', verb: 'create' }), 'the kubectl console');
  t.notOk(guardedByStepUp({ resource: 'pods', verb: 'create' }), 'not a create');
  t.notOk(guardedByStepUp({ resource: 'pods/log', verb: 'get' }), 'not a read');
  t.equal(stepUpMinutesOf({ [STEP_UP_LABEL]: '15' }), 15);
  for (const bad of ['0', '1441', '-5', '1e3', ' 5', '5m', ''])
    t.equal(stepUpMinutesOf({ [STEP_UP_LABEL]: bad }), undefined, `"${bad}" asks nothing`);
  t.equal(stepUpMinutesOf(undefined), undefined);

  const key = Buffer.alloc(32, 7);
  const now = Math.floor(Date.now() / 1000);
  const claims = { uid: 3, st: 'stamp', iat: now, exp: now + 60, mf: now - 10, en: 1 as const };
  t.same(
    verifySession(key, signSession(key, claims), now),
    claims,
    'proof time and enrolment ride in the signed token',
  );
  const forged = signSession(key, { ...claims, mf: 'soon' as unknown as number });
  t.equal(verifySession(key, forged, now), undefined, 'a proof time that is not a number: no session');
  const tampered = signSession(key, claims).replace(/^v1\.[^.]+/, () => {
    const payload = Buffer.from(JSON.stringify({ ...claims, mf: now + 3600 })).toString('base64url');
    return `v1.${payload}`;
  });
  t.equal(verifySession(key, tampered, now), undefined, 'a later proof time written in by hand: no session');
});
