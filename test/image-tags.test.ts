// GET /api/v1/image/tags against real registries (Debian's docker-registry on loopback, images put
// there by real pushes): anonymous over http, htpasswd (Basic) over https with a CA from the config,
// token auth (a Bearer challenge, a token from the realm: anonymous for public/, with the Secret's
// credentials for private/). Who may ask: admin, viewer, a namespace-limited role; a principal
// without a role 403, anonymous 401, and each principal is rate-limited. What kiteline refuses to
// connect to (403, and the listening canary sees no connection): loopback, link-local and private
// addresses, a Service IP of the host cluster, names resolving there, token servers there; what it
// bounds: a registry that never answers (504), an answer too large (502), too many tags (the
// highest MAX_TAGS), redirects (502, not followed). Bad references 400.
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { lookup as dnsLookup } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { createServer as createTcpServer } from 'node:net';
import t from 'tap';
import { LOOKUPS_PER_MINUTE } from '../src/gateway/routes/image-tags.js';
import { MAX_TAGS } from '../src/registries/image-tags.js';
import { kubectl } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { apiKeyWithRoles, bootstrapAdmin, createRole, type Caller } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { addTags, pushImage, startRegistry, startTokenIssuer, testCa } from './helpers/registry.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

const PUSHER = { username: 'pusher', password: 'push-password-1' };
const READER = { username: 'reader', password: 'read-password-1' };
const ALICE = { username: 'alice', password: 'alice-password-1' };

