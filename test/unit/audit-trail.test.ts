// Pure logic of the audit trail (src/audit/): an entry becomes a record with nothing but its named
// fields; Kite's query parameters are parsed as Kite does (400 for bad numbers) with a page-size
// cap; filters, newest-first order across chunks and paging; chunk splitting by count and bytes;
// which chunks the retention deletes; the audit.k8s.io/v1 EventList of the webhook.
import t from 'tap';
import { isUnauthenticated, UnauthenticatedBudget } from '../../src/audit/audit-service.js';
import { splitIntoChunks, type AuditChunkResource } from '../../src/audit/chunk-store.js';
import { auditFilter, parseAuditQuery, queryAudit, MAX_PAGE_SIZE } from '../../src/audit/query.js';
import { AuditRecordIndex } from '../../src/audit/record-index.js';
import { toAuditRecord, type AuditEntry, type AuditRecord } from '../../src/audit/record.js';
import { chunksToPrune } from '../../src/audit/retention.js';
import { auditEventList } from '../../src/audit/webhook.js';
import { BadRequestError } from '../../src/errors.js';

const noIds = () => 0;

function entry(over: Partial<AuditEntry> = {}): AuditEntry {
  return {
    who: 'alice',
    whoKind: 'user',
    whoId: 7,
    when: '2026-01-01T00:00:00.000Z',
    requestId: 'req-1',
    cluster: 'prod',
    verb: 'patch',
    resource: 'deployments',
    namespace: 'web',
    name: 'frontend',
    result: 'success',
    status: 200,
    clientAddress: '10.0.0.1',
    path: '/api/v1/deployments/web/frontend?dryRun=All',
    ...over,
  };
}

function record(i: number, over: Partial<AuditEntry> = {}): AuditRecord {
  const when = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
  return toAuditRecord(entry({ when, requestId: `req-${String(i).padStart(5, '0')}`, ...over }), noIds);
}

function chunk(name: string, records: AuditRecord[], uid = name): AuditChunkResource {
  return {
    metadata: { name, uid },
    spec: {
      replica: 'r',
      count: records.length,
      oldest: records[0].time,
      newest: records[records.length - 1].time,
      records,
    },
  };
}

const everything = { maxRecords: Number.MAX_SAFE_INTEGER, notBefore: '' };

t.test('an entry becomes a record of its named fields only', async (t) => {
  const hostile = {
    ...entry(),
    body: { data: { password: 'hunter2' } },
    token: 'tok-secret',
    stringData: { a: 'b' },
  } as unknown as AuditEntry;
  const r = toAuditRecord(hostile, noIds);
  t.same(r, {
    time: '2026-01-01T00:00:00.000Z',
    operator: { id: 7, name: 'alice', kind: 'user' },
    cluster: 'prod',
    operation: 'patch',
    resourceType: 'deployments',
    namespace: 'web',
    name: 'frontend',
    result: 'success',
    status: 200,
    requestId: 'req-1',
    clientAddress: '10.0.0.1',
    path: '/api/v1/deployments/web/frontend',
  });
  t.notOk(JSON.stringify(r).includes('hunter2') || JSON.stringify(r).includes('tok-secret'), 'no body, no token');
  t.notOk(JSON.stringify(r).includes('dryRun=All'), 'the query string is dropped from the path');

  const anon = toAuditRecord(entry({ who: 'anonymous', whoKind: 'anonymous', whoId: undefined }), () => 99);
  t.same(anon.operator, { id: 0, name: 'anonymous', kind: 'anonymous' }, 'anonymous has id 0');
  const looked = toAuditRecord(entry({ whoId: undefined, who: 'apikey:ci', whoKind: 'apikey' }), (kind, name) =>
    kind === 'apikey' && name === 'apikey:ci' ? 3 : 0,
  );
  t.same(
    looked.operator,
    { id: 3, name: 'apikey:ci', kind: 'apikey' },
    'the id is looked up by name when the entry has none',
  );
  const session = toAuditRecord(
    entry({ when: undefined, start: '2026-01-02T00:00:00Z', end: '2026-01-02T00:01:00Z', bytesIn: 5, bytesOut: 9 }),
    noIds,
  );
  t.match(
    session,
    { time: '2026-01-02T00:00:00.000Z', end: '2026-01-02T00:01:00.000Z', bytesIn: 5, bytesOut: 9 },
    'sessions keep start, end and byte counts',
  );
  t.equal(toAuditRecord(entry({ name: 'x'.repeat(1000) }), noIds).name.length, 253, 'long fields are cut');
  t.equal(toAuditRecord(entry({ whoKind: 'root' }), noIds).operator.kind, 'anonymous', 'an unknown kind is anonymous');
});

