// Kite's login page flow in a real browser (Debian's headless chromium, driven by puppeteer-core):
// on a page of kiteline's origin, the login page's own steps (fetch /api/auth/providers, fetch
// /api/auth/login?provider=, go to auth_url), the provider's login and consent forms typed into and
// clicked, the redirect back through /api/auth/callback to /, and the session cookie then working
// for fetches while staying out of reach of page scripts (HttpOnly).
import t from 'tap';
import { launchBrowser } from './helpers/browser.js';
import { call, startGateway } from './helpers/gateway.js';
import { bootstrapAdmin, withCookie } from './helpers/auth-session.js';
import { startOidcProvider } from './helpers/oidc-provider.js';

t.test("Kite's login page flow in a browser", async (t) => {
  const gw = await startGateway(t);
  const admin = withCookie(await bootstrapAdmin(gw.url));
  const op = await startOidcProvider(`${gw.url}/api/auth/callback`);
  t.teardown(() => op.close());
  const created = await call(gw.url, 'POST', '/api/v1/admin/oauth-providers/', {
    ...admin,
    body: {
      name: 'corp',
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      issuer: op.issuer,
      scopes: 'openid profile email groups',
    },
  });
  t.equal(created.status, 201, created.text);
  const roles = (await call(gw.url, 'GET', '/api/v1/admin/roles/', admin)).body.roles as { id: number; name: string }[];
  await call(gw.url, 'POST', `/api/v1/admin/roles/${roles.find((r) => r.name === 'viewer')!.id}/assign`, {
    ...admin,
    body: { subjectType: 'group', subject: 'readers' },
  });
  op.accounts.set('alice-sub', { preferred_username: 'alice', name: 'Alice', groups: ['readers'] });

  const browser = await launchBrowser(t);
  const page = await browser.newPage();
  // A page of kiteline's origin, where Kite's UI would run.
  await page.goto(`${gw.url}/docs`);

  // Kite's login page: the providers, then login(provider) = fetch the auth_url and go there.
  const providers = await page.evaluate(async () => (await fetch('/api/auth/providers')).json());
  t.same(providers, { providers: ['corp', 'password'], credentialProviders: ['password'], oauthProviders: ['corp'] });
  await Promise.all([
    page.waitForNavigation(),
    page.evaluate(async () => {
      const res = await fetch('/api/auth/login?provider=corp');
      const data = (await res.json()) as { auth_url: string };
      (globalThis as unknown as { location: { href: string } }).location.href = data.auth_url;
    }),
  ]);
  t.match(page.url(), new RegExp(`^${op.issuer}/interaction/`), "at the provider's login page");

  // The provider's login form, then its consent form.
  await page.type('input[name=login]', 'alice-sub');
  await page.type('input[name=password]', 'any-password');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('button[type=submit]')]);
  t.equal(new URL(page.url()).origin, gw.url, 'back at kiteline');
  t.equal(new URL(page.url()).pathname, '/', 'on the home page');

  const me = await page.evaluate(async () => {
    const res = await fetch('/api/auth/user');
    return { status: res.status, body: (await res.json()) as { user: { username: string; provider: string } } };
  });
  t.equal(me.status, 200, 'the session cookie works');
  t.match(me.body.user, { username: 'alice', provider: 'corp', roles: [{ name: 'viewer' }] });
  const visible = await page.evaluate(
    () => (globalThis as unknown as { document: { cookie: string } }).document.cookie,
  );
  t.notMatch(visible, /auth_token/, 'page scripts cannot read the session (HttpOnly)');
  const cookies = await browser.cookies();
  const session = cookies.find((c) => c.name === 'auth_token');
  t.match(session, { httpOnly: true, sameSite: 'Lax', path: '/' });
  t.notOk(
    cookies.some((c) => c.name === 'kiteline_oidc'),
    'the sign-in flow cookie is gone',
  );
});
