// Issue 18 point 4: Kite's pod and service links, /api/v1/namespaces/<ns>/{pods|services}/<name>:<port>/proxy/<path>,
// through the cluster's own proxy subresource to a real busybox httpd on the target-a node (a CGI
// script echoes the method, query and body, and answers as a hostile page would: HTML with a
// script, Set-Cookie, a CORS grant and a login prompt). The answer arrives, the body goes up, and
// the hostile headers never reach the browser; then the attacks: the viewer may not proxy (a
// connect subresource needs create), a namespace-limited role not outside its namespace, nobody
// kiteline's own namespace on the host, anonymous callers nothing; paths that climb out are a 400.
import { request } from 'node:http';
import t from 'tap';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const gw = await startGateway(t, { logName: 'workload-proxy' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

const ns = uniqueName('wproxy');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));

// busybox httpd over a copy of its web root, plus a CGI script that behaves like a hostile page.
const CGI = [
  '#!/bin/sh',
  'echo "Content-Type: text/html"',
  'echo "Set-Cookie: auth_token=planted; Path=/"',
  'echo "Access-Control-Allow-Origin: https://evil.example"',
  'echo "Access-Control-Allow-Credentials: true"',
  'echo "WWW-Authenticate: Basic realm=pod"',
  'echo',
  'echo "<script>alert(document.cookie)</script> $REQUEST_METHOD $QUERY_STRING"',
  'head -c "${CONTENT_LENGTH:-0}"',
].join('\n');
const WEB = [
  'sh',
  '-c',
  `mkdir -p /tmp/www/cgi-bin && cp /www/* /tmp/www/ && cat > /tmp/www/cgi-bin/echo <<'EOF'\n${CGI}\nEOF\n` +
    'chmod +x /tmp/www/cgi-bin/echo && exec httpd -f -p 8080 -h /tmp/www',
];
await k(
  ['apply', '-f', '-'],
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      busyboxPod('web', { app: 'web' }, WEB, {
        readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 1 },
      }),
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'web' },
        spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] },
      },
    ],
  }),
);
await k(['wait', '--for=condition=Ready', 'pod/web', '--timeout=120s']);

const viewer = await apiKeyWithRoles(gw, admin, uniqueName('viewer'), ['viewer']);
const LIMITED_ROLE = uniqueName('only-elsewhere');
await createRole(gw, admin, {
  name: LIMITED_ROLE,
  clusters: ['*'],
  namespaces: [uniqueName('elsewhere')],
  resources: ['*'],
  verbs: ['*'],
});
const limited = await apiKeyWithRoles(gw, admin, uniqueName('limited'), [LIMITED_ROLE]);

const podProxy = `/api/v1/namespaces/${ns}/pods/web:8080/proxy`;
const serviceProxy = `/api/v1/namespaces/${ns}/services/web:80/proxy`;
const BUSYBOX_PAGE = 'kiteline busybox\n';