t.test("Kite's query parameters", async (t) => {
  t.same(parseAuditQuery({}), { page: 1, size: 20 }, 'defaults: page 1, size 20');
  t.same(
    parseAuditQuery({ page: ' 3 ', size: '50', operatorId: '0', search: ' web ', cluster: '', namespace: 'ns' }),
    { page: 3, size: 50, search: 'web', namespace: 'ns' },
    'trimmed; empty and operatorId 0 mean no filter',
  );
  t.same(parseAuditQuery({ operatorId: '12' }).operatorId, 12);
  for (const [name, value] of [
    ['page', '0'],
    ['page', 'abc'],
    ['page', '-1'],
    ['page', '1.5'],
    ['size', '0'],
    ['size', String(MAX_PAGE_SIZE + 1)],
    ['size', '1e3'],
    ['operatorId', 'x'],
    ['operatorId', '-3'],
  ] as const) {
    t.throws(() => parseAuditQuery({ [name]: value }), BadRequestError, `${name}=${value} is a 400`);
  }
  t.throws(() => parseAuditQuery({ search: 'x'.repeat(254) }), BadRequestError, 'an over-long filter is a 400');
  t.throws(() => parseAuditQuery({ cluster: ['a', 'b'] }), BadRequestError, 'a repeated filter is a 400');
});

