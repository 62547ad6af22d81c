// The audit trail's figures for `make bench` (BENCH_ROWS includes `audit`): BENCH_AUDIT_RECORDS
// (100,000) audit records written as AuditChunks into the gateway's install namespace (the
// storage path every replica's flush takes: src/audit/chunk-store.ts), the time until the gateway lists them all, then
// GET /api/v1/admin/audit-logs with each of Kite's filters under load (p50/p99). The PATCH latency
// with recording on and off is the PATCH row's "gateway, audit trail off" path (run.ts).
import { loadHostKubeConfig } from '../src/host/kube.js';
import { AuditChunkStore, splitIntoChunks } from '../src/audit/chunk-store.js';
import { toAuditRecord, type AuditRecord } from '../src/audit/record.js';
import { createLogger } from '../src/log.js';
import { callGateway, until } from './gateway-setup.js';
import { runLoad, type Path } from './load.js';
import type { BenchSettings } from './settings.js';
import type { Figure } from './table.js';

const WRITERS = 8;

/** Synthetic records: 50 operators, 5 clusters, 20 namespaces, 10 resources, 5 operations, 5,000 names. */
function syntheticRecords(count: number): AuditRecord[] {
  const resources = [
    'deployments',
    'pods',
    'configmaps',
    'secrets',
    'services',
    'ingresses',
    'statefulsets',
    'jobs',
    'users',
    'roles',
  ];
  const operations = ['create', 'update', 'patch', 'delete', 'login'];
  const start = Date.now() - count; // one record per millisecond, ending now: the newest records
  const out: AuditRecord[] = [];
  for (let i = 0; i < count; i++) {
    const operator = 1 + (i % 50);
    out.push(
      toAuditRecord(
        {
          who: `user-${operator}`,
          whoKind: 'user',
          whoId: operator,
          when: new Date(start + i).toISOString(),
          requestId: `bench-${i}`,
          cluster: `cluster-${i % 5}`,
          verb: operations[i % 5],
          resource: resources[i % 10],
          namespace: `ns-${i % 20}`,
          name: `obj-${i % 5000}`,
          result: i % 17 === 0 ? 'failure' : 'success',
          status: i % 17 === 0 ? 403 : 200,
          clientAddress: '10.0.0.1',
          path: `/api/v1/${resources[i % 10]}/ns-${i % 20}/obj-${i % 5000}`,
        },
        () => 0,
      ),
    );
  }
  return out;
}

export async function auditFigures(options: {
  s: BenchSettings;
  hostKubeconfig: string;
  namespace: string;
  gatewayUrl: string;
  key: string;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const { s, hostKubeconfig, namespace, gatewayUrl, key, log } = options;
  const AUDIT_RECORDS = s.auditRecords;
  const store = new AuditChunkStore(
    loadHostKubeConfig({ kubeconfig: hostKubeconfig }),
    namespace,
    'bench-writer',
    createLogger('silent'),
  );
  const batches = splitIntoChunks(syntheticRecords(AUDIT_RECORDS), 500);
  log(`writing ${AUDIT_RECORDS} audit records as ${batches.length} AuditChunks`);
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (next < batches.length) {
        const batch = batches[next++];
        await store.write(store.chunk(store.nextName(), batch));
      }
    }),
  );
  const written = Date.now();
  const headers = { authorization: key };
  await until(
    `all ${AUDIT_RECORDS} audit records listed`,
    async () => {
      const res = await callGateway(gatewayUrl, 'GET', `/api/v1/admin/audit-logs?size=1&search=obj-`, { headers });
      return res.status === 200 && res.body.total >= AUDIT_RECORDS ? true : undefined;
    },
    300_000,
    100,
  );
  const listed = Date.now();
  const figures: Figure[] = [
    {
      what: `write ${AUDIT_RECORDS} audit records (${batches.length} AuditChunks, ${WRITERS} at a time)`,
      value: `${written - started} ms`,
    },
    { what: `... until the gateway lists all ${AUDIT_RECORDS}`, value: `${listed - started} ms` },
  ];
  const path: Path = { label: 'gateway', base: gatewayUrl, headers };
  const queries = [
    ['no filter', ''],
    ['page 100', 'page=100'],
    ['operatorId', 'operatorId=7'],
    ['search', 'search=obj-12'],
    ['operation', 'operation=delete'],
    ['cluster', 'cluster=cluster-3'],
    ['resourceType', 'resourceType=secrets'],
    ['resourceName', 'resourceName=obj-4242'],
    ['namespace', 'namespace=ns-11'],
    [
      'all filters at once',
      'operatorId=7&operation=update&cluster=cluster-1&resourceType=ingresses&namespace=ns-6&search=obj',
    ],
  ] as const;
  for (const [what, query] of queries) {
    log(`audit logs: ${what}`);
    const r = await runLoad(
      path,
      { method: 'GET', path: `/api/v1/admin/audit-logs?size=20${query ? `&${query}` : ''}` },
      8,
      Math.max(1, Math.round(s.durationSeconds / 2)),
      s.warmupSeconds,
    );
    figures.push({
      what: `GET /api/v1/admin/audit-logs (${AUDIT_RECORDS} records), ${what}`,
      value:
        `p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, ` +
        `${r.requestsPerSecond.toFixed(0)} req/s, ${r.failures} failures`,
    });
  }
  return figures;
}
