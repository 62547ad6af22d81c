// Kite's audit-log query (`GET /api/v1/admin/audit-logs?page&size&operatorId&search&operation&
// cluster&resourceType&resourceName&namespace`) over the in-memory index: the parameters parsed
// as Kite parses them (trimmed; page, size and operatorId must be numbers), the filters (exact
// matches, `search` a case-insensitive substring of the resource name), newest first, one page,
// and each record in Kite's ResourceHistory shape. Unlike Kite: `size` has a maximum, `search` is
// a plain substring (no SQL wildcards), records outlive their operator, and no YAML is ever kept.
import { STATUS_CODES } from 'node:http';
import { BadRequestError } from '../errors.js';
import type { IndexedField, IndexedRecord } from './record-index.js';
import type { AuditRecord, OperatorKind } from './record.js';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
const MAX_PAGE = 1_000_000;
const MAX_FILTER_LENGTH = 253;

export interface AuditQuery {
  page: number;
  size: number;
  /** The id of the User who acted (Kite's user filter; API keys have ids of their own and never match). */
  operatorId?: number;
  /** A part of the resource name, any case. */
  search?: string;
  operation?: string;
  cluster?: string;
  resourceType?: string;
  resourceName?: string;
  namespace?: string;
}

const TEXT_FILTERS = ['search', 'operation', 'cluster', 'resourceType', 'resourceName', 'namespace'] as const;

function whole(name: string, raw: unknown, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  // Anything but a string (a repeated parameter: an array) is not a whole number.
  const value = (typeof raw === 'string' ? raw : JSON.stringify(raw)).trim();
  if (value === '') return undefined;
  if (!/^\d{1,16}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new BadRequestError(`invalid ${name} parameter: a whole number from ${min} to ${max}`);
  }
  return Number(value);
}

/** The query of a request (its query-string values as strings); 400 for a bad value. */
export function parseAuditQuery(raw: Record<string, unknown>): AuditQuery {
  const query: AuditQuery = {
    page: whole('page', raw.page, 1, MAX_PAGE) ?? 1,
    size: whole('size', raw.size, 1, MAX_PAGE_SIZE) ?? DEFAULT_PAGE_SIZE,
  };
  const operatorId = whole('operatorId', raw.operatorId, 0, Number.MAX_SAFE_INTEGER);
  if (operatorId) query.operatorId = operatorId; // 0 means "everyone", as in Kite
  for (const name of TEXT_FILTERS) {
    const value = raw[name];
    if (value === undefined) continue;
    if (typeof value !== 'string') throw new BadRequestError(`invalid ${name} parameter: give it once`);
    const trimmed = value.trim();
    if (trimmed.length > MAX_FILTER_LENGTH)
      throw new BadRequestError(`invalid ${name} parameter: at most ${MAX_FILTER_LENGTH} characters`);
    if (trimmed !== '') query[name] = trimmed;
  }
  return query;
}

/** A predicate for the query's filters (all of them must match). */
export function auditFilter(query: AuditQuery): (entry: IndexedRecord) => boolean {
  const search = query.search?.toLowerCase();
  return ({ record, lowerName }) =>
    (query.operatorId === undefined || (record.operator.id === query.operatorId && record.operator.kind === 'user')) &&
    (query.operation === undefined || record.operation === query.operation) &&
    (query.cluster === undefined || record.cluster === query.cluster) &&
    (query.resourceType === undefined || record.resourceType === query.resourceType) &&
    (query.resourceName === undefined || record.name === query.resourceName) &&
    (query.namespace === undefined || record.namespace === query.namespace) &&
    (search === undefined || lowerName.includes(search));
}

/** Kite's operator object, plus kiteline's kind. */
export interface AuditOperatorView {
  id: number;
  username: string;
  name: string;
  /** Kite's provider: `password` for users, `api_key` for API keys, `anonymous` for neither. */
  provider: 'password' | 'api_key' | 'anonymous';
  kind: OperatorKind;
}

/** The record's own fields the view passes on as they are stored. */
type StoredFields = Pick<
  AuditRecord,
  | 'status'
  | 'requestId'
  | 'clientAddress'
  | 'path'
  | 'objectId'
  | 'subject'
  | 'dryRun'
  | 'bytesIn'
  | 'bytesOut'
  | 'arguments'
  | 'recording'
>;