t.test('filters, newest first across chunks, paging', async (t) => {
  const index = new AuditRecordIndex();
  // Two replicas' chunks whose times interleave, added out of order.
  const evens = Array.from({ length: 50 }, (_, k) => record(2 * k, { cluster: 'a' }));
  const odds = Array.from({ length: 50 }, (_, k) =>
    record(2 * k + 1, { cluster: 'b', verb: 'delete', name: `Name-${k}`, whoId: 8 }),
  );
  index.add(chunk('c-odd', odds));
  index.add(chunk('c-even', evens));
  index.add(chunk('c-even', evens)); // a re-list delivers the same chunk again
  const all = index.newestFirst();
  t.equal(all.length, 100, 'each record once');
  t.same(
    all.slice(0, 3).map((e) => e.record.requestId),
    ['req-00099', 'req-00098', 'req-00097'],
    'newest first, the replicas interleaved',
  );
  t.equal(new Set(all.map((e) => e.id)).size, 100, 'ids are unique');
  t.ok(
    all.every((e) => Number.isSafeInteger(e.id) && e.id > 0),
    'ids are safe integers',
  );

  const page2 = queryAudit(all, { page: 2, size: 30 }, everything);
  t.equal(page2.total, 100);
  t.same([page2.page, page2.size, page2.data.length], [2, 30, 30]);
  t.equal(page2.data[0].resourceName, all[30].record.name, 'page 2 starts at the 31st newest');
  t.equal(queryAudit(all, { page: 5, size: 30 }, everything).data.length, 0, 'past the end: empty page, same total');

  const q = (query: object) => queryAudit(all, { page: 1, size: 100, ...query }, everything);
  t.equal(q({ cluster: 'b' }).total, 50, 'cluster');
  t.equal(q({ operation: 'delete' }).total, 50, 'operation');
  t.equal(q({ operatorId: 8 }).total, 50, 'operatorId');
  t.equal(q({ operatorId: 9 }).total, 0);
  t.equal(q({ resourceType: 'deployments', namespace: 'web' }).total, 100, 'resourceType and namespace');
  t.equal(q({ namespace: 'other' }).total, 0);
  t.equal(q({ resourceName: 'Name-7' }).total, 1, 'resourceName is exact');
  t.equal(q({ resourceName: 'name-7' }).total, 0);
  t.equal(q({ search: 'name-1' }).total, 11, 'search: any case, a part of the name (Name-1, Name-10..19)');
  t.equal(q({ search: '%' }).total, 0, 'no SQL wildcard');
  t.equal(q({ cluster: 'a', operation: 'delete' }).total, 0, 'filters combine');

  // The same answers through the per-field lookups the trail uses (paging and retention included).
  const lookup = (field: Parameters<AuditRecordIndex['positionsOf']>[0], value: string | number) =>
    index.positionsOf(field, value);
  const queries = [
    { cluster: 'b' },
    { operation: 'delete' },
    { operatorId: 8 },
    { operatorId: 9 },
    { resourceType: 'deployments', namespace: 'web' },
    { resourceName: 'Name-7' },
    { search: 'name-1' },
    { cluster: 'b', search: 'name-1' },
    { cluster: 'a', operation: 'delete' },
  ];
  for (const query of queries) {
    for (const [page, size] of [
      [1, 100],
      [2, 7],
    ] as const) {
      const scanned = queryAudit(all, { page, size, ...query }, everything);
      t.same(
        queryAudit(all, { page, size, ...query }, everything, lookup),
        scanned,
        `indexed = scanned: ${JSON.stringify(query)} page ${page}`,
      );
    }
  }
  const newestTen = { maxRecords: 10, notBefore: '' };
  t.same(
    queryAudit(all, { page: 1, size: 100, cluster: 'b' }, newestTen, lookup),
    queryAudit(all, { page: 1, size: 100, cluster: 'b' }, newestTen),
    'indexed = scanned under the retention',
  );
  t.equal(
    queryAudit(all, { page: 1, size: 100, cluster: 'b' }, newestTen, lookup).total,
    5,
    'only the newest 10 are kept: 5 of them in cluster b',
  );

  t.notOk(
    auditFilter({ page: 1, size: 1, operatorId: 7 })({
      id: 1,
      chunk: 'x',
      lowerName: '',
      record: record(1, { whoKind: 'apikey', whoId: 7 }),
    }),
    'operatorId matches users only',
  );

  const view = q({ resourceName: 'Name-7' }).data[0];
  t.match(view, {
    clusterName: 'b',
    resourceType: 'deployments',
    resourceName: 'Name-7',
    namespace: 'web',
    operationType: 'delete',
    resourceYaml: '',
    previousYaml: '',
    success: true,
    errorMessage: '',
    operatorId: 8,
    operator: { id: 8, username: 'alice', provider: 'password', kind: 'user' },
    status: 200,
    requestId: 'req-00015',
    clientAddress: '10.0.0.1',
  });
  t.equal(view.createdAt, view.updatedAt);

  index.remove('c-odd');
  t.equal(index.size, 50, 'a deleted chunk leaves the index');
  t.ok(index.newestFirst().every((e) => e.chunk === 'c-even'));

  const failed = queryAudit(
    [{ id: 1, chunk: 'x', lowerName: '', record: record(1, { result: 'failure', status: 403 }) }],
    { page: 1, size: 1 },
    everything,
  ).data[0];
  t.match(failed, { success: false, errorMessage: 'HTTP 403 Forbidden' });
});

t.test('the retention as queries see it: newest maxRecords, none older than the age', async (t) => {
  const index = new AuditRecordIndex();
  index.add(
    chunk(
      'c',
      Array.from({ length: 10 }, (_, i) => record(i)),
    ),
  );
  const all = index.newestFirst();
  t.equal(queryAudit(all, { page: 1, size: 100 }, { maxRecords: 4, notBefore: '' }).total, 4);
  const notBefore = record(6).time;
  const kept = queryAudit(all, { page: 1, size: 100 }, { maxRecords: 100, notBefore });
  t.same(
    kept.data.map((d) => d.requestId),
    ['req-00009', 'req-00008', 'req-00007', 'req-00006'],
  );
});

