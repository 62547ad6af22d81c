// Issue 32, points 1, 2, 3 and 9, as an attacker would try them on a real host and target:
// kubeconfig tokens are bounded (a cap per user that revokes the oldest, a mint rate limit) and
// listed and revoked by their owners and by admins; a kubeconfig token works on the Kubernetes
// API only (a leaked one mints no permanent admin key, no fresh kubeconfig); a flood of
// unauthenticated requests pushes no authenticated audit record out; moving an OAuth provider's
// issuer or token endpoint needs its client secret again.
import { request as httpRequest } from 'node:http';
import t from 'tap';
import { MINTS_PER_USER } from '../src/gateway/routes/kubeconfig.js';
import { login } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, signedInUser, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';

const ME = '/api/users/me/kubeconfig-tokens';
const ADMIN_TOKENS = '/api/v1/admin/kubeconfig-tokens';
const CAP = 3;

/** Mints a kubeconfig with the session cookie: the answer, and the token in it when 200. */
async function mint(gw: TestGateway, cookie: string) {
  const res = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  const token = res.status === 200 ? /token: (\S+)/.exec(res.text)![1] : undefined;
  return { res, token };
}

const tokenId = (token: string) => Number(/^kl_(\d+)_/.exec(token)![1]);
const version = (gw: TestGateway, token: string) =>
  call(gw.url, 'GET', '/k8s/clusters/b/version', { headers: { authorization: `Bearer ${token}` } });

t.test(
  'point 1: kubeconfig tokens are capped per user, rate limited, and listed and revoked by owner and admin',
  async (t) => {
    const gw = await startGateway(t, { env: { KITELINE_KUBECONFIG_TOKENS_PER_USER: String(CAP) } });
    const admin = await bootstrapAdmin(gw);
    await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b') });
    const viewer = await signedInUser(gw, admin, 'vic', ['viewer']);
    const other = await signedInUser(gw, admin, 'otto', ['viewer']);

    const tokens: string[] = [];
    for (let i = 0; i < CAP + 1; i++) tokens.push((await mint(gw, viewer)).token!);
    const mine = await call(gw.url, 'GET', ME, { headers: { cookie: viewer } });
    t.equal(mine.status, 200, mine.text);
    t.same(
      mine.body.tokens.map((token: { id: number }) => token.id),
      tokens.slice(1).map(tokenId),
      `at most ${CAP} live: the oldest was revoked`,
    );
    t.match(mine.body.tokens[0], { name: /^kubeconfig-vic-/, roles: ['viewer'], expiresAt: String, createdAt: String });
    t.notOk(JSON.stringify(mine.body).includes(tokens[1].replace(/^kl_\d+_/, '')), 'no secret in the list');
    t.equal((await version(gw, tokens[0])).status, 401, 'the revoked oldest token is dead');
    t.equal((await version(gw, tokens[3])).status, 200, 'the newest works');

    // Another user's token cannot be seen or revoked by id; the owner revokes its own.
    const others = (await mint(gw, other)).token!;
    t.equal((await call(gw.url, 'DELETE', `${ME}/${tokenId(others)}`, { headers: { cookie: viewer } })).status, 404);
    t.equal((await version(gw, others)).status, 200, "the other user's token still works");
    t.equal((await call(gw.url, 'DELETE', `${ME}/${tokenId(tokens[3])}`, { headers: { cookie: viewer } })).status, 200);
    t.equal((await version(gw, tokens[3])).status, 401, 'revoked by its owner');
    t.equal((await call(gw.url, 'DELETE', `${ME}/not-a-number`, { headers: { cookie: viewer } })).status, 400);

    // Admins list every user's tokens, newest first, with owners, filters and pages; viewers cannot.
    t.equal((await call(gw.url, 'GET', ADMIN_TOKENS, { headers: { cookie: viewer } })).status, 403);
    const all = await call(gw.url, 'GET', `${ADMIN_TOKENS}?size=2`, { headers: admin.headers });
    t.equal(all.status, 200, all.text);
    t.match(all.body, { total: 3, page: 1, size: 2 });
    t.match(all.body.tokens[0], { id: tokenId(others), owner: 'otto', ownerId: Number });
    const vics = await call(gw.url, 'GET', `${ADMIN_TOKENS}?owner=VI&status=active`, { headers: admin.headers });
    t.same(
      vics.body.tokens.map((token: { owner: string }) => token.owner),
      ['vic', 'vic'],
    );
    t.equal((await call(gw.url, 'GET', `${ADMIN_TOKENS}?status=stale`, { headers: admin.headers })).status, 400);
    t.equal(
      (await call(gw.url, 'DELETE', `${ADMIN_TOKENS}/${tokenId(others)}`, { headers: admin.headers })).status,
      200,
    );
    t.equal((await version(gw, others)).status, 401, 'revoked by an admin');
    const keys = await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers: admin.headers });
    const adminKeyId = keys.body.apiKeys.find((key: { name: string }) => key.name === 'admin-key').id;
    t.equal(
      (await call(gw.url, 'DELETE', `${ADMIN_TOKENS}/${adminKeyId}`, { headers: admin.headers })).status,
      404,
      'an API key that is not a kubeconfig token is not revoked here',
    );

    // Minting is rate limited per user: a flood gets 429 with Retry-After and creates nothing.
    let limited;
    for (let i = 0; i < MINTS_PER_USER + 1 && !limited; i++) {
      const { res } = await mint(gw, viewer);
      if (res.status === 429) limited = res;
      else t.equal(res.status, 200, res.text);
    }
    t.ok(limited, 'a 429 before the limit is passed');
    t.match(limited?.headers.get('retry-after'), /^\d+$/);
    const before = (await call(gw.url, 'GET', ADMIN_TOKENS, { headers: admin.headers })).body.total;
    t.equal((await mint(gw, viewer)).res.status, 429);
    t.equal((await call(gw.url, 'GET', ADMIN_TOKENS, { headers: admin.headers })).body.total, before, 'nothing made');
  },
);

