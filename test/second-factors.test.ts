// Second factors (docs/second-factors.md) on two replicas of one install: TOTP enrolled with codes
// otplib generates (time windows, a used code refused on the other replica, recovery codes, the
// rate limit), passkeys registered and used in headless Chromium with a virtual authenticator
// (DevTools' WebAuthn domain), a sign-in begun on one replica and finished on the other, step-up
// before a node terminal, a delete and kubectl on a cluster labelled production, the tokens a session
// mints carrying its proof, the admins' requirement and reset, and every change audited.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from 'otplib';
import t from 'tap';
import { launchBrowser } from './helpers/browser.js';
import { kubectl, kubectlInBackground, TEST_DIR, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { auditRecordOf, call, startGateway, type HttpResponse } from './helpers/gateway.js';
import { openWs } from './helpers/workload-streams.js';

const LOG = 'second-factors';
const host = await testControlPlane('host');
const target = await testControlPlane('target-a');
const namespace = uniqueName('kl-mfa');
const MAX_FAILURES = 15;
const env = {
  KITELINE_LOGIN_MAX_FAILURES: String(MAX_FAILURES),
  KITELINE_LOGIN_WINDOW: '600',
  KITELINE_TRUST_PROXY: 'loopback',
  KITELINE_AUDIT_FLUSH_INTERVAL_MS: '300',
  // kubectl sends its token over https only: kubeconfigs point at this listener.
  KITELINE_TLS_PORT: '0',
};
const a = await startGateway(t, { namespace, logName: LOG, env });
const b = await startGateway(t, { namespace, logName: `${LOG}-b`, env });
const admin = await bootstrapAdmin(a);
await addReadyCluster(a, admin, { name: 'prod', config: testKubeconfig('target-a'), isDefault: true });
const PASSWORD = 'correct-horse-battery';
/** A request id of this run (the log files are kept across runs). */
const rid = (what: string) => `${what}-${namespace}`;
const ns = uniqueName('mfa');
kubectl(target.kubeconfigPath, ['create', 'namespace', ns]);
t.teardown(() => kubectl(target.kubeconfigPath, ['delete', 'namespace', ns, '--wait=false']));

/** The Cookie header value of the auth_token (and other) cookies an answer set. */
function cookiesOf(res: HttpResponse, ...names: string[]): string {
  const wanted = names.length > 0 ? names : ['auth_token'];
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .filter((c) => wanted.includes(c.slice(0, c.indexOf('='))) && !c.endsWith('='))
    .join('; ');
}

async function passwordLogin(base: string, username: string, password = PASSWORD): Promise<HttpResponse> {
  return call(base, 'POST', '/api/auth/login/password', { body: { username, password } });
}

/** A password user holding `roles`. */
async function createUser(username: string, roles: string[]): Promise<void> {
  const created = await call(a.url, 'POST', '/api/v1/admin/users/', {
    headers: admin.headers,
    body: { username, password: PASSWORD, name: username },
  });
  t.equal(created.status, 201, `user ${username} created`);
  const listed = await call(a.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
  for (const role of roles) {
    const id = listed.body.roles.find((r: { name: string }) => r.name === role).id;
    await eventually(`${username} to hold ${role}`, async () => {
      const res = await call(a.url, 'POST', `/api/v1/admin/roles/${id}/assign`, {
        headers: admin.headers,
        body: { subjectType: 'user', subject: username },
      });
      return res.status < 300;
    });
  }
}

/** A TOTP code of `secret` at `offsetSeconds` from now. */
const codeAt = (secret: string, offsetSeconds = 0) =>
  generate({ secret, epoch: Math.floor(Date.now() / 1000) + offsetSeconds });
const stepNow = () => Math.floor(Date.now() / 30_000);
/** Waits until the time step is past `step` (a code of the current step then counts again). */
async function stepAfter(step: number): Promise<void> {
  while (stepNow() <= step) await new Promise((resolve) => setTimeout(resolve, 500));
}

/** Enrols TOTP for the session: the secret and the step of the code that enabled it. */
async function enrolTotp(cookie: string): Promise<{ secret: string; step: number; recoveryCodes: string[] }> {
  const setup = await call(a.url, 'POST', '/api/users/me/mfa/setup', {
    headers: { cookie },
    body: { current_password: PASSWORD },
  });
  const secret = setup.body.secret as string;
  const step = stepNow();
  const enabled = await call(a.url, 'POST', '/api/users/me/mfa/enable', {
    headers: { cookie },
    body: { code: await codeAt(secret) },
  });
  if (enabled.status !== 200) throw new Error(`enable: ${enabled.status} ${enabled.text}`);
  return { secret, step, recoveryCodes: enabled.body.recoveryCodes };
}

const adminCookie = cookiesOf(await passwordLogin(a.url, 'admin'));
let adminSecret = '';
let lastStep = 0;

t.test('TOTP: enrol with a QR code, sign in with a code on either replica, once', async (t) => {
  const noPassword = await call(a.url, 'POST', '/api/users/me/mfa/setup', { headers: { cookie: adminCookie } });
  t.equal(noPassword.status, 400, "setup asks for the current password (Kite's rule)");
  const wrongPassword = await call(a.url, 'POST', '/api/users/me/mfa/setup', {
    headers: { cookie: adminCookie },
    body: { current_password: 'not-it' },
  });
  t.equal(wrongPassword.status, 400, 'a wrong one: 400');
  const setup = await call(a.url, 'POST', '/api/users/me/mfa/setup', {
    headers: { cookie: adminCookie },
    body: { current_password: PASSWORD },
  });
  t.equal(setup.status, 200, 'setup');
  t.match(setup.body.otpauth_url, /^otpauth:\/\/totp\/kiteline:admin\?.*secret=/, 'an otpauth:// URI');
  t.match(setup.body.qr_code, /^data:image\/png;base64,/, 'and its QR code');
  adminSecret = setup.body.secret;
  const wrong = await call(a.url, 'POST', '/api/users/me/mfa/enable', {
    headers: { cookie: adminCookie },
    body: { code: '000000' === (await codeAt(adminSecret)) ? '111111' : '000000' },
  });
  t.equal(wrong.status, 401, 'a wrong first code does not enable it');
  lastStep = stepNow();
  const enabled = await call(a.url, 'POST', '/api/users/me/mfa/enable', {
    headers: { cookie: adminCookie },
    body: { code: await codeAt(adminSecret) },
  });
  t.equal(enabled.status, 200, 'the first code enables it');
  t.equal(enabled.body.recoveryCodes.length, 10, 'ten recovery codes, shown once');
  const stored = JSON.parse(
    kubectl(host.kubeconfigPath, ['-n', namespace, 'get', 'secret', 'user-admin-mfa', '-o', 'json']).stdout || '{}',
  );
  const codes = Buffer.from(stored.data?.recoveryCodes ?? '', 'base64').toString();
  t.notOk(codes.includes(enabled.body.recoveryCodes[0]), 'recovery codes are stored hashed');
  const status = await call(b.url, 'GET', '/api/users/me/mfa', { headers: { cookie: adminCookie } });
  t.match(status.body, { totpEnabled: true, recoveryCodesLeft: 10, methods: ['totp'] }, 'the other replica sees it');

  const pending = await passwordLogin(a.url, 'admin');
  t.equal(pending.status, 401, 'the password alone does not sign in');
  t.match(
    pending.body,
    { error: 'mfa_required', details: { methods: ['totp'] } },
    "it asks for the code (Kite's answer)",
  );
  const kiteWrong = await call(a.url, 'POST', '/api/auth/login/password', {
    body: {
      username: 'admin',
      password: PASSWORD,
      mfa_code: '000000' === (await codeAt(adminSecret)) ? '111111' : '000000',
    },
  });
  t.match(kiteWrong, { status: 401, body: { error: 'invalid_mfa_code' } }, 'a wrong mfa_code with the password: 401');
  t.equal(cookiesOf(pending), '', 'no session cookie yet');
  const mfa = cookiesOf(pending, 'kiteline_mfa');
  t.ok(mfa, 'the pending sign-in rides in its own cookie');
  const bad = await call(b.url, 'POST', '/api/auth/login/mfa', { headers: { cookie: mfa }, body: { code: '12345x' } });
  t.equal(bad.status, 401, 'a malformed code: 401');
  const tooFar = await call(b.url, 'POST', '/api/auth/login/mfa', {
    headers: { cookie: mfa },
    body: { code: await codeAt(adminSecret, 90) },
  });
  t.equal(tooFar.status, 401, 'a code three steps ahead is outside the window');
  const next = await codeAt(adminSecret, 30);
  const signedIn = await call(b.url, 'POST', '/api/auth/login/mfa', { headers: { cookie: mfa }, body: { code: next } });
  t.equal(signedIn.status, 204, 'a code one step ahead is inside the window: signed in on the other replica');
  t.ok(cookiesOf(signedIn), 'with a session cookie');
  lastStep = stepNow() + 1;
  const again = cookiesOf(await passwordLogin(b.url, 'admin'), 'kiteline_mfa');
  const replay = await call(a.url, 'POST', '/api/auth/login/mfa', { headers: { cookie: again }, body: { code: next } });
  t.equal(replay.status, 401, 'the same code again, on the first replica: refused');
  const reused = await call(a.url, 'POST', '/api/auth/login/mfa', { headers: { cookie: mfa }, body: { code: next } });
  t.equal(reused.status, 401, 'the finished sign-in cannot be finished again');

  const recovery = enabled.body.recoveryCodes[0] as string;
  const withRecovery = await call(a.url, 'POST', '/api/auth/login/mfa', {
    headers: { cookie: again },
    body: { code: recovery },
  });
  t.equal(withRecovery.status, 204, 'a recovery code signs in');
  const third = cookiesOf(await passwordLogin(a.url, 'admin'), 'kiteline_mfa');
  const recoveryAgain = await call(b.url, 'POST', '/api/auth/login/mfa', {
    headers: { cookie: third },
    body: { code: recovery },
  });
  t.equal(recoveryAgain.status, 401, 'once');
  const left = await call(a.url, 'GET', '/api/users/me/mfa', { headers: { cookie: cookiesOf(withRecovery) } });
  t.equal(left.body.recoveryCodesLeft, 9, 'nine left');
  t.equal(left.body.secondFactorAt, null, 'a recovery code signs in but proves no fresh factor');
  const signedInStatus = await call(a.url, 'GET', '/api/users/me/mfa', { headers: { cookie: cookiesOf(signedIn) } });
  t.type(signedInStatus.body.secondFactorAt, 'number', 'a code does: the session carries its proof time');
  const me = await call(a.url, 'GET', '/api/auth/user', { headers: { cookie: cookiesOf(signedIn) } });
  t.equal(me.body.user.mfa_enabled, true, "the caller shows mfa_enabled (Kite's field)");
});

t.test('TOTP: failures are rate-limited per user', async (t) => {
  await createUser('carol', ['viewer']);
  const carol = cookiesOf(await passwordLogin(a.url, 'carol'));
  const { secret } = await enrolTotp(carol);
  const kite = await call(a.url, 'POST', '/api/auth/login/password', {
    body: { username: 'carol', password: PASSWORD, mfa_code: await codeAt(secret, 30) },
  });
  t.equal(kite.status, 204, "Kite's one-step sign-in: the password and a code");
  t.ok(cookiesOf(kite), 'a session');
  const pending = cookiesOf(await passwordLogin(a.url, 'carol'), 'kiteline_mfa');
  // From an address of its own (through the trusted loopback proxy): the other tests' stays unlimited.
  const headers = { cookie: pending, 'x-forwarded-for': '192.0.2.7' };
  const statuses: number[] = [];
  for (let i = 0; i < MAX_FAILURES; i++)
    statuses.push((await call(a.url, 'POST', '/api/auth/login/mfa', { headers, body: { code: '000001' } })).status);
  t.same(new Set(statuses), new Set([401]), `${MAX_FAILURES} wrong codes: 401 each`);
  const limited = await call(a.url, 'POST', '/api/auth/login/mfa', {
    headers,
    body: { code: await codeAt(secret, 60) },
  });
  t.equal(limited.status, 429, 'past the limit even a right code waits');
  t.ok(Number(limited.headers.get('retry-after')) > 0, 'with Retry-After');

  const reset = await call(a.url, 'DELETE', `/api/v1/admin/users/${await userId('carol')}/mfa`, {
    headers: { ...admin.headers, 'x-request-id': rid('mfa-reset-carol') },
  });
  t.same(reset.body, { totp: true, passkeys: 0 }, "an admin resets carol's factor");
  const audited = await eventually('the reset audited', () => auditRecordOf(LOG, rid('mfa-reset-carol')), 10_000, 100);
  t.match(audited, { verb: 'reset', resource: 'second-factors', name: 'carol', status: 200 }, 'audited');
  const own = await call(a.url, 'DELETE', `/api/v1/admin/users/${await userId('admin')}/mfa`, {
    headers: { cookie: adminCookie },
  });
  t.equal(own.status, 409, "an admin's own factors are not reset by the admin route");
  await eventually(
    'carol signs in with the password alone',
    async () => (await passwordLogin(b.url, 'carol')).status === 204,
  );
});

/** Sets (`key=value`) or removes (`key-`) labels of the cluster `prod`'s Cluster object. */
function labelCluster(...labels: string[]): void {
  const clusters = JSON.parse(
    kubectl(host.kubeconfigPath, ['-n', namespace, 'get', 'clusters.kiteline.io', '-o', 'json']).stdout,
  ) as { items: Array<{ metadata: { name: string }; spec: { name?: string } }> };
  const prod = clusters.items.find((c) => c.spec.name === 'prod')!.metadata.name;
  const res = kubectl(host.kubeconfigPath, [
    ...['-n', namespace, 'label', '--overwrite', 'clusters.kiteline.io', prod],
    ...labels,
  ]);
  if (res.status !== 0) throw new Error(`kubectl label: ${res.stderr}`);
}

async function userId(username: string): Promise<number> {
  const users = await call(a.url, 'GET', '/api/v1/admin/users/?size=100', { headers: admin.headers });
  return users.body.users.find((u: { username: string }) => u.username === username).id;
}

t.test('step-up: a node terminal and a delete on a production cluster ask for a fresh factor', async (t) => {
  labelCluster('kiteline.io/production=true', 'kiteline.io/step-up-minutes=5');
  // adminCookie signed in with the password before TOTP was on: it never proved a factor.
  await eventually('the label to reach both replicas', async () => {
    const [x, y] = await Promise.all(
      [a, b].map((gw) => call(gw.url, 'GET', '/api/auth/step-up?cluster=prod', { headers: { cookie: adminCookie } })),
    );
    return x.body.required && y.body.required;
  });
  const before = await call(a.url, 'GET', '/api/auth/step-up?cluster=prod', { headers: { cookie: adminCookie } });
  t.match(
    before.body,
    { required: true, maxAgeSeconds: 300, fresh: false, methods: ['totp'] },
    'the page can ask first',
  );

  const wsBase = a.url.replace(/^http/, 'ws');
  const refused = await openWs(`${wsBase}/api/v1/node-terminal/target-a-node/ws?shell=sh`, {
    cookie: adminCookie,
  }).then(
    () => undefined,
    (err: { status: number; body: string }) => err,
  );
  t.equal(refused?.status, 401, 'the node terminal is refused');
  t.match(JSON.parse(refused?.body ?? '{}'), { reason: 'SecondFactorRequired', details: { maxAgeSeconds: 300 } });
  t.equal(
    JSON.parse(
      kubectl(target.kubeconfigPath, ['get', 'pods', '-A', '-l', 'kiteline.io/node-terminal=true', '-o', 'json'])
        .stdout,
    ).items.length,
    0,
    'no node terminal pod was made',
  );

  kubectl(target.kubeconfigPath, ['-n', ns, 'create', 'configmap', 'doomed']);
  const del = await call(a.url, 'DELETE', `/api/v1/configmaps/${ns}/doomed`, { headers: { cookie: adminCookie } });
  t.equal(del.status, 401, 'a delete is refused');
  t.equal(del.body.reason, 'SecondFactorRequired', 'with a machine-readable reason');
  const readable = await call(a.url, 'GET', `/api/v1/configmaps/${ns}/doomed`, { headers: { cookie: adminCookie } });
  t.equal(readable.status, 200, 'reads need nothing more');

  const oldKubeconfig = join(TEST_DIR, `${uniqueName('mfa-old')}.kubeconfig`);
  writeFileSync(
    oldKubeconfig,
    (await call(a.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie: adminCookie } })).text,
  );
  const oldDelete = await kubectlInBackground(oldKubeconfig, ['-n', ns, 'delete', 'configmap', 'doomed']);
  t.not(oldDelete.status, 0, 'kubectl with a token of the unproved session: refused');
  t.match(oldDelete.stderr, /second factor/, 'saying why');

  // A code of a step after every one used so far.
  await stepAfter(lastStep);
  const up = await call(b.url, 'POST', '/api/auth/step-up', {
    headers: { cookie: adminCookie, 'x-request-id': rid('mfa-step-up') },
    body: { code: await codeAt(adminSecret) },
  });
  t.equal(up.status, 204, 'a TOTP code proves a factor now (on the other replica)');
  lastStep = stepNow();
  const proved = cookiesOf(up);
  t.ok(proved, 'the session cookie is renewed');
  t.match(await eventually('step-up audited', () => auditRecordOf(`${LOG}-b`, rid('mfa-step-up')), 10_000, 100), {
    verb: 'step-up',
    who: 'admin',
  });
  const after = await call(a.url, 'GET', '/api/auth/step-up?cluster=prod', { headers: { cookie: proved } });
  t.match(after.body, { required: true, fresh: true }, 'fresh now');

  const client = await openWs(`${wsBase}/api/v1/node-terminal/target-a-node/ws?shell=sh`, { cookie: proved });
  t.pass('the node terminal opens');
  client.ws.close();

  const freshKubeconfig = join(TEST_DIR, `${uniqueName('mfa-new')}.kubeconfig`);
  writeFileSync(
    freshKubeconfig,
    (await call(a.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie: proved } })).text,
  );
  const newDelete = await kubectlInBackground(freshKubeconfig, ['-n', ns, 'delete', 'configmap', 'doomed']);
  t.equal(newDelete.status, 0, `kubectl with a token minted after the step-up deletes (${newDelete.stderr})`);
  const mcp = await call(a.url, 'POST', '/api/v1/mcp/token', { headers: { cookie: proved } });
  t.equal(mcp.status, 200, 'an MCP token');
  const keys = JSON.parse(
    kubectl(host.kubeconfigPath, ['-n', namespace, 'get', 'apikeys.kiteline.io', '-o', 'json']).stdout,
  ).items as Array<{ spec: { audience?: string; secondFactorAt?: string } }>;
  t.ok(
    keys.some((k) => k.spec.audience === 'mcp' && Date.parse(k.spec.secondFactorAt ?? '') / 1000 >= lastStep * 30 - 60),
    'the MCP token carries the proof time',
  );

  kubectl(target.kubeconfigPath, ['-n', ns, 'create', 'configmap', 'doomed-too']);
  const freshDelete = await call(b.url, 'DELETE', `/api/v1/configmaps/${ns}/doomed-too`, {
    headers: { cookie: proved },
  });
  t.equal(freshDelete.status, 200, 'the delete runs with the fresh session');
});

