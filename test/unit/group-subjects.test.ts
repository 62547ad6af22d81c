// Group subjects (host/group-subjects.ts): the scoped forms, what a bare name resolves to, and which
// subjects a provider's user holds.
import t from 'tap';
import { BadRequestError } from '../../src/errors.js';
import {
  groupSubject,
  groupSubjectsOf,
  isBareGroupSubject,
  resolveGroupSubject,
} from '../../src/host/group-subjects.js';

t.test('the scoped forms', async (t) => {
  t.equal(groupSubject('corp', 'platform-admins'), 'oidc:corp/platform-admins');
  t.equal(groupSubject('ldap', 'cn=ops,ou=groups,dc=example,dc=org'), 'ldap/cn=ops,ou=groups,dc=example,dc=org');
  t.equal(groupSubject('corp', 'a/b'), 'oidc:corp/a/b', 'a group may hold a /');
  t.ok(isBareGroupSubject('platform-admins'));
  t.ok(isBareGroupSubject('acme:devs'), "Dex's org:team is a bare name");
  t.notOk(isBareGroupSubject('oidc:corp/x'));
  t.notOk(isBareGroupSubject('ldap/x'));
});

t.test('what an assignment stores', async (t) => {
  t.equal(resolveGroupSubject('oidc:corp/x', ['corp', 'partner']), 'oidc:corp/x');
  t.equal(resolveGroupSubject('oidc:gone/x', []), 'oidc:gone/x', 'a provider not configured yet');
  t.equal(resolveGroupSubject('ldap/ops', ['corp']), 'ldap/ops');
  t.equal(resolveGroupSubject('ops', ['corp']), 'oidc:corp/ops', 'a bare name: the only provider');
  t.equal(resolveGroupSubject('ops', ['ldap']), 'ldap/ops');
  t.throws(() => resolveGroupSubject('ops', ['corp', 'ldap']), /oidc:corp\/ops, ldap\/ops/);
  t.throws(() => resolveGroupSubject('ops', []), /no identity provider/);
  for (const bad of [
    'oidc:Corp/x',
    'oidc:corp/',
    'oidc:/x',
    'oidc:corp',
    'ldap/',
    'ldap:x',
    'oidc:ldap/x',
    'x'.repeat(1025),
  ])
    t.throws(() => resolveGroupSubject(bad, ['corp']), new BadRequestError(''), JSON.stringify(bad).slice(0, 40));
});

t.test("a user's subjects", async (t) => {
  t.same(groupSubjectsOf('corp', ['a', 'b'], undefined), ['oidc:corp/a', 'oidc:corp/b']);
  t.same(groupSubjectsOf('corp', ['a'], 'corp'), ['oidc:corp/a', 'a'], 'bare names: only for the sole source');
  t.same(groupSubjectsOf('ldap', ['a'], 'corp'), ['ldap/a'], "not for another source's users");
});