/** A GET whose path goes out byte for byte (fetch's URL parser would resolve %2e%2e itself). */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(gw.url);
    const req = request({ host: url.hostname, port: url.port, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

t.test("the pod's and the service's web root, through the cluster's proxy", async (t) => {
  const pod = await call(gw.url, 'GET', `${podProxy}/`, { headers: admin.headers });
  t.equal(pod.status, 200, pod.text);
  t.equal(pod.text, BUSYBOX_PAGE, "the pod's answer");
  const service = await eventually(
    'the service to reach its endpoint',
    async () => {
      const res = await call(gw.url, 'GET', `${serviceProxy}/`, { headers: admin.headers });
      return res.text === BUSYBOX_PAGE ? res : undefined;
    },
    60_000,
    200,
  );
  t.equal(service.status, 200, "the service's answer");
  const viaCookie = await call(gw.url, 'GET', `${podProxy}/index.html?x-cluster-name=a`, { headers: admin.headers });
  t.equal(viaCookie.text, BUSYBOX_PAGE, 'a path below /proxy/ and the cluster in the query (as the UI links it)');
  const head = await fetch(`${gw.url}${podProxy}/`, { method: 'HEAD', headers: admin.headers });
  t.equal(head.status, 200, 'HEAD');
});

t.test("a hostile page's headers never reach the browser; method, query and body go through", async (t) => {
  const res = await fetch(`${gw.url}${podProxy}/cgi-bin/echo?a=1&b=two`, {
    method: 'POST',
    headers: { ...admin.headers, 'content-type': 'text/plain' },
    body: 'the request body',
  });
  const text = await res.text();
  t.equal(res.status, 200, text);
  t.match(text, /<script>alert\(document.cookie\)<\/script> POST a=1&b=two\n/, 'method and query reached the pod');
  t.match(text, /the request body$/, 'the body went up and came back');
  t.equal(res.headers.get('content-type'), 'text/html', "the pod's type is kept...");
  t.equal(res.headers.get('content-security-policy'), 'sandbox', '...but its scripts never run as kiteline');
  t.equal(res.headers.get('x-content-type-options'), 'nosniff');
  t.equal(res.headers.get('set-cookie'), null, 'no cookie on kiteline’s origin');
  t.equal(res.headers.get('access-control-allow-origin'), null, 'no CORS grant');
  t.equal(res.headers.get('access-control-allow-credentials'), null);
  t.equal(res.headers.get('www-authenticate'), null, 'no login prompt in kiteline’s name');

  // busybox httpd hands a body to CGI for POST only.
  const large = await fetch(`${gw.url}${serviceProxy}/cgi-bin/echo`, {
    method: 'POST',
    headers: { ...admin.headers, 'content-type': 'application/octet-stream' },
    body: Buffer.alloc(300_000, 0x61),
  });
  const echoed = await large.text();
  t.equal(large.status, 200);
  t.ok(
    echoed.endsWith('a'.repeat(300_000)),
    `a larger body through the service proxy, unparsed ` +
      `(${echoed.length} bytes back, ${large.headers.get('content-length')})`,
  );
});

t.test('the viewer may not proxy; a namespace-limited role not outside its namespace', async (t) => {
  const viewerGet = await call(gw.url, 'GET', `${podProxy}/`, { headers: viewer.headers });
  t.equal(viewerGet.status, 403, 'viewer: pod proxy');
  t.match(viewerGet.body.error, /may not create pods\/proxy/);
  t.equal(
    (await call(gw.url, 'GET', `${serviceProxy}/`, { headers: viewer.headers })).status,
    403,
    'viewer: service proxy',
  );
  t.equal(
    (await call(gw.url, 'POST', `${podProxy}/cgi-bin/echo`, { headers: viewer.headers, raw: 'x' })).status,
    403,
    'viewer: POST',
  );
  t.equal((await call(gw.url, 'GET', `${podProxy}/`, { headers: limited.headers })).status, 403, 'limited role');
  t.equal(
    (await call(gw.url, 'GET', `${serviceProxy}/`, { headers: limited.headers })).status,
    403,
    'limited role: service',
  );
  t.equal((await call(gw.url, 'GET', `${podProxy}/`)).status, 401, 'anonymous');
  t.equal((await call(gw.url, 'POST', `${serviceProxy}/cgi-bin/echo`, { raw: 'x' })).status, 401, 'anonymous POST');
});

t.test("kiteline's own namespace on the host cluster: 403", async (t) => {
  const onHost = { ...admin.headers, 'x-cluster-name': 'self' };
  for (const path of [
    `/api/v1/namespaces/${gw.namespace}/pods/anything:8080/proxy/`,
    `/api/v1/namespaces/${gw.namespace}/services/anything/proxy/`,
  ]) {
    const res = await call(gw.url, 'GET', path, { headers: onHost });
    t.equal(res.status, 403, path);
    t.match(res.body.error, /not reachable through kiteline/);
  }
});

t.test('paths that climb out of the proxy, and bad names: 400', async (t) => {
  for (const path of [
    `${podProxy}/%2e%2e/%2e%2e/%2e%2e/secrets`,
    `${podProxy}/a/%2E%2E/b`,
    `${podProxy}/a%2fb`,
    `${podProxy}/a%5cb`,
    `${podProxy}/%00`,
    `/api/v1/namespaces/${ns}/pods/Bad_Name:8080/proxy/`,
    `/api/v1/namespaces/${ns}/pods/web:80:80:80/proxy/`,
    `/api/v1/namespaces/Bad_NS/services/web/proxy/`,
  ]) {
    const res = await rawGet(path, admin.headers);
    t.equal(res.status, 400, path);
    t.type(res.body?.error, 'string');
  }
  const missing = await call(gw.url, 'GET', `/api/v1/namespaces/${ns}/pods/no-such-pod:8080/proxy/`, {
    headers: admin.headers,
  });
  t.equal(missing.status, 404, "a missing pod: the cluster's 404");
});
