// Issue 13, point 4: a proxied answer can never run script on kiteline's origin. A hostile (or
// broken) registered cluster is played by a TLS proxy in front of a real API server, with the same
// serving certificate, that answers chosen paths with HTML and SVG: kiteline answers 502 in JSON,
// and every answer it passes through carries a Kubernetes media type and nosniff.
import { readFileSync } from 'node:fs';
import { request as httpsRequest, createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

const target = await testControlPlane('target-b');
const upstream = new URL(target.server);

/** Paths containing one of these answer 200 with that content type and a script. */
const HOSTILE: Record<string, string> = { 'evil-html': 'text/html', 'evil-svg': 'image/svg+xml', 'evil-none': '' };

function hostileProxy(): Promise<Server> {
  const server = createServer(
    {
      cert: readFileSync(join(target.dir, 'pki', 'apiserver-serving.crt')),
      key: readFileSync(join(target.dir, 'pki', 'apiserver-serving.key')),
    },
    (req, res) => {
      const hostile = Object.keys(HOSTILE).find((marker) => req.url?.includes(marker));
      if (hostile) {
        res.writeHead(200, {
          'set-cookie': 'kiteline_session=planted; Path=/',
          ...(HOSTILE[hostile] ? { 'content-type': HOSTILE[hostile] } : {}),
        });
        res.end('<script>fetch("/api/v1/admin/apikeys/",{method:"POST"})</script>');
        return;
      }
      const forwarded = httpsRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
          ca: target.caPem,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forwarded.on('error', () => res.destroy());
      // A watch kiteline ends (its read cache stopping) ends upstream too: nothing keeps the test alive.
      res.on('close', () => forwarded.destroy());
      req.pipe(forwarded);
    },
  );
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const proxy = await hostileProxy();
t.teardown(() => proxy.close());
const gw = await startGateway(t, { logName: 'security-hostile' });
const admin = await bootstrapAdmin(gw);
const HOSTILE_CLUSTER = uniqueName('hostile');
const config = testKubeconfig('target-b').replace(
  /server: https:\/\/127\.0\.0\.1:\d+/,
  `server: https://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
);
await addReadyCluster(gw, admin, { name: HOSTILE_CLUSTER, config, isDefault: true });
const as = (path: string) =>
  call(gw.url, 'GET', path, { headers: { 'x-cluster-name': HOSTILE_CLUSTER, ...admin.headers } });

t.test('point 4: an answer in another media type is a 502, never passed through', async (t) => {
  for (const [marker, type] of Object.entries(HOSTILE)) {
    for (const path of [
      `/api/v1/configmaps/default/${marker}`,
      `/api/v1/configmaps/${marker}`,
      `/api/v1/configmaps/${marker}?watch=true`,
    ]) {
      const res = await as(path);
      // Once configmaps are hot, the read cache answers from what the cluster lists and watches
      // (docs/read-cache.md): no such object (404), no such namespace (an empty list), never the
      // hostile bytes. Otherwise the hostile answer reaches kiteline, which refuses it.
      if (res.headers.get('x-kiteline-cache') === 'hit') {
        t.ok(res.status === 404 || res.body.items?.length === 0, `${path}: the cache's own answer`);
      } else {
        t.equal(res.status, 502, `${type || 'no content type'}: ${path}`);
      }
      t.match(res.headers.get('content-type'), /^application\/json/, `${path}: kiteline's own JSON error`);
      t.notMatch(res.text, /<script>/, `${path}: nothing of the body`);
    }
  }
});

t.test('point 4: answers passed through carry a Kubernetes media type and nosniff', async (t) => {
  for (const path of [
    '/api/v1/configmaps/default',
    '/api/v1/namespaces/_all/default',
    '/api/v1/configmaps/default?watch=true&timeoutSeconds=1',
  ]) {
    const res = await as(path);
    t.equal(res.status, 200, path);
    t.match(res.headers.get('content-type'), /^application\/json/, path);
    t.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
  }
});

t.test(
  'through /k8s/clusters a hostile answer passes as the cluster sent it, but can never run as kiteline',
  async (t) => {
    // kubectl's proxy forwards the cluster's bytes unchanged (it parses no bodies), so what keeps a
    // browser from running them on kiteline's origin is the answer's headers.
    for (const marker of Object.keys(HOSTILE)) {
      const res = await call(
        gw.url,
        'GET',
        `/k8s/clusters/${HOSTILE_CLUSTER}/api/v1/namespaces/default/configmaps/${marker}`,
        {
          headers: { authorization: `Bearer ${admin.key}` },
        },
      );
      // From the read cache once hot: the cache holds no such object (the cluster's lists have none).
      t.equal(res.status, res.headers.get('x-kiteline-cache') === 'hit' ? 404 : 200, marker);
      t.equal(res.headers.get('x-content-type-options'), 'nosniff', `${marker}: no sniffing`);
      t.equal(
        res.headers.get('content-security-policy'),
        'sandbox',
        `${marker}: no script runs, no same-origin access`,
      );
      t.equal(res.headers.get('set-cookie'), null, `${marker}: no cookie set on kiteline's origin`);
    }
  },
);
