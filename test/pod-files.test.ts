// Issue 18 point 5: Kite's pod file browser on a real busybox pod on the target-a node. A file is
// uploaded (binary, every byte value, with a name that would be a shell injection), listed,
// previewed and downloaded byte-identical; a directory downloads as a tar holding it. Then the
// attacks: the viewer may not (exec is what this is), a namespace-limited role not outside its
// namespace, nobody kiteline's own namespace on the host cluster, anonymous nothing; bad paths
// are a 400 before anything runs; a pod's HTML never runs as kiteline's origin. The upload is
// audited with the file's path.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { TEST_DIR, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const gw = await startGateway(t, { logName: 'pod-files' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'self', config: testKubeconfig('host') });

const ns = uniqueName('files');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
await k(
  ['apply', '-f', '-'],
  JSON.stringify(
    busyboxPod('box', { app: 'box' }, [
      'sh',
      '-c',
      'mkdir -p /data/sub && echo hello > /data/sub/hello.txt && ' +
        'echo "<script>alert(1)</script>" > /data/page.html && exec sleep 3600',
    ]),
  ),
);
await k(['wait', '--for=condition=Ready', 'pod/box', '--timeout=120s']);

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

const files = (rest: string, query: Record<string, string>) =>
  `/api/v1/pods/${ns}/box/files${rest}?${new URLSearchParams(query).toString()}`;