t.test('point 2: a kubeconfig token is for the Kubernetes API only', async (t) => {
  const gw = await startGateway(t);
  const admin = await bootstrapAdmin(gw);
  await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b') });
  const adminCookie = await login(gw.url, 'admin', 'correct-horse-battery');
  const { token } = await mint(gw, adminCookie);
  const bearer = { authorization: `Bearer ${token}` };
  t.equal((await version(gw, token!)).status, 200, 'kubectl works');

  const keysBefore = (await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers: admin.headers })).body.apiKeys;
  const minted = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
    headers: bearer,
    body: { name: 'forever', roles: ['admin'] },
  });
  t.equal(minted.status, 403, 'a leaked admin kubeconfig mints no permanent key');
  t.match(minted.body.error, /kubeconfig token is accepted only on the Kubernetes API/);
  t.equal(
    (await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: bearer })).status,
    403,
    'nor a fresh kubeconfig',
  );
  for (const [method, path] of [
    ['GET', '/api/v1/admin/users/'],
    ['GET', '/api/auth/user'],
    ['GET', '/api/v1/admin/oauth-providers/'],
    ['GET', '/api/v1/pods/default'],
    ['GET', ME],
  ] as const)
    t.equal((await call(gw.url, method, path, { headers: bearer })).status, 403, `${method} ${path}`);
  // Spellings that might route elsewhere while looking like the proxy's prefix.
  for (const path of ['/k8s/clusters/../../api/v1/admin/apikeys/', '/k8s/clusters/b/../../../api/v1/admin/users/']) {
    const status = await new Promise<number>((resolve, reject) => {
      const { hostname, port } = new URL(gw.url);
      httpRequest({ hostname, port, path, method: 'GET', headers: bearer }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    t.ok(status >= 400, `${path}: ${status}`);
  }
  const keysAfter = (await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers: admin.headers })).body.apiKeys;
  t.equal(keysAfter.length, keysBefore.length, 'no key was made');
});