t.test('a role can ask for a step-up too; clusters without rules need none', async (t) => {
  labelCluster('kiteline.io/step-up-minutes-');
  await createRole(a, admin, { name: 'careful', clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['*'] });
  const patched = kubectl(host.kubeconfigPath, [
    ...['-n', namespace, 'patch', 'roles.kiteline.io', 'role-careful', '--type=merge'],
    ...['-p', '{"spec":{"stepUpMinutes":2}}'],
  ]);
  t.equal(patched.status, 0, `the role asks for a step-up (${patched.stderr})`);
  await createUser('dave', ['careful']);
  await createUser('erin', ['admin']);
  const dave = cookiesOf(await passwordLogin(a.url, 'dave'));
  const erin = cookiesOf(await passwordLogin(a.url, 'erin'));
  kubectl(target.kubeconfigPath, ['-n', ns, 'create', 'configmap', 'one']);
  kubectl(target.kubeconfigPath, ['-n', ns, 'create', 'configmap', 'two']);
  await eventually('the role rule in force', async () => {
    const res = await call(a.url, 'GET', '/api/auth/step-up?cluster=prod', { headers: { cookie: dave } });
    return res.body.required === true && res.body.maxAgeSeconds === 120;
  });
  const daveDelete = await call(a.url, 'DELETE', `/api/v1/configmaps/${ns}/one`, { headers: { cookie: dave } });
  t.equal(daveDelete.status, 401, "the role's holder needs a fresh factor");
  t.match(daveDelete.body.error, /enrol|POST \/api\/auth\/step-up/, 'and is told how');
  await eventually('the label gone', async () => {
    const res = await call(a.url, 'GET', '/api/auth/step-up?cluster=prod', { headers: { cookie: erin } });
    return res.body.required === false;
  });
  const erinDelete = await call(a.url, 'DELETE', `/api/v1/configmaps/${ns}/two`, { headers: { cookie: erin } });
  t.equal(erinDelete.status, 200, 'an admin without that role deletes without one');
});

