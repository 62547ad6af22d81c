// Issue 32 point 8, the registry's rules (test/security-revocation.test.ts has the real streams): an
// open stream ends when its principal no longer authenticates, when its own check says its roles no
// longer allow it, or else when it lost a role it held at the start; a stream is checked once right
// after it opens (a revocation that raced its request), and ends when its credential expires.
import t from 'tap';
import type { Authentication } from '../../src/auth/auth-service.js';
import { OpenStreams, type CredentialChecks, type RevocationReason } from '../../src/auth/open-streams.js';
import type { Principal } from '../../src/auth/principal.js';
import { createLogger } from '../../src/log.js';

const log = createLogger('silent');
const settle = (ms = 60) => new Promise((resolve) => setTimeout(resolve, ms));

/** Authentication as a table the test edits: who is valid with which roles, which roles exist. */
function fakeAuth() {
  const valid = new Map<string, string[]>();
  const existing = new Set<string>(['ops', 'viewer']);
  const expiry = new Map<string, number>();
  const keyOf = (p: Principal) => `${p.kind}:${p.id}`;
  const checks: CredentialChecks = {
    recheck(principal): Authentication {
      const roles = valid.get(keyOf(principal));
      return roles ? { principal: { ...principal, roles } } : { failure: 'user is disabled' };
    },
    credentialExpiresAt: (principal) => expiry.get(keyOf(principal)),
    heldRoles: (principal) => principal.roles.filter((role) => existing.has(role)),
  };
  return { checks, valid, existing, expiry };
}

function principal(id: number, roles: string[]): Principal {
  return { kind: 'user', id, name: `u${id}`, roles, groups: [] };
}

function registry(checks: CredentialChecks) {
  const ended: RevocationReason[] = [];
  return { streams: new OpenStreams(checks, log, (reason) => ended.push(reason)), ended };
}

t.test('a principal that no longer authenticates: its streams end, with why; others go on', async (t) => {
  const auth = fakeAuth();
  auth.valid.set('user:1', ['ops']);
  auth.valid.set('user:2', ['ops']);
  const { streams, ended } = registry(auth.checks);
  const messages: string[] = [];
  streams.open(principal(1, ['ops']), (m) => messages.push(`one:${m}`));
  const forgetDone = streams.open(principal(1, ['ops']), (m) => messages.push(`done:${m}`));
  streams.open(principal(2, ['ops']), (m) => messages.push(`two:${m}`));
  await settle();
  t.same(messages, [], 'nothing ends while every principal holds');
  forgetDone(); // that stream ended by itself
  auth.valid.delete('user:1');
  streams.identityChanged();
  streams.identityChanged(); // a burst: one recheck
  await settle();
  t.same(messages, ['one:credentials revoked: user is disabled'], "only the revoked principal's open stream");
  t.same(ended, ['revoked']);
  t.equal(streams.size, 1, 'the ended stream is forgotten');
  streams.stop();
});

t.test('without a check of its own, a stream ends when its principal lost a role it held at the start', async (t) => {
  const auth = fakeAuth();
  auth.valid.set('user:1', ['ops', 'viewer']);
  const { streams, ended } = registry(auth.checks);
  const messages: string[] = [];
  streams.open(principal(1, ['ops', 'viewer', 'gone']), (m) => messages.push(m));
  await settle();
  t.same(messages, [], 'a role that did not exist at the start counts for nothing');
  auth.valid.set('user:1', ['ops', 'viewer', 'new']);
  streams.recheckAll();
  t.same(messages, [], 'gaining a role ends nothing');
  auth.existing.delete('viewer'); // the Role deleted with kubectl: still named by the user
  streams.recheckAll();
  t.same(messages, ['credentials revoked: role viewer no longer held']);
  t.same(ended, ['forbidden']);
  streams.stop();
});

t.test('with a check of its own, a stream ends when its roles no longer allow it, whatever else changed', async (t) => {
  const auth = fakeAuth();
  auth.valid.set('user:1', ['ops', 'viewer']);
  const { streams } = registry(auth.checks);
  const messages: string[] = [];
  let allowed = true;
  streams.open(principal(1, ['ops', 'viewer']), (m) => messages.push(m), {
    stillAllowed: (now) => allowed && now.roles.includes('ops'),
  });
  auth.valid.set('user:1', ['ops']);
  streams.recheckAll();
  t.same(messages, [], 'losing a role the stream does not need ends nothing');
  allowed = false; // the role edited: it no longer allows what the stream does
  streams.recheckAll();
  t.same(messages, ['credentials revoked: your roles no longer allow this stream']);
  streams.stop();
});

t.test('a revocation between the request and the stream opening is seen right after it opens', async (t) => {
  const auth = fakeAuth();
  const { streams } = registry(auth.checks);
  const messages: string[] = [];
  streams.open(principal(1, ['ops']), (m) => messages.push(m));
  t.same(messages, [], 'not ended while the caller still wires the stream');
  await settle(10);
  t.same(messages, ['credentials revoked: user is disabled']);
  streams.stop();
});

t.test("a stream ends when its credential's expiry passes, with no cache change", async (t) => {
  const auth = fakeAuth();
  auth.valid.set('user:1', ['ops']);
  auth.expiry.set('user:1', Date.now() + 150);
  const { streams, ended } = registry(auth.checks);
  let endedAt: number | undefined;
  streams.open(principal(1, ['ops']), () => (endedAt = Date.now()));
  setTimeout(() => auth.valid.delete('user:1'), 150); // what recheck says once the expiry passed
  const expiresAt = auth.expiry.get('user:1')!;
  await settle(400);
  t.ok(endedAt !== undefined && endedAt >= expiresAt, 'ended, not before the expiry');
  t.same(ended, ['expired']);
  streams.stop();
});
