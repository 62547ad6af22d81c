// Pure logic of cached reads: which selectors the cache reads itself (and matches as the API server
// does), and which resourceVersion rules it honours (the rest goes to the cluster).
import { Readable } from 'node:stream';
import t from 'tap';
import type { ClusterConnection } from '../../src/clusters/types.js';
import { wantedVersion } from '../../src/resources/cache/read-cache.js';
import { ResourceCache, type CachedObject } from '../../src/resources/cache/resource-cache.js';
import type { Logger } from '../../src/log.js';
import { parseFieldSelector, parseLabelSelector } from '../../src/resources/cache/selectors.js';
import { VersionCheck } from '../../src/resources/cache/version-check.js';

t.test('label selectors: the API server syntax, matched the same way', async (t) => {
  const labels = { app: 'web', tier: 'front', 'example.com/team': 'a' };
  const matches = (selector: string) => parseLabelSelector(selector)?.(labels);
  t.equal(matches(''), true, 'empty: everything');
  t.equal(matches('app=web'), true);
  t.equal(matches('app==web'), true);
  t.equal(matches('app=db'), false);
  t.equal(matches('app!=db'), true);
  t.equal(matches('missing!=x'), true, '!= matches objects without the label');
  t.equal(matches('app in (web, db)'), true);
  t.equal(matches('app notin (web)'), false);
  t.equal(matches('missing notin (x)'), true);
  t.equal(matches('tier'), true, 'exists');
  t.equal(matches('!tier'), false, 'does not exist');
  t.equal(matches('example.com/team=a,app=web'), true, 'several requirements and a prefixed key');
  t.equal(matches('app in (web,db),tier=back'), false);
  t.equal(matches('constructor'), false, 'keys are the labels own, never inherited ones');
  t.equal(matches('!toString'), true);
  for (const unread of ['app in (web', 'a b', 'app>1', '=x', 'app=a b', 'app = =', 'Example.com/x', 'a'.repeat(64)]) {
    t.equal(parseLabelSelector(unread), undefined, `"${unread}" goes to the cluster`);
  }
});

t.test('field selectors: metadata.name and metadata.namespace only', async (t) => {
  const object: CachedObject = { namespace: 'ns', name: 'one', labels: {}, json: Buffer.from('{}') };
  const matches = (selector: string) => parseFieldSelector(selector, true)?.(object);
  t.equal(matches('metadata.name=one'), true);
  t.equal(matches('metadata.name==two'), false);
  t.equal(matches('metadata.namespace!=kube-system,metadata.name=one'), true);
  t.equal(matches('metadata.namespace!=ns'), false);
  for (const unread of ['status.phase=Running', 'spec.nodeName=x', 'metadata.name=a\\,b', 'metadata.name = one']) {
    t.equal(parseFieldSelector(unread, true), undefined, `"${unread}" goes to the cluster`);
  }
  t.equal(
    parseFieldSelector('metadata.namespace=ns', false),
    undefined,
    'a namespace of a cluster-scoped kind: its 400',
  );
});

t.test('resourceVersion rules: consistent, not older than, and what only the cluster answers', async (t) => {
  t.equal(wantedVersion({}, true), 'now', 'no resourceVersion: a consistent read');
  t.equal(wantedVersion({ resourceVersion: '0' }, true), 0n, '0: any version');
  t.equal(wantedVersion({ resourceVersion: '42' }, false), 42n, 'a GET at 42: not older than 42');
  t.equal(wantedVersion({ resourceVersion: '42', resourceVersionMatch: 'NotOlderThan', limit: 5 }, true), 42n);
  t.equal(wantedVersion({ resourceVersion: '42', limit: 5 }, true), undefined, 'a paged list at 42 is exact');
  t.equal(wantedVersion({ resourceVersion: '42', resourceVersionMatch: 'Exact' }, true), undefined);
  t.equal(wantedVersion({ resourceVersionMatch: 'NotOlderThan' }, true), undefined, 'a match without a version');
  t.equal(wantedVersion({ resourceVersion: 'abc' }, true), undefined, 'a version that is not a number');
  t.equal(wantedVersion({ resourceVersion: '1', resourceVersionMatch: 'Newest' }, true), undefined, 'an unknown match');
});

t.test('version checks: a read never joins a check already sent; an interval spaces them', async (t) => {
  const sent: Array<(rv: string) => void> = [];
  const conn = {
    request: () =>
      new Promise((resolve) => {
        sent.push((rv) => {
          const body = Readable.from([Buffer.from(JSON.stringify({ metadata: { resourceVersion: rv } }))]);
          resolve(Object.assign(body, { statusCode: 200, headers: {} }));
        });
      }),
  } as unknown as ClusterConnection;
  const resolved = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: [] };
  const check = new VersionCheck(conn, resolved, 0);
  const first = check.current();
  t.equal(sent.length, 1, 'the first read sends a check at once');
  const second = check.current();
  const third = check.current();
  t.equal(sent.length, 1, 'reads arriving while it is in flight wait for the next one');
  sent[0]('10');
  t.equal(await first, 10n);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(sent.length, 2, 'the next check is sent once the one in flight is answered');
  sent[1]('12');
  t.same([await second, await third], [12n, 12n], 'both get the version of a check sent after they arrived');

  const spaced = new VersionCheck(conn, resolved, 200);
  const a = spaced.current();
  sent[2]('20');
  t.equal(await a, 20n);
  const b = spaced.current();
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(sent.length, 3, 'within the interval no check is sent');
  await new Promise((resolve) => setTimeout(resolve, 250));
  t.equal(sent.length, 4, 'after it, one is');
  sent[3]('21');
  t.equal(await b, 21n);
});

t.test('a cache keeps each object as the bytes the cluster listed, and paces a watch that ends at once', async (t) => {
  // Braces, quotes and escapes inside strings, and an int64 beyond 2^53: sliced, never re-serialized.
  const tricky =
    '{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"},"data":{"x":"}{\\"]["},"n":9007199254740993}';
  const plain = '{"metadata":{"name":"b","namespace":"n","resourceVersion":"6","labels":{"app":"web"}}}';
  const head = '{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"}';
  const page = `${head},"items":[${tricky},${plain}]}\n`;
  let watches = 0;
  const conn = {
    name: 'fake',
    request: (req: { path: string }) => {
      const watch = req.path.includes('watch=true');
      if (watch) watches++;
      // Every watch ends at once, empty: the cache must not reopen it in a tight loop.
      const body = Readable.from(watch ? [] : [Buffer.from(page)]);
      return Promise.resolve(Object.assign(body, { statusCode: 200, headers: {} }));
    },
  } as unknown as ClusterConnection;
  const resolved = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: [] };
  const log = { debug: () => undefined, info: () => undefined } as unknown as Logger;
  const cache = new ResourceCache(
    conn,
    resolved,
    { resized: () => undefined, bounds: { objects: 10, bytes: 1e6 } },
    log,
  );
  await cache.start();
  t.equal(cache.rv, 7n);
  t.equal(
    cache.get('n', 'a')?.json.toString(),
    `{"kind":"ConfigMap","apiVersion":"v1",${tricky.slice(1)}`,
    'the listed bytes, with kind and apiVersion in front',
  );
  t.same(cache.get('n', 'b')?.labels, { app: 'web' });
  t.same(
    cache.items('n').map((o) => o.name),
    ['a', 'b'],
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.ok(watches <= 2, `watches that end at once are paced (${watches} in half a second)`);
  cache.stop();
});