/** In-page helpers (the page's own fetch and WebAuthn; the test's TypeScript has no DOM types). */
const PAGE_HELPERS = `
  window.api = async (method, path, body, requestId) => {
    const headers = requestId ? { 'x-request-id': requestId } : {};
    const res = await fetch(path, {
      method,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, body: json };
  };
  window.createPasskey = async (options) =>
    (await navigator.credentials.create({
      publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options),
    })).toJSON();
  window.getPasskey = async (options) =>
    (await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) })).toJSON();
`;

t.test(
  'passkeys in Chromium: register, rename, sign in without a username on the other replica, step up',
  async (t) => {
    await createUser('bob', ['admin']);
    const browser = await launchBrowser(t);
    const page = await browser.newPage();
    await page.evaluateOnNewDocument(PAGE_HELPERS);
    const cdp = await page.createCDPSession();
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    /** Runs an expression in the page (its helpers: api, createPasskey, getPasskey). */
    const inPage = <T = any>(expression: string): Promise<T> =>
      page.evaluate(`(async () => ${expression})()`) as Promise<T>;
    // localhost is a secure context: WebAuthn works over plain http there. Both replicas are on
    // localhost (other ports): the passkey's relying party, "localhost", is the same.
    const originA = a.url.replace('127.0.0.1', 'localhost');
    const originB = b.url.replace('127.0.0.1', 'localhost');
    await page.goto(`${originA}/api/auth/providers`);
    const signIn = await inPage(
      `api('POST', '/api/auth/login/password', { username: 'bob', password: '${PASSWORD}' })`,
    );
    t.equal(signIn.status, 204, 'bob signs in with his password in the browser');

    const noPassword = await inPage(`api('POST', '/api/users/me/passkeys/begin', { name: 'laptop' })`);
    t.equal(noPassword.status, 400, 'registration asks for the current password');
    const begun = await inPage(
      `api('POST', '/api/users/me/passkeys/begin', { name: 'laptop', current_password: '${PASSWORD}' })`,
    );
    t.equal(begun.status, 200, 'registration begins');
    t.match(begun.body.publicKey.authenticatorSelection, { residentKey: 'required', userVerification: 'required' });
    const created = await inPage(`createPasskey(${JSON.stringify(begun.body.publicKey)})`);
    const registered = await inPage(
      `api('POST', '/api/users/me/passkeys/finish', ${JSON.stringify(created)}, '${rid('mfa-passkey-create')}')`,
    );
    t.equal(registered.status, 201, `a passkey registered (${JSON.stringify(registered.body)})`);
    t.match(registered.body, { name: 'laptop', id: /^pk-[0-9a-f]{40}$/ });
    const passkeyId = registered.body.id as string;
    t.match(await eventually('audited', () => auditRecordOf(LOG, rid('mfa-passkey-create')), 10_000, 100), {
      verb: 'create',
      resource: 'passkeys',
      name: 'laptop',
      who: 'bob',
      status: 201,
    });
    t.equal(
      kubectl(host.kubeconfigPath, ['-n', namespace, 'get', `passkeys.kiteline.io/${passkeyId}`]).status,
      0,
      'stored as a Passkey object',
    );
    const again = await inPage(
      `api('POST', '/api/users/me/passkeys/finish', ${JSON.stringify({ ...created, name: 'again' })})`,
    );
    t.equal(again.status, 401, 'the registration cannot be finished twice');

    const second = await inPage(`api('POST', '/api/users/me/passkeys/begin', { current_password: '${PASSWORD}' })`);
    t.equal(second.status, 401, 'a second passkey needs a fresh factor first');
    t.equal(second.body.reason, 'SecondFactorRequired');
    const renamed = await inPage(`api('PUT', '/api/users/me/passkeys/${passkeyId}', { name: 'work laptop' })`);
    t.equal(renamed.body.name, 'work laptop', 'renamed');

    // Signed out, in again with the passkey alone: begun on replica B, finished by B, replayed to A.
    await inPage(`api('POST', '/api/auth/logout')`);
    await page.goto(`${originB}/api/auth/providers`);
    const login = await inPage(`api('POST', '/api/auth/passkey/login/begin')`);
    t.same(login.body.publicKey.allowCredentials ?? [], [], 'the sign-in names no credential (usernameless)');
    const assertion = await inPage(`getPasskey(${JSON.stringify(login.body.publicKey)})`);
    const challenge = (await page.cookies(`${originB}/api/auth/passkey/login/finish`)).find(
      (c) => c.name === 'kiteline_webauthn',
    );
    t.ok(challenge?.httpOnly, 'the challenge rides in an HttpOnly cookie');
    const finish = (gw: { url: string }) =>
      call(gw.url, 'POST', '/api/auth/passkey/login/finish', {
        headers: { cookie: `kiteline_webauthn=${challenge!.value}` },
        body: assertion,
      });
    const viaPasskey = await finish(b);
    t.equal(viaPasskey.status, 204, 'signed in with the passkey on replica B');
    const bobSession = cookiesOf(viaPasskey);
    const me = await call(a.url, 'GET', '/api/auth/user', { headers: { cookie: bobSession } });
    t.equal(me.body.user.username, 'bob', 'as bob, without typing a username (and replica A takes the session)');
    const mfa = await call(a.url, 'GET', '/api/users/me/mfa', { headers: { cookie: bobSession } });
    t.type(mfa.body.secondFactorAt, 'number', 'the session proved a factor');
    t.equal((await finish(a)).status, 401, 'the same answer to the same challenge, on replica A: refused');

    // Step-up with the passkey before a delete on the production cluster (labelled again).
    labelCluster('kiteline.io/step-up-minutes=1');
    kubectl(target.kubeconfigPath, ['-n', ns, 'create', 'configmap', 'passkey-doomed']);
    const bobPassword = cookiesOf(await passwordLogin(a.url, 'bob'));
    await eventually('the label in force', async () => {
      const res = await call(a.url, 'GET', '/api/auth/step-up?cluster=prod', { headers: { cookie: bobPassword } });
      return res.body.required === true && res.body.fresh === false;
    });
    await page.setCookie({
      name: 'auth_token',
      value: bobPassword.slice('auth_token='.length),
      domain: 'localhost',
      path: '/',
    });
    await page.goto(`${originA}/api/auth/providers`);
    const doomed = `/api/v1/configmaps/${ns}/passkey-doomed`;
    const before = await inPage(`api('DELETE', '${doomed}')`);
    t.equal(before.status, 401, 'the delete is refused');
    t.equal(before.body.reason, 'SecondFactorRequired', 'asking for a fresh factor');
    const stepBegin = await inPage(`api('POST', '/api/auth/step-up/passkey/begin')`);
    t.equal(stepBegin.body.publicKey.allowCredentials.length, 1, "the step-up names bob's passkey");
    const stepAssertion = await inPage(`getPasskey(${JSON.stringify(stepBegin.body.publicKey)})`);
    const stepped = await inPage(`api('POST', '/api/auth/step-up/passkey/finish', ${JSON.stringify(stepAssertion)})`);
    t.equal(stepped.status, 204, 'proved with the passkey');
    t.equal((await inPage(`api('DELETE', '${doomed}')`)).status, 200, 'the delete runs');

    const deleted = await inPage(
      `api('DELETE', '/api/users/me/passkeys/${passkeyId}', undefined, '${rid('mfa-passkey-delete')}')`,
    );
    t.equal(deleted.status, 200, 'with a fresh proof, the passkey is deleted');
    t.match(await eventually('audited', () => auditRecordOf(LOG, rid('mfa-passkey-delete')), 10_000, 100), {
      verb: 'delete',
      resource: 'passkeys',
      name: passkeyId,
      who: 'bob',
    });
    const passkeys = await call(a.url, 'GET', '/api/users/me/passkeys', { headers: { cookie: bobPassword } });
    t.same(passkeys.body, { passkeys: [] }, 'none left');
  },
);