t.test('chunks are split by count and by bytes', async (t) => {
  const records = Array.from({ length: 25 }, (_, i) => record(i));
  t.same(
    splitIntoChunks(records, 10).map((c) => c.length),
    [10, 10, 5],
  );
  const big = Array.from({ length: 6 }, (_, i) => record(i, { name: 'n'.repeat(253), namespace: 'x'.repeat(253) }));
  const oneSize = Buffer.byteLength(JSON.stringify(big[0])) + 1;
  const byBytes = splitIntoChunks(big, 100, oneSize * 2);
  t.same(
    byBytes.map((c) => c.length),
    [2, 2, 2],
    'never more bytes than the cap',
  );
  t.same(byBytes.flat(), big, 'order kept, nothing lost');
});

t.test('retention: chunks past the age or wholly past the newest maxRecords', async (t) => {
  const now = Date.parse('2026-02-01T00:00:00Z');
  const day = (d: number) => new Date(now - d * 86_400_000).toISOString();
  const chunks = [
    { name: 'old', newest: day(40), count: 5 },
    { name: 'a', newest: day(3), count: 5 },
    { name: 'b', newest: day(2), count: 5 },
    { name: 'c', newest: day(1), count: 5 },
  ];
  t.same(chunksToPrune(chunks, { maxAgeSeconds: 30 * 86_400, maxRecords: 1000 }, now), ['old'], 'by age');
  t.same(
    chunksToPrune(chunks, { maxAgeSeconds: 60 * 86_400, maxRecords: 10 }, now),
    ['old', 'a'],
    'by count: the newest 10 are in c and b',
  );
  t.same(
    chunksToPrune(chunks, { maxAgeSeconds: 60 * 86_400, maxRecords: 11 }, now),
    ['old'],
    'a chunk partly within the count is kept',
  );
  t.same(chunksToPrune([], { maxAgeSeconds: 60, maxRecords: 1 }, now), []);
});

t.test('the webhook format: audit.k8s.io/v1 EventList at level Metadata', async (t) => {
  const list = auditEventList([record(1, { resource: 'widgets.example.com', cluster: 'prod' })]) as {
    kind: string;
    apiVersion: string;
    items: any[];
  };
  t.equal(list.kind, 'EventList');
  t.equal(list.apiVersion, 'audit.k8s.io/v1');
  t.match(list.items[0], {
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: 'req-00001',
    stage: 'ResponseComplete',
    requestURI: '/api/v1/deployments/web/frontend',
    verb: 'patch',
    user: { username: 'alice', uid: 'user:7' },
    sourceIPs: ['10.0.0.1'],
    objectRef: { resource: 'widgets', apiGroup: 'example.com', namespace: 'web', name: 'frontend' },
    responseStatus: { code: 200 },
    requestReceivedTimestamp: '2026-01-01T00:00:01.000000Z',
    annotations: { 'kiteline.io/cluster': 'prod', 'kiteline.io/result': 'success' },
  });
  t.notOk('requestObject' in list.items[0] || 'responseObject' in list.items[0], 'never a body');
});

t.test('the webhook retries a failing receiver and delivers every record once, in order', async (t) => {
  const { createServer } = await import('node:http');
  const { createLogger } = await import('../../src/log.js');
  const { AuditWebhook } = await import('../../src/audit/webhook.js');
  let answers = 0;
  const received: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (++answers <= 2) return void res.writeHead(503).end(); // down twice, then up
      received.push(...(JSON.parse(body).items as Array<{ auditID: string }>).map((e) => e.auditID));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as { port: number }).port;
  const webhook = new AuditWebhook(`http://127.0.0.1:${port}/hook`, undefined, createLogger('silent'));
  webhook.send([record(1), record(2)]);
  webhook.send([record(3)]);
  const deadline = Date.now() + 30_000;
  while (received.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.same(received, ['req-00001', 'req-00002', 'req-00003'], 'all three, once each, in order, after two failures');
  t.ok(answers >= 3, 'the failures were retried');
  webhook.send([record(4)]);
  await webhook.close();
  t.same(received.slice(3), ['req-00004'], 'close sends what is queued');
});