t.test('point 3: a flood of unauthenticated requests pushes no authenticated audit record out', async (t) => {
  const gw = await startGateway(t, {
    env: {
      KITELINE_AUDIT_FLUSH_INTERVAL_MS: '200',
      KITELINE_AUDIT_PRUNE_INTERVAL_MS: '200',
      KITELINE_AUDIT_CHUNK_SIZE: '5',
      KITELINE_AUDIT_MAX_RECORDS: '30',
      KITELINE_AUDIT_UNAUTHENTICATED_MAX_RECORDS: '10',
      KITELINE_AUDIT_UNAUTHENTICATED_PER_MINUTE: '20',
    },
  });
  const admin = await bootstrapAdmin(gw);
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const res = await call(gw.url, 'POST', '/api/v1/admin/roles/', { headers: admin.headers, body: { name: '' } });
    t.equal(res.status, 400);
    ids.push(res.headers.get('x-request-id')!);
  }
  // 200 anonymous writes and public logouts from one attacker.
  for (let i = 0; i < 100; i++) {
    await call(gw.url, 'POST', '/api/v1/admin/apikeys/', { body: { name: `x${i}`, roles: ['admin'] } });
    await call(gw.url, 'POST', '/api/auth/logout');
  }
  const logs = async () =>
    (await call(gw.url, 'GET', '/api/v1/admin/audit-logs?size=100', { headers: admin.headers })).body.data as {
      requestId: string;
      operator: { kind: string };
    }[];
  // Whole chunks are pruned: the unauthenticated count (10) plus less than a chunk (5) stay.
  await eventually('the anonymous records to be written and pruned', async () => {
    const data = await logs();
    return data.filter((r) => r.operator.kind === 'anonymous').length < 15 && data.length > 10;
  });
  const kept = (await logs()).map((r) => r.requestId);
  for (const id of ids) t.ok(kept.includes(id), `the admin's record ${id} is kept`);
  const chunks = await gw.services.audit.trail!.prune();
  t.same(chunks, [], 'nothing left to prune');
});

t.test("point 9: moving a provider's issuer or token endpoint needs the client secret again", async (t) => {
  const gw = await startGateway(t);
  const admin = await bootstrapAdmin(gw);
  const PROVIDERS = '/api/v1/admin/oauth-providers';
  const created = await call(gw.url, 'POST', `${PROVIDERS}/`, {
    headers: admin.headers,
    body: { name: 'corp', clientId: 'kl', clientSecret: 'real-secret', issuer: 'https://idp.example.com' },
  });
  t.equal(created.status, 201, created.text);
  const id = created.body.provider.id;
  const put = (body: object) => call(gw.url, 'PUT', `${PROVIDERS}/${id}`, { headers: admin.headers, body });
  const moved = await put({ issuer: 'https://attacker.example.net' });
  t.equal(moved.status, 400, moved.text);
  t.match(moved.body.error, /clientSecret again/);
  t.equal((await put({ issuer: 'https://attacker.example.net', clientSecret: '***' })).status, 400, "the UI's ***");
  t.equal((await put({ tokenUrl: 'https://attacker.example.net/token' })).status, 400, 'the token endpoint too');
  const listed = await call(gw.url, 'GET', `${PROVIDERS}/`, { headers: admin.headers });
  t.equal(listed.body.providers[0].issuer, 'https://idp.example.com', 'unchanged');
  t.equal((await put({ ...listed.body.providers[0], scopes: 'openid email' })).status, 200, 'the same issuer: fine');
  t.equal((await put({ issuer: 'https://idp2.example.com', clientSecret: 'new-secret' })).status, 200, 'with it');
});