t.test('admins can require a second factor: a password user without one may only enrol', async (t) => {
  await createUser('frank', ['viewer']);
  const put = await call(a.url, 'PUT', '/api/v1/admin/general-setting', {
    headers: admin.headers,
    body: { requireMFA: true },
  });
  t.equal(put.status, 200, 'requireMFA on');
  t.teardown(() =>
    call(a.url, 'PUT', '/api/v1/admin/general-setting', { headers: admin.headers, body: { requireMFA: false } }),
  );
  const res = await eventually('the setting on replica B', async () => {
    const r = await passwordLogin(b.url, 'frank');
    return r.status === 200 && r.body?.mfaSetupRequired ? r : undefined;
  });
  const frank = cookiesOf(res);
  const clusters = await call(b.url, 'GET', '/api/v1/clusters', { headers: { cookie: frank } });
  t.equal(clusters.status, 403, 'nothing else opens');
  t.match(clusters.body.error, /enrol/, 'saying why');
  const mfa = await call(b.url, 'GET', '/api/users/me/mfa', { headers: { cookie: frank } });
  t.match(mfa.body, { enrolmentOnly: true, required: true, totpEnabled: false });
  const setup = await call(b.url, 'POST', '/api/users/me/mfa/setup', {
    headers: { cookie: frank },
    body: { current_password: PASSWORD },
  });
  const enabled = await call(b.url, 'POST', '/api/users/me/mfa/enable', {
    headers: { cookie: frank, 'x-request-id': rid('mfa-enable-frank') },
    body: { code: await codeAt(setup.body.secret) },
  });
  t.equal(enabled.status, 200, 'enrolled');
  const whole = cookiesOf(enabled);
  t.ok(whole, 'a whole session now');
  t.equal(
    (await call(b.url, 'GET', '/api/v1/clusters', { headers: { cookie: whole } })).status,
    200,
    'it opens the rest',
  );
  t.match(await eventually('enable audited', () => auditRecordOf(`${LOG}-b`, rid('mfa-enable-frank')), 10_000, 100), {
    verb: 'enable',
    resource: 'totp',
    who: 'frank',
    status: 200,
  });
  const disable = await call(b.url, 'POST', '/api/users/me/mfa/disable', {
    headers: { cookie: whole },
    body: { code: '000000' },
  });
  t.equal(disable.status, 409, 'while required, the only factor cannot be turned off');
});