t.test('audit trail settings: defaults, off, bounds, and a webhook URL never echoed', async (t) => {
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  // eslint-disable-next-line @typescript-eslint/unbound-method -- a plain function
  const { join } = await import('node:path');
  const { loadConfig } = await import('../../src/config.js');
  const { ConfigError } = await import('../../src/errors.js');
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kl-audit-config-')), 'kubeconfig');
  writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
  const load = (env: Record<string, string>) => loadConfig([], { KUBECONFIG: kubeconfig, ...env });
  t.same(load({}).auditTrail, {
    flushIntervalMs: 2000,
    chunkSize: 500,
    maxAgeSeconds: 2_592_000,
    maxRecords: 100_000,
    unauthenticatedMaxRecords: 10_000,
    pruneIntervalMs: 60_000,
    webhookUrl: undefined,
    webhookCa: undefined,
  });
  t.equal(load({ KITELINE_AUDIT_TRAIL: 'false' }).auditTrail, undefined, 'off');
  t.match(
    load({ KITELINE_AUDIT_MAX_RECORDS: '5', KITELINE_AUDIT_WEBHOOK_URL: 'https://audit.example/in?x=1' }).auditTrail,
    { maxRecords: 5, webhookUrl: 'https://audit.example/in?x=1' },
  );
  t.throws(() => load({ KITELINE_AUDIT_CHUNK_SIZE: '0' }), ConfigError);
  t.throws(
    () => load({ KITELINE_AUDIT_CHUNK_SIZE: '5001' }),
    ConfigError,
    'a chunk stays far below the object size limit',
  );
  t.throws(() => load({ KITELINE_AUDIT_FLUSH_INTERVAL_MS: '10' }), ConfigError);
  for (const bad of ['ftp://audit.example/', 'not a url', 'https://user:hunter2@audit.example/']) {
    try {
      load({ KITELINE_AUDIT_WEBHOOK_URL: bad });
      t.fail(`${bad} accepted`);
    } catch (err) {
      t.ok(err instanceof ConfigError, `${bad} refused`);
      t.notOk((err as Error).message.includes('hunter2'), 'the value is not echoed');
    }
  }
});

t.test('unauthenticated entries: recorded one by one up to the budget, the rest summed up per minute', async (t) => {
  t.ok(isUnauthenticated(entry({ who: 'anonymous', whoKind: 'anonymous', whoId: undefined, result: 'failure' })));
  t.ok(isUnauthenticated(entry({ who: 'anonymous', whoKind: 'anonymous', whoId: undefined })), 'a public logout');
  t.ok(isUnauthenticated(entry({ whoId: undefined, result: 'failure' })), 'a failed login naming a user');
  t.notOk(isUnauthenticated(entry({ whoId: undefined })), 'a successful login');
  t.notOk(isUnauthenticated(entry({ result: 'failure' })), 'an authenticated failure');

  let now = Date.parse('2026-01-01T00:00:00Z');
  const budget = new UnauthenticatedBudget(3, () => now);
  const anonymous = (address: string) => entry({ who: 'anonymous', whoKind: 'anonymous', clientAddress: address });
  const admitted = Array.from({ length: 10 }, (_, i) => budget.admit(anonymous(`192.0.2.${i % 2}`)));
  t.same(admitted, [true, true, true, false, false, false, false, false, false, false]);
  t.equal(budget.roll(), undefined, 'the minute is not over');
  now += 60_000;
  const summary = budget.roll()!;
  t.match(summary, {
    whoKind: 'anonymous',
    verb: 'unauthenticated-requests',
    name: '7 more',
    when: '2026-01-01T00:00:00.000Z',
    end: '2026-01-01T00:01:00.000Z',
    subject: /7 unauthenticated requests not recorded one by one; from 192\.0\.2\.1, 192\.0\.2\.0/,
  });
  t.ok(budget.admit(anonymous('192.0.2.9')), 'a new minute, a new budget');
  t.equal(budget.roll(true), undefined, 'nothing left out: no summary');
});
