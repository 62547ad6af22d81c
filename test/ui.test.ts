// The UI at kiteline's own address (issue 42, docs/ui.md): a stand-in Kite build made here (an
// index.html with Kite's placeholder, content-hashed assets with pre-compressed twins, files that
// try to shadow kiteline's own paths, a dotfile, a symlink out of the directory) served by a
// gateway at the root and by one under the sub-path /kite, where the whole API (sign-in, cluster
// routes, SSE, WebSockets, kubectl through /k8s/clusters) is used through the prefix; then a
// real browser loads the stand-in under /kite and the page calls the API under the policy it got.
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';
import http from 'node:http';
import t from 'tap';
import { launchBrowser, policyViolations } from './helpers/browser.js';
import { kubectl, kubectlInBackground, TEST_DIR, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway, type TestGateway } from './helpers/gateway.js';
import { login } from './helpers/auth-session.js';
import { startOidcProvider } from './helpers/oidc-provider.js';
import { APP_JS, SCRIPT, STYLE, standInUi } from './helpers/stand-in-ui.js';
import { busyboxPod, openSse, openWs } from './helpers/workload-streams.js';

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** A GET with the raw path as written (fetch would normalise `..` and `%2e`). */
function rawGet(base: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}${path}`, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

const uiDir = standInUi();
t.teardown(() => rmSync(uiDir, { recursive: true, force: true }));

t.test('at the root: the page, its assets, and none of kiteline paths taken', async (t) => {
  const gw = await startGateway(t, { env: { KITELINE_UI_DIR: uiDir } });
  for (const path of ['/', '/index.html', '/pods/default/web-1.2.3', '/settings?tab=users']) {
    const page = await call(gw.url, 'GET', path);
    t.equal(page.status, 200, `${path}: the page`);
    t.match(page.headers.get('content-type'), /^text\/html; charset=utf-8/);
    t.equal(page.headers.get('cache-control'), 'no-cache', `${path}: never cached`);
    t.match(page.text, `src="${SCRIPT}"`, `${path}: the placeholder filled with the root`);
    t.notMatch(page.text, '__KITE_BASE__');
    t.match(page.text, /<head>\n {4}<script>window\.__dynamic_base__="";<\/script>/, 'the base, first in <head>');
  }
  const csp = (await call(gw.url, 'GET', '/')).headers.get('content-security-policy') ?? '';
  t.match(csp, `script-src 'self' ${sha256('window.__dynamic_base__="";')};`, 'the base script, and only it');
  t.match(csp, "frame-ancestors 'self'");
  t.match(csp, "object-src 'none'");

  const js = await call(gw.url, 'GET', SCRIPT, { headers: { 'accept-encoding': 'identity' } });
  t.equal(js.status, 200);
  t.equal(js.text, APP_JS, 'the asset as built');
  t.match(js.headers.get('content-type'), /javascript/);
  t.equal(js.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'hashed assets: cached for good');
  const br = await fetch(gw.url + SCRIPT, { headers: { 'accept-encoding': 'br' } });
  t.equal(br.headers.get('content-encoding'), 'br', 'the pre-compressed brotli twin');
  t.equal(br.headers.get('vary'), 'accept-encoding');
  const gz = await fetch(gw.url + SCRIPT, { headers: { 'accept-encoding': 'gzip' } });
  t.equal(gz.headers.get('content-encoding'), 'gzip', 'the gzip twin');
  t.equal(await gz.text(), APP_JS, 'which decodes to the asset');
  const rawBr = await new Promise<Buffer>((resolve, reject) =>
    http
      .get(`${gw.url}${SCRIPT}`, { headers: { 'accept-encoding': 'br' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks)));
      })
      .on('error', reject),
  );
  t.equal(brotliDecompressSync(rawBr).toString(), APP_JS, 'the brotli body is the asset');
  const head = await fetch(gw.url + STYLE, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD of an asset');
  t.equal(
    (await call(gw.url, 'GET', '/favicon.svg')).headers.get('cache-control'),
    'no-cache',
    'unhashed: revalidated',
  );

  const missing = await call(gw.url, 'GET', '/assets/index-00000000.js');
  t.equal(missing.status, 404, 'a missing asset is a 404, never the page');
  t.equal(missing.body.reason, 'NotFound');

  t.same((await call(gw.url, 'GET', '/healthz')).body, { status: 'ok' }, '/healthz stays kiteline');
  const clusters = await call(gw.url, 'GET', '/api/v1/clusters');
  t.equal(clusters.status, 401, '/api/v1/clusters stays the API (the file there is not served)');
  for (const path of [
    '/api/v1/nothing/here/at/all/really',
    '/api/nothing',
    '/k8s/nothing',
    '/mcp/x',
    '/metrics/x',
    '/readyz/x',
  ]) {
    const res = await call(gw.url, 'GET', path);
    t.equal(res.status, 404, `${path}: the API's 404`);
    t.notMatch(res.text, /stand-in|shadowed/, `${path}: not the page`);
  }
  const docs = await call(gw.url, 'GET', '/docs/');
  t.notMatch(docs.text, /shadowed-docs|stand-in/, '/docs stays the API reference');
  t.equal((await call(gw.url, 'POST', '/somewhere')).status, 404, 'only GET and HEAD reach the UI');

  for (const path of [
    '/.env',
    '/passwd',
    '/assets/passwd.js',
    '/assets/..%2f..%2f..%2fetc%2fpasswd',
    '/%2e%2e/%2e%2e/etc/passwd',
    '/assets/../../../etc/passwd',
  ]) {
    const res = await rawGet(gw.url, path);
    t.notMatch(res.body, /dotfile-secret|root:x:0:0/, `${path}: nothing outside the build's regular files`);
    t.ok(res.status === 404 || res.body.includes('stand-in Kite'), `${path}: a 404 or the page (${res.status})`);
  }
  const spaced = await rawGet(gw.url, '/notes%20100%25.txt');
  t.same(spaced, { status: 200, body: 'a file name to encode' }, 'a name that needs encoding: the file it names');
  const literal = await rawGet(gw.url, '/x%2541');
  t.same(literal, { status: 200, body: 'the file named x%41' }, 'decoded once: never the link named x%2541');
});