t.test('the weakest callers', async (t) => {
  for (const [method, path] of [
    ['GET', '/api/users/me/mfa'],
    ['POST', '/api/users/me/mfa/setup'],
    ['POST', '/api/users/me/passkeys/begin'],
    ['POST', '/api/auth/step-up'],
  ] as const) {
    const body = method === 'POST' ? { body: { code: '123456' } } : {};
    const anonymous = await call(a.url, method, path, body);
    t.equal(anonymous.status, 401, `anonymous ${method} ${path}: 401`);
    const key = await call(a.url, method, path, { headers: admin.headers, ...body });
    t.equal(key.status, 403, `an API key ${method} ${path}: 403 (factors are a person's)`);
  }
  const noChallenge = await call(a.url, 'POST', '/api/auth/login/mfa', { body: { code: '123456' } });
  t.equal(noChallenge.status, 401, 'a second step without a pending sign-in: 401');
  const forged = await call(a.url, 'POST', '/api/auth/login/mfa', {
    headers: { cookie: 'kiteline_mfa=eyJwIjoibWZhLWxvZ2luIiwidSI6MSwiZXhwIjo5OTk5OTk5OTk5fQ.AAAA' },
    body: { code: '123456' },
  });
  t.equal(forged.status, 401, 'a forged pending sign-in: 401');
  const garbage = await call(a.url, 'POST', '/api/auth/passkey/login/finish', { body: { id: 'x' } });
  t.equal(garbage.status, 400, 'a malformed assertion: 400');
  const noCookie = await call(a.url, 'POST', '/api/auth/passkey/login/finish', {
    body: { id: 'x', rawId: 'x', type: 'public-key', response: {} },
  });
  t.equal(noCookie.status, 401, 'an assertion without its challenge: 401');
  const begin = await call(a.url, 'POST', '/api/auth/passkey/login/begin');
  t.equal(begin.status, 200, 'anyone may begin a passkey sign-in');
  const used = JSON.parse(
    kubectl(host.kubeconfigPath, ['-n', namespace, 'get', 'usedchallenges.kiteline.io', '-o', 'json']).stdout,
  );
  const before = used.items.length;
  for (let i = 0; i < 20; i++) await call(a.url, 'POST', '/api/auth/passkey/login/begin');
  const after = JSON.parse(
    kubectl(host.kubeconfigPath, ['-n', namespace, 'get', 'usedchallenges.kiteline.io', '-o', 'json']).stdout,
  );
  t.equal(after.items.length, before, 'and writes nothing to the host');
});