/** A TCP listener that counts the connections it gets and never answers (so: also "a slow registry"). */
async function silentListener(t: Teardown) {
  const counter = { port: 0, connections: 0 };
  const server = createTcpServer((socket) => {
    counter.connections++;
    socket.on('error', () => undefined);
    t.teardown(() => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  counter.port = (server.address() as { port: number }).port;
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return counter;
}

/** An HTTP server on loopback answering every request with `handler`. */
async function httpServer(t: Teardown, handler: Parameters<typeof createHttpServer>[1]): Promise<number> {
  const server: HttpServer = createHttpServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return (server.address() as { port: number }).port;
}

const ca = testCa(t);
const issuer = await startTokenIssuer(t, ca, {
  [PUSHER.username]: PUSHER.password,
  [READER.username]: READER.password,
});
const open = await startRegistry(t);
const secure = await startRegistry(t, { ca, users: { [ALICE.username]: ALICE.password } });
const tokened = await startRegistry(t, { token: { realm: issuer.realm, ca } });

await pushImage(open, 'library/pause', ['1.0', '1.1', '1.10', 'latest', 'sha256-0123abcd.sig']);
await pushImage(open, 'team/many', ['v0']);
await addTags(
  open,
  'team/many',
  'v0',
  Array.from({ length: MAX_TAGS + 20 }, (_, i) => `v${i + 1}`),
);
await pushImage(secure, 'team/app', ['2.0', '2.1'], ALICE);
await pushImage(tokened, 'public/pause', ['3.0', '3.1'], PUSHER);
await pushImage(tokened, 'private/pause', ['4.0'], PUSHER);

// Hostile endpoints, all on loopback: what kiteline must never reach, and registries that misbehave.
const canary = await silentListener(t);
const silent = await silentListener(t);
const bloated = await httpServer(t, (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write('{"tags":[');
  const chunk = `${'"x",'.repeat(16 * 1024)}`;
  let sent = 0;
  const more = () => {
    while (sent < 8 * 1024 * 1024 && res.write(chunk)) sent += chunk.length;
    if (sent < 8 * 1024 * 1024) res.once('drain', more);
    else res.end('"y"]}');
  };
  res.on('error', () => undefined);
  more();
});
const redirecting = await httpServer(t, (_req, res) => {
  res.writeHead(302, { location: `http://127.0.0.1:${canary.port}/v2/x/tags/list` }).end();
});
const metadataRealm = await httpServer(t, (_req, res) => {
  res.writeHead(401, { 'www-authenticate': 'Bearer realm="http://169.254.169.254/token",service="x"' }).end();
});
const canaryRealm = await httpServer(t, (_req, res) => {
  res.writeHead(401, { 'www-authenticate': `Bearer realm="http://127.0.0.1:${canary.port}/token",service="x"` }).end();
});

const listed = [
  `http://${open.host}`,
  secure.host,
  `http://${tokened.host}`,
  `http://127.0.0.1:${issuer.port}`,
  `http://127.0.0.1:${silent.port}`,
  `http://127.0.0.1:${bloated}`,
  `http://127.0.0.1:${redirecting}`,
  `http://127.0.0.1:${metadataRealm}`,
  `http://127.0.0.1:${canaryRealm}`,
  'metadata.example.test',
];
const TIMEOUT_MS = 2000;
const gw = await startGateway(t, {
  logName: 'image-tags',
  env: {
    KITELINE_IMAGE_REGISTRIES_INTERNAL: listed.join(','),
    KITELINE_IMAGE_REGISTRY_CA_FILE: ca.cert,
    KITELINE_IMAGE_REGISTRY_TIMEOUT_MS: String(TIMEOUT_MS),
  },
});
// Names that resolve where the test says (no name resolves to a private address honestly here):
// the reader reads its settings at each look-up.
const fakeLookup: LookupFunction = (hostname, options, callback) => {
  const fixed: Record<string, string> = {
    'registry.example.test': '10.20.30.40',
    'metadata.example.test': '169.254.169.254',
  };
  const address = fixed[hostname];
  if (address === undefined) return dnsLookup(hostname, options, callback);
  if (options.all) return callback(null, [{ address, family: 4 }]);
  callback(null, address, 4);
};
gw.config.imageRegistries.lookup = fakeLookup;
const admin = await bootstrapAdmin(gw);

type Tag = { name: string; timestamp?: string };
const tagsOf = (caller: Caller | undefined, image: string) =>
  call(gw.url, 'GET', `/api/v1/image/tags?image=${encodeURIComponent(image)}`, {
    headers: caller?.headers ?? {},
  });
const names = (tags: Tag[]) => tags.map((tag) => tag.name);

t.test('anonymous registry: the tags of a real push, highest versions first, without sha256-…', async (t) => {
  const res = await tagsOf(admin, `${open.host}/library/pause`);
  t.equal(res.status, 200, res.text);
  t.same(names(res.body), ['latest', '1.10', '1.1', '1.0'], 'numeric order, the signature tag left out');
  t.same(res.body[0], { name: 'latest' }, 'Kite’s shape; no timestamp from the distribution API');
  for (const spelled of [`${open.host}/library/pause:1.0`, `${open.host}/library/pause@sha256`]) {
    const again = await tagsOf(admin, spelled);
    t.same(names(again.body), ['latest', '1.10', '1.1', '1.0'], `${spelled}: tag and digest ignored`);
  }
  const missing = await tagsOf(admin, `${open.host}/library/nothing-here`);
  t.equal(missing.status, 404, missing.text);
  t.match(missing.body, { reason: 'NotFound', error: /no repository library\/nothing-here/ });
});

t.test('who may ask: any principal holding a role; none without one; not anonymous', async (t) => {
  const image = `${open.host}/library/pause`;
  await createRole(gw, admin, {
    name: 'tags-team-a',
    clusters: ['*'],
    namespaces: ['team-a'],
    resources: ['pods'],
    verbs: ['get'],
  });
  const viewer = await apiKeyWithRoles(gw, admin, 'tags-viewer', ['viewer']);
  const teamA = await apiKeyWithRoles(gw, admin, 'tags-team-a', ['tags-team-a']);
  const roleless = await apiKeyWithRoles(gw, admin, 'tags-roleless', []);
  for (const [who, caller] of [
    ['viewer', viewer],
    ['namespace-limited role', teamA],
  ] as const) {
    const res = await tagsOf(caller, image);
    t.equal(res.status, 200, `${who}: ${res.text}`);
    t.same(names(res.body), ['latest', '1.10', '1.1', '1.0'], `${who} reads the tags`);
  }
  const none = await tagsOf(roleless, image);
  t.equal(none.status, 403, none.text);
  t.match(none.body, { reason: 'Forbidden', error: /no role/ });
  const anonymous = await tagsOf(undefined, image);
  t.equal(anonymous.status, 401, anonymous.text);
});

t.test('token auth: the Bearer challenge answered with an anonymous token', async (t) => {
  const seen = issuer.requests.length;
  const res = await tagsOf(admin, `${tokened.host}/public/pause`);
  t.equal(res.status, 200, res.text);
  t.same(names(res.body), ['3.1', '3.0']);
  const asked = issuer.requests.slice(seen);
  t.same(
    asked.map((r) => r.scopes),
    [['repository:public/pause:pull']],
    'one token, for pull of that repository',
  );
  t.equal(asked[0]?.user, undefined, 'anonymously: kiteline holds no credentials for it yet');
  const denied = await tagsOf(admin, `${tokened.host}/private/pause`);
  t.equal(denied.status, 404, `an anonymous token gives no access to private/: ${denied.text}`);
});

t.test('credentials from the Secret: Basic over https, and for a token from the realm', async (t) => {
  const image = `${secure.host}/team/app`;
  const before = await tagsOf(admin, image);
  t.equal(before.status, 404, before.text);
  t.match(before.body, { error: /answered 401.*credentials/ }, 'says why');

  const privateImage = `${tokened.host}/private/pause`;
  const basic = (c: { username: string; password: string }) =>
    Buffer.from(`${c.username}:${c.password}`).toString('base64');
  const dockerConfig = {
    auths: {
      [`https://${secure.host}`]: { auth: basic(ALICE) },
      [tokened.host]: { username: READER.username, password: READER.password },
    },
  };
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/dockerconfigjson',
    metadata: { name: 'kiteline-registry-credentials', namespace: gw.namespace },
    data: { '.dockerconfigjson': Buffer.from(JSON.stringify(dockerConfig)).toString('base64') },
  };
  const applied = kubectl(gw.kubeconfig, ['apply', '-f', '-'], JSON.stringify(secret));
  t.equal(applied.status, 0, applied.stderr);
  const after = await eventually(
    'the credentials to be used',
    async () => {
      const res = await tagsOf(admin, image);
      return res.status === 200 ? res : undefined;
    },
    30_000,
    200,
  );
  t.same(names(after.body), ['2.1', '2.0'], 'read with alice’s credentials, over https with the configured CA');

  const withToken = await tagsOf(admin, privateImage);
  t.equal(withToken.status, 200, withToken.text);
  t.same(names(withToken.body), ['4.0'], 'a token for the reader, from the realm, with the Secret’s credentials');
  t.match(issuer.requests.at(-1), { user: 'reader', scopes: ['repository:private/pause:pull'] });
});

t.test('bounded: tags, answer size, time; redirects not followed', async (t) => {
  const many = await tagsOf(admin, `${open.host}/team/many`);
  t.equal(many.status, 200, many.text.slice(0, 300));
  t.equal(many.body.length, MAX_TAGS, `at most ${MAX_TAGS} of the ${MAX_TAGS + 21} tags`);
  t.equal(many.body[0]?.name, `v${MAX_TAGS + 20}`, 'the highest first');

  const bloat = await tagsOf(admin, `127.0.0.1:${bloated}/x`);
  t.equal(bloat.status, 502, bloat.text);
  t.match(bloat.body, { reason: 'BadGateway', error: /more than \d+ bytes/ });

  const started = Date.now();
  const slow = await tagsOf(admin, `127.0.0.1:${silent.port}/x`);
  const took = Date.now() - started;
  t.equal(slow.status, 504, slow.text);
  t.match(slow.body, { reason: 'Timeout', error: /did not answer within 2000 ms/ });
  t.ok(took >= TIMEOUT_MS - 100 && took < TIMEOUT_MS + 3000, `gave up after the deadline (${took} ms)`);
  t.equal(silent.connections, 1, 'it did connect there (the registry is listed)');

  const redirect = await tagsOf(admin, `127.0.0.1:${redirecting}/x`);
  t.equal(redirect.status, 502, redirect.text);
  t.match(redirect.body, { error: /redirect \(302\), not followed/ });
  t.equal(canary.connections, 0, 'the redirect’s target got no connection');
});

t.test('refused: addresses outside the public internet, and names and token servers there', async (t) => {
  const { stdout: serviceIp } = kubectl(gw.kubeconfig, [
    '-n',
    'default',
    'get',
    'service',
    'kubernetes',
    '-o',
    'jsonpath={.spec.clusterIP}',
  ]);
  t.match(serviceIp, /^\d+\.\d+\.\d+\.\d+$/, `the host cluster's kubernetes Service: ${serviceIp}`);
  const refused: Array<[string, RegExp]> = [
    [`127.0.0.1:${canary.port}/x`, /127\.0\.0\.1:\d+ is a loopback, private/],
    [`localhost:${canary.port}/x`, /localhost resolves to (127\.0\.0\.1|::1)/],
    [`[::1]:${canary.port}/x`, /is a loopback, private/],
    [`127.1.2.3:${open.port}/library/pause`, /is a loopback/],
    ['169.254.169.254/latest', /is a loopback, private, link-local/],
    ['[fd00:ec2::254]/x', /is a loopback, private, link-local/],
    ['10.0.0.1:5000/x', /is a loopback, private/],
    ['192.168.1.1/x', /is a loopback, private/],
    [`${serviceIp}/x`, /is a loopback, private/],
    [`${serviceIp}:443/x`, /is a loopback, private/],
    ['registry.example.test/x', /registry\.example\.test resolves to 10\.20\.30\.40/],
    ['metadata.example.test/x', /resolves to 169\.254\.169\.254, a link-local or cloud metadata address/],
    [`127.0.0.1:${metadataRealm}/x`, /token server .*169\.254\.169\.254.* kiteline does not connect there/],
    [`127.0.0.1:${canaryRealm}/x`, /token server .*127\.0\.0\.1:\d+.* kiteline does not connect there/],
  ];
  for (const [image, why] of refused) {
    const res = await tagsOf(admin, image);
    t.equal(res.status, 403, `${image}: ${res.text}`);
    t.match(res.body, { reason: 'Forbidden', error: why }, `${image}: says why`);
  }
  t.equal(canary.connections, 0, 'no connection was made to the canary');
});

t.test('bad references: 400 and no look-up', async (t) => {
  const missing = await call(gw.url, 'GET', '/api/v1/image/tags', { headers: admin.headers });
  t.equal(missing.status, 400, missing.text);
  const bad = [
    '',
    ' nginx',
    'nginx:bad tag',
    'Library/Nginx/x',
    'team/App',
    'foo//bar',
    'host:99999/x',
    'host:0/x',
    'nginx:-x',
    '-x/y',
    '[::1/x',
    `${'a'.repeat(30)}!`,
    `${'ab-'.repeat(80)}a!`,
    `registry.example.com/${'a/'.repeat(200)}x`,
    'x'.repeat(600),
  ];
  for (const image of bad) {
    const started = Date.now();
    const res = await tagsOf(admin, image);
    t.equal(res.status, 400, `${JSON.stringify(image.slice(0, 40))}: ${res.text}`);
    t.ok(Date.now() - started < 1000, 'answered at once');
  }
});

t.test('rate limit: each principal gets its own look-ups per minute', async (t) => {
  const busy = await apiKeyWithRoles(gw, admin, 'tags-busy', ['viewer']);
  for (let i = 0; i < LOOKUPS_PER_MINUTE; i++) {
    const res = await tagsOf(busy, `${open.host}/library/pause`);
    if (res.status !== 200) t.fail(`look-up ${i + 1}: ${res.status} ${res.text}`);
  }
  const over = await tagsOf(busy, `${open.host}/library/pause`);
  t.equal(over.status, 429, over.text);
  t.match(over.body, { reason: 'TooManyRequests' });
  t.ok(Number(over.headers.get('retry-after')) > 0, 'with Retry-After');
  const other = await tagsOf(admin, `${open.host}/library/pause`);
  t.equal(other.status, 200, 'another principal is not held back');
});