t.test('under /kite: the UI and the whole API through the prefix', async (t) => {
  // With an https listener: kubectl sends its token only over https.
  const gw = await startGateway(t, {
    env: { KITELINE_UI_DIR: uiDir, KITELINE_BASE_PATH: '/kite/', KITELINE_TLS_PORT: '0' },
  });
  t.equal(gw.config.basePath, '/kite', 'the trailing slash dropped');
  const kite: TestGateway = { ...gw, url: `${gw.url}/kite` };
  for (const path of ['/kite/', '/kite', '/kite/nodes/node-1.example']) {
    const page = await call(gw.url, 'GET', path);
    t.equal(page.status, 200, `${path}: the page`);
    t.match(page.text, `src="/kite${SCRIPT}"`, 'asset paths under the prefix');
    t.match(page.text, '<script>window.__dynamic_base__="/kite";</script>');
    t.match(page.headers.get('content-security-policy'), sha256('window.__dynamic_base__="/kite";'));
  }
  t.equal((await call(gw.url, 'GET', `/kite${SCRIPT}`)).text, APP_JS, 'assets under the prefix');
  t.same((await call(gw.url, 'GET', '/kite/healthz')).body, { status: 'ok' });
  t.same(
    (await call(gw.url, 'GET', '/healthz')).body,
    { status: 'ok' },
    'and without it (probes; a front end that strips it)',
  );
  t.equal((await call(gw.url, 'GET', '/kite/api/nothing')).status, 404);

  // Everything an admin does, through the prefix.
  const admin = await bootstrapAdmin(kite);
  await addReadyCluster(kite, admin, { name: 'a', config: testKubeconfig('target-a') });
  const signIn = await fetch(`${kite.url}/api/auth/login/password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: 'correct-horse-battery' }),
  });
  t.equal(signIn.status, 204);
  t.match(signIn.headers.get('set-cookie'), /; Path=\/kite;/, 'the session cookie only for the prefix');
  const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0];
  const out = await fetch(`${kite.url}/api/auth/logout`, {
    method: 'POST',
    headers: { cookie: (await login(kite.url, 'admin', 'correct-horse-battery')).split(';')[0] },
  });
  t.equal(out.status, 200);
  t.same(
    out.headers.getSetCookie().map((c) => /Path=[^;]*/.exec(c)?.[0]),
    ['Path=/kite', 'Path=/'],
    'logout clears the cookie under the prefix, and one from before it',
  );
  const notCluster = await call(kite.url, 'GET', '/api/v1/_clusters/a/admin/users/', { headers: admin.headers });
  t.equal(notCluster.status, 404, 'under the prefix too, only cluster routes take the cluster path');

  const ns = uniqueName('ui');
  const target = join(TEST_DIR, 'target-a', 'kubeconfig');
  t.equal(kubectl(target, ['create', 'namespace', ns]).status, 0);
  t.teardown(() => kubectl(target, ['delete', 'namespace', ns, '--wait=false']));
  t.equal(kubectl(target, ['-n', ns, 'create', 'configmap', 'seen', '--from-literal=k=v']).status, 0);
  t.equal(
    kubectl(
      target,
      ['-n', ns, 'apply', '-f', '-'],
      JSON.stringify(busyboxPod('talker', {}, ['sh', '-c', 'echo hello-under-kite; sleep 3600'])),
    ).status,
    0,
  );

  const sse = await openSse(`${kite.url}/api/v1/_clusters/a/configmaps/${ns}/watch`, admin.headers);
  t.teardown(() => sse.close());
  t.equal(sse.status, 200, 'SSE through the prefix');
  await sse.waitFor('the ConfigMap', (e) => e.event === 'added' && e.data.includes('"seen"'));

  await eventually(
    'the pod to run',
    () => kubectl(target, ['-n', ns, 'get', 'pod', 'talker', '-o', 'jsonpath={.status.phase}']).stdout === 'Running',
    120_000,
    500,
  );
  const logs = await openWs(
    `${kite.url.replace(/^http/, 'ws')}/api/v1/_clusters/a/logs/${ns}/talker/ws?tailLines=5&timestamps=false`,
    admin.headers,
  );
  t.teardown(() => logs.ws.close());
  await logs.waitFor('the log line', (m) => m.data?.includes('hello-under-kite'));
  t.pass('a WebSocket through the prefix');

  const kubeconfig = await call(kite.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  t.equal(kubeconfig.status, 200, kubeconfig.text);
  t.match(
    kubeconfig.text,
    /server: https:\/\/127\.0\.0\.1:\d+\/kite\/k8s\/clusters\/a\n/,
    'kubeconfigs point under the prefix',
  );
  const kc = join(TEST_DIR, `${uniqueName('ui')}.kubeconfig`);
  writeFileSync(kc, kubeconfig.text);
  // In the background: the gateway serving kubectl runs in this process.
  const got = await kubectlInBackground(kc, [
    '--context',
    'a',
    '-n',
    ns,
    'get',
    'configmap',
    'seen',
    '-o',
    'jsonpath={.data.k}',
  ]);
  t.equal(got.stdout, 'v', `kubectl through /kite/k8s/clusters (${got.stderr})`);
  const exec = await kubectlInBackground(kc, [
    '--context',
    'a',
    '-n',
    ns,
    'exec',
    'talker',
    '--',
    'echo',
    'exec-under-kite',
  ]);
  t.equal(exec.stdout.trim(), 'exec-under-kite', `kubectl exec through the prefix (${exec.stderr})`);

  const op = await startOidcProvider(`${kite.url}/api/auth/callback`);
  t.teardown(() => op.close());
  const provider = await call(kite.url, 'POST', '/api/v1/admin/oauth-providers/', {
    ...admin,
    body: { name: 'corp', clientId: op.clientId, clientSecret: op.clientSecret, issuer: op.issuer },
  });
  t.equal(provider.status, 201, provider.text);
  const started = await eventually('the provider to be offered', async () => {
    const res = await call(kite.url, 'GET', '/api/auth/login?provider=corp');
    return res.status === 200 ? res : undefined;
  });
  t.equal(
    new URL(started.body.auth_url).searchParams.get('redirect_uri'),
    `${gw.url}/kite/api/auth/callback`,
    'the provider sends the browser back under the prefix',
  );
  t.match(
    started.headers.get('set-cookie'),
    /; Path=\/kite\/api\/auth\/callback;/,
    'the flow cookie for that path only',
  );
  const failed = await fetch(`${kite.url}/api/auth/callback?code=x&state=y`, { redirect: 'manual' });
  t.match(failed.headers.get('location'), /^\/kite\/login\?error=/, "a failed sign-in lands on the UI's login page");

  await t.test('a browser loads the UI under /kite and calls the API from it', async (t) => {
    const browser = await launchBrowser(t);
    const page = await browser.newPage();
    const violations = await policyViolations(page);
    await page.goto(`${kite.url}/workloads/default/web-1.2`, { waitUntil: 'load' });
    await page.waitForFunction(() => (globalThis as unknown as { report?: unknown }).report !== undefined, {
      timeout: 30_000,
    });
    const report = (await page.evaluate(() => (globalThis as unknown as { report: unknown }).report)) as {
      base: string;
      initCheck: { status: number; body: { initialized: boolean } };
      injected: boolean;
    };
    t.equal(report.base, '/kite', 'the base script ran (the policy names its hash)');
    t.match(report.initCheck, { status: 200, body: { initialized: true } }, 'the page called the API under /kite');
    t.equal(report.injected, false, 'a script the page did not ship does not run');
    await eventually('the refusal of the injected script', async () =>
      (await violations()).includes('script-src-elem'),
    );

    // Signed in from the page, a log stream over a WebSocket of the page's own origin.
    const streamed = await page.evaluate(
      async (base: string, path: string) => {
        const signedIn = await fetch(`${base}/api/auth/login/password`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: 'admin', password: 'correct-horse-battery' }),
        });
        if (signedIn.status !== 204) return `sign-in: ${signedIn.status}`;
        const origin = (globalThis as unknown as { location: { origin: string } }).location.origin;
        const url = `${origin.replace(/^http/, 'ws')}${base}${path}`;
        return new Promise<string>((resolve) => {
          const ws = new WebSocket(url);
          let seen = '';
          ws.onmessage = (event) => {
            seen += String(event.data);
            if (seen.includes('hello-under-kite')) {
              ws.close();
              resolve('streamed');
            }
          };
          ws.onerror = () => resolve(`error after: ${seen}`);
          setTimeout(() => resolve(`timeout after: ${seen}`), 30_000);
        });
      },
      '/kite',
      `/api/v1/_clusters/a/logs/${ns}/talker/ws?tailLines=5&timestamps=false`,
    );
    t.equal(streamed, 'streamed', 'the page streamed a log over a WebSocket under /kite');
    const elsewhere = await page.evaluate(
      async (url: string) => {
        try {
          await fetch(url, { mode: 'no-cors' });
          return 'reached';
        } catch {
          return 'refused';
        }
      },
      `${gw.url.replace('127.0.0.1', 'localhost')}/healthz`,
    );
    t.equal(elsewhere, 'refused', 'the page may connect only to its own origin');
    t.ok((await violations()).includes('connect-src'), 'refused by the policy (connect-src)');
  });
});