async function upload(
  directory: string,
  name: string,
  content: Buffer,
  headers: Record<string, string> = admin.headers,
) {
  const form = new FormData();
  form.append('file', new Blob([content]), name);
  const res = await fetch(gw.url + files('/upload', { path: directory, container: 'main' }), {
    method: 'PUT',
    headers,
    body: form,
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
}

async function download(rest: string, query: Record<string, string>, headers = admin.headers) {
  const res = await fetch(gw.url + files(rest, query), { headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

// Every byte value, and some more random ones: the download must give back exactly this.
const CONTENT = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(300_000)]);
// A name a shell would run: it must arrive as a name.
const TRICKY = 'a $(touch pwned) `id`;x.bin';

t.test('upload, list, preview and download, byte-identical', async (t) => {
  const up = await upload('/data', TRICKY, CONTENT);
  t.equal(up.status, 200, up.text);
  t.same(up.body, { message: 'file uploaded successfully', path: `/data/${TRICKY}` });

  const list = await call(gw.url, 'GET', files('', { path: '/data', container: 'main' }), { headers: admin.headers });
  t.equal(list.status, 200, list.text);
  t.same(
    list.body.map((f: { name: string }) => f.name),
    ['sub', TRICKY, 'page.html'].sort((a, b) =>
      a === 'sub' ? -1 : b === 'sub' ? 1 : a.toLowerCase().localeCompare(b.toLowerCase()),
    ),
    'directories first, then by name',
  );
  const uploaded = list.body.find((f: { name: string }) => f.name === TRICKY);
  t.match(uploaded, {
    isDir: false,
    size: String(CONTENT.length),
    mode: /^-rw/,
    uid: 'root',
    gid: 'root',
    modTime: /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/,
  });
  t.match(list.body[0], { name: 'sub', isDir: true, mode: /^d/ });
  t.notOk(
    list.body.some((f: { name: string }) => f.name.includes('kiteline-upload')),
    'no temporary file left',
  );
  t.notOk(
    list.body.some((f: { name: string }) => f.name === 'pwned'),
    'nothing of the name ran',
  );
  const root = await call(gw.url, 'GET', files('', { container: 'main' }), { headers: admin.headers });
  t.ok(
    root.body.some((f: { name: string; isDir: boolean }) => f.name === 'data' && f.isDir),
    'no path: the root directory',
  );
  t.notOk(
    root.body.some((f: { name: string }) => f.name === 'pwned'),
    'nothing ran in the working directory either',
  );

  const got = await download('/download', { path: `/data/${TRICKY}` });
  t.equal(got.status, 200);
  t.ok(got.bytes.equals(CONTENT), `download byte-identical (${got.bytes.length} of ${CONTENT.length} bytes)`);
  t.equal(got.headers.get('content-type'), 'application/octet-stream');
  t.match(
    got.headers.get('content-disposition'),
    /^attachment; filename="a___touch_pwned___id__x\.bin"; filename\*=UTF-8''a%20%24\(touch%20pwned\)/,
  );

  const preview = await download('/preview', { path: '/data/sub/hello.txt' });
  t.equal(preview.status, 200);
  t.equal(preview.bytes.toString(), 'hello\n');
  t.equal(preview.headers.get('content-type'), 'text/plain; charset=utf-8');

  const tar = await download('/download', { path: '/data/sub' });
  t.equal(tar.status, 200);
  t.equal(tar.headers.get('content-type'), 'application/x-tar');
  t.match(tar.headers.get('content-disposition'), /filename="sub\.tar"/);
  t.ok(
    tar.bytes.includes(Buffer.from('hello\n')) && tar.bytes.includes(Buffer.from('hello.txt')),
    'a directory comes as a tar holding its file',
  );

  // A second upload of the same name replaces the file.
  t.equal((await upload('/data', 'small.txt', Buffer.from('one'))).status, 200);
  t.equal((await upload('/data', 'small.txt', Buffer.from('two'))).status, 200);
  t.equal((await download('/download', { path: '/data/small.txt' })).bytes.toString(), 'two', 'replaced');
});

t.test("a pod's HTML never runs as kiteline's origin", async (t) => {
  const page = await download('/preview', { path: '/data/page.html' });
  t.equal(page.status, 200);
  t.equal(page.headers.get('content-type'), 'text/plain; charset=utf-8', 'HTML previews as text');
  t.equal(page.headers.get('content-security-policy'), 'sandbox');
  t.equal(page.headers.get('x-content-type-options'), 'nosniff');
  t.match(page.bytes.toString(), /<script>/, 'shown as it is, as text');
});

t.test('the upload is audited with the file it wrote', async (t) => {
  const line = await eventually(
    'the upload audit line',
    () =>
      readFileSync(join(TEST_DIR, 'logs', 'pod-files.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes('"audit"') && l.includes('"pods/files"') && l.includes(ns) && l.includes('small.txt'))
        .map((l) => JSON.parse(l).audit)[0],
  );
  t.match(line, {
    who: 'admin',
    cluster: 'a',
    verb: 'upload',
    resource: 'pods/files',
    namespace: ns,
    name: 'box',
    subject: '/data/small.txt',
    result: 'success',
    status: 200,
  });
});

t.test('bad input is a 400 and writes nothing', async (t) => {
  for (const path of ['data', '../etc', '/data\u0000x']) {
    const res = await call(gw.url, 'GET', files('', { path, container: 'main' }), { headers: admin.headers });
    t.equal(res.status, 400, `path ${JSON.stringify(path)}: ${res.text}`);
  }
  t.equal(
    (await call(gw.url, 'GET', files('/download', { container: 'main' }), { headers: admin.headers })).status,
    400,
    'download needs a path',
  );
  t.equal(
    (await call(gw.url, 'GET', files('', { path: '/no/such/dir', container: 'main' }), { headers: admin.headers }))
      .status,
    400,
    'a missing directory',
  );
  t.equal(
    (await call(gw.url, 'GET', files('', { path: '/', container: 'nope' }), { headers: admin.headers })).status,
    400,
    'a missing container',
  );
  t.equal(
    (await call(gw.url, 'GET', `/api/v1/pods/${ns}/no-such-pod/files?path=/`, { headers: admin.headers })).status,
    404,
    'a missing pod',
  );
  for (const name of ['..', '.']) {
    const res = await upload('/data', name, Buffer.from('x'));
    t.equal(res.status, 400, `file name ${name}: ${res.text}`);
  }
  const nested = await upload('/data', '../../etc/evil.txt', Buffer.from('x'));
  t.same(
    nested.body,
    { message: 'file uploaded successfully', path: '/data/evil.txt' },
    'a name with a path: only its last segment counts, as in a browser',
  );
  const json = await call(gw.url, 'PUT', files('/upload', { path: '/data' }), {
    headers: admin.headers,
    body: { file: 'x' },
  });
  t.equal(json.status, 400, 'not multipart');
  const list = await call(gw.url, 'GET', files('', { path: '/data', container: 'main' }), { headers: admin.headers });
  t.same(
    list.body.map((f: { name: string }) => f.name).sort(),
    ['evil.txt', 'page.html', 'small.txt', 'sub', TRICKY].sort(),
    'nothing else written',
  );
});

t.test("authorized as pods/exec: the viewer, a role elsewhere, kiteline's own namespace, anonymous", async (t) => {
  for (const [who, headers] of [
    ['viewer', viewer.headers],
    ['a role limited to another namespace', limited.headers],
  ] as const) {
    t.equal((await call(gw.url, 'GET', files('', { path: '/' }), { headers })).status, 403, `${who}: list`);
    t.equal((await download('/download', { path: '/data/sub/hello.txt' }, headers)).status, 403, `${who}: download`);
    t.equal((await upload('/data', 'from-viewer.txt', Buffer.from('x'), headers)).status, 403, `${who}: upload`);
  }
  t.equal((await call(gw.url, 'GET', files('', { path: '/' }))).status, 401, 'anonymous');
  const own = await call(gw.url, 'GET', `/api/v1/pods/${gw.namespace}/anything/files?path=/`, {
    headers: { ...admin.headers, 'x-cluster-name': 'self' },
  });
  t.equal(own.status, 403, "kiteline's own namespace on the host cluster, even for an admin");
  const list = await call(gw.url, 'GET', files('', { path: '/data', container: 'main' }), { headers: admin.headers });
  t.notOk(
    list.body.some((f: { name: string }) => f.name === 'from-viewer.txt'),
    'no refused upload was written',
  );
});