/** One record in Kite's ResourceHistory shape, plus kiteline's fields (status, requestId, ...). */
export interface AuditLogView extends StoredFields {
  id: number;
  createdAt: string;
  updatedAt: string;
  clusterName: string;
  resourceType: string;
  resourceName: string;
  namespace: string;
  operationType: string;
  /** Always empty: kiteline never stores an object (a Secret's data would be in it). */
  resourceYaml: '';
  previousYaml: '';
  success: boolean;
  errorMessage: string;
  operatorId: number;
  operator: AuditOperatorView;
}

const PROVIDERS: Record<OperatorKind, AuditLogView['operator']['provider']> = {
  user: 'password',
  apikey: 'api_key',
  anonymous: 'anonymous',
};

export function auditLogView({ id, record }: IndexedRecord): AuditLogView {
  const success = record.result === 'success';
  const view: AuditLogView = {
    id,
    createdAt: record.time,
    updatedAt: record.end ?? record.time,
    clusterName: record.cluster,
    resourceType: record.resourceType,
    resourceName: record.name,
    namespace: record.namespace,
    operationType: record.operation,
    resourceYaml: '',
    previousYaml: '',
    success,
    errorMessage: success
      ? ''
      : `HTTP ${record.status}${STATUS_CODES[record.status] ? ` ${STATUS_CODES[record.status]}` : ''}`,
    operatorId: record.operator.id,
    operator: {
      id: record.operator.id,
      username: record.operator.name,
      name: record.operator.name,
      provider: PROVIDERS[record.operator.kind],
      kind: record.operator.kind,
    },
    status: record.status,
    requestId: record.requestId,
    clientAddress: record.clientAddress,
  };
  for (const key of [
    'path',
    'objectId',
    'subject',
    'dryRun',
    'bytesIn',
    'bytesOut',
    'arguments',
    'recording',
  ] as const) {
    if (record[key] !== undefined) (view as unknown as Record<string, unknown>)[key] = record[key];
  }
  return view;
}

export interface AuditPage {
  data: AuditLogView[];
  total: number;
  page: number;
  size: number;
}

/** How many of the newest-first records are not older than notBefore (a binary search). */
function retainedCount(records: readonly IndexedRecord[], notBefore: string, max: number): number {
  let low = 0;
  let high = Math.min(records.length, max);
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (records[mid].record.time < notBefore) high = mid;
    else low = mid + 1;
  }
  return low;
}

/**
 * One page of the records (newest first) that match, out of those the retention still keeps:
 * the newest `maxRecords`, none older than `notBefore` (pruning deletes the rest a little later).
 */
export function queryAudit(
  records: readonly IndexedRecord[],
  query: AuditQuery,
  retention: { maxRecords: number; notBefore: string },
  positionsOf?: (field: IndexedField, value: string | number) => readonly number[],
): AuditPage {
  const end = retainedCount(records, retention.notBefore, retention.maxRecords);
  const first = (query.page - 1) * query.size;
  const filtered = TEXT_FILTERS.some((name) => query[name] !== undefined) || query.operatorId !== undefined;
  if (!filtered) {
    return {
      data: records.slice(Math.min(first, end), Math.min(first + query.size, end)).map(auditLogView),
      total: end,
      page: query.page,
      size: query.size,
    };
  }
  const matches = auditFilter(query);
  const data: AuditLogView[] = [];
  let total = 0;
  const take = (position: number) => {
    const entry = records[position];
    if (!matches(entry)) return;
    if (total >= first && data.length < query.size) data.push(auditLogView(entry));
    total++;
  };
  const candidates = positionsOf ? fewestCandidates(query, positionsOf) : undefined;
  if (candidates) {
    for (const position of candidates) {
      if (position >= end) break;
      take(position);
    }
  } else {
    for (let i = 0; i < end; i++) take(i);
  }
  return { data, total, page: query.page, size: query.size };
}

/** The exact filters of a query with the field each looks up. */
const EXACT_FILTERS: ReadonlyArray<[keyof AuditQuery, IndexedField]> = [
  ['operatorId', 'operatorId'],
  ['operation', 'operation'],
  ['cluster', 'cluster'],
  ['resourceType', 'resourceType'],
  ['resourceName', 'name'],
  ['namespace', 'namespace'],
];

/** The shortest position list among the query's exact filters; undefined when it has none (a search alone). */
function fewestCandidates(
  query: AuditQuery,
  positionsOf: (field: IndexedField, value: string | number) => readonly number[],
): readonly number[] | undefined {
  let fewest: readonly number[] | undefined;
  for (const [name, field] of EXACT_FILTERS) {
    const value = query[name];
    if (value === undefined) continue;
    const positions = positionsOf(field, value);
    if (!fewest || positions.length < fewest.length) fewest = positions;
  }
  return fewest;
}
