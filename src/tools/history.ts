// A workload's revision history (GET /api/v1/<resource>/<ns>/<name>/history) from the cluster's
// own records, as `kubectl rollout history` reads them: a Deployment's ReplicaSets (revision in
// the deployment.kubernetes.io/revision annotation), a StatefulSet's or DaemonSet's
// ControllerRevisions (revision field), each owned by the workload (controller UID) and selected by
// its selector. Kite kept an SQL table of its own applies instead; the answer keeps Kite's shape
// ({data: [ResourceHistory], pagination}) so its history tab and diff viewer work: each entry's
// resourceYaml is the workload with that revision's pod template (an apply document: Kite's
// "rollback" button sends it to POST /resources/apply), previousYaml the revision before it.
//
// Rollback (POST …/rollback {revision}) is what `kubectl rollout undo --to-revision` does:
// Deployment: a JSON patch replacing spec.template (pod-template-hash label removed) and the
// annotations (kubectl's rule: the revision's annotations, the Deployment's own for the
// rollout-bookkeeping keys), with the read resourceVersion as a precondition; StatefulSet and
// DaemonSet: the ControllerRevision's data (a strategic merge patch of spec.template).
import { Document, visit } from 'yaml';
import type { ResolvedResource } from '../clusters/types.js';
import { BadRequestError, NotFoundError } from '../errors.js';
import { withSearch } from '../cluster-access/read-query.js';
import { objectPath } from '../cluster-access/target.js';
import {
  controllerUid,
  getJson,
  labelSelectorString,
  writeJson,
  type KubeList,
  type KubeObject,
  type ToolContext,
} from '../cluster-access/calls.js';

export const DEFAULT_HISTORY_PAGE_SIZE = 10;
export const MAX_HISTORY_PAGE_SIZE = 100;

const REVISION_ANNOTATION = 'deployment.kubernetes.io/revision';
const CHANGE_CAUSE_ANNOTATION = 'kubernetes.io/change-cause';
const HASH_LABEL = 'pod-template-hash';
/** kubectl rollout undo keeps the Deployment's own values of these annotations. */
const ANNOTATIONS_TO_SKIP = new Set([
  'kubectl.kubernetes.io/last-applied-configuration',
  REVISION_ANNOTATION,
  'deployment.kubernetes.io/revision-history',
  'deployment.kubernetes.io/desired-replicas',
  'deployment.kubernetes.io/max-replicas',
  'deprecated.deployment.rollback.to',
]);

/** The kinds with revisions: apps/v1 Deployments, StatefulSets and DaemonSets. */
export function hasRevisions(resolved: ResolvedResource): boolean {
  return resolved.group === 'apps' && ['deployments', 'statefulsets', 'daemonsets'].includes(resolved.resource);
}

/** One entry, in Kite's ResourceHistory shape (plus revision, current and changeCause). */
export interface HistoryEntry {
  id: number;
  revision: number;
  current: boolean;
  clusterName: string;
  resourceType: string;
  resourceName: string;
  namespace: string;
  operationType: 'revision';
  resourceYaml: string;
  previousYaml: string;
  success: true;
  errorMessage: '';
  operatorId: 0;
  operator: { username: string; provider: string };
  changeCause: string;
  createdAt: string;
  updatedAt: string;
}

export interface Pagination {
  page: number;
  pageSize: number;
  total: number;
  totalPages: number;
  hasNextPage: boolean;
  hasPrevPage: boolean;
}

export interface HistoryAnswer {
  data: HistoryEntry[];
  pagination: Pagination;
}

/** A revision as read from the cluster: its number, pod template and the record it came from. */
interface Revision {
  revision: number;
  template: Record<string, unknown>;
  record: KubeObject;
}

export interface WorkloadRef {
  resolved: ResolvedResource;
  resource: string;
  namespace: string;
  name: string;
}

function withoutHashLabel(template: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(template) as { metadata?: { labels?: Record<string, string> } };
  if (copy.metadata?.labels) {
    delete copy.metadata.labels[HASH_LABEL];
    if (Object.keys(copy.metadata.labels).length === 0) delete copy.metadata.labels;
  }
  return copy;
}

/** The workload's revisions, oldest first. */
async function revisions(ctx: ToolContext, ref: WorkloadRef, workload: KubeObject): Promise<Revision[]> {
  const selector = labelSelectorString((workload.spec as { selector?: unknown } | undefined)?.selector);
  const uid = workload.metadata?.uid;
  const ns = encodeURIComponent(ref.namespace);
  const search = new URLSearchParams(selector ? { labelSelector: selector } : {});
  const found: Revision[] = [];
  if (ref.resolved.resource === 'deployments') {
    const list = await getJson<KubeList>(ctx, withSearch(`/apis/apps/v1/namespaces/${ns}/replicasets`, search));
    for (const rs of list.items ?? []) {
      if (controllerUid(rs) !== uid) continue;
      const revision = Number(rs.metadata?.annotations?.[REVISION_ANNOTATION]);
      const template = (rs.spec as { template?: Record<string, unknown> } | undefined)?.template;
      if (Number.isInteger(revision) && revision > 0 && template)
        found.push({ revision, template: withoutHashLabel(template), record: rs });
    }
  } else {
    const list = await getJson<KubeList>(ctx, withSearch(`/apis/apps/v1/namespaces/${ns}/controllerrevisions`, search));
    for (const cr of list.items ?? []) {
      if (controllerUid(cr) !== uid) continue;
      const revision = Number(cr.revision);
      const template = (cr.data as { spec?: { template?: Record<string, unknown> } } | undefined)?.spec?.template;
      if (!Number.isInteger(revision) || !template) continue;
      const clean = structuredClone(template);
      delete clean.$patch;
      found.push({ revision, template: clean, record: cr });
    }
  }
  return found.sort((a, b) => a.revision - b.revision);
}

/** A timestamp as YAML 1.1 and js-yaml read one (a date, or a date and time). */
const YAML_TIMESTAMP =
  /^\d{4}-\d{1,2}-\d{1,2}(?:(?:[Tt]|[ \t]+)\d{1,2}:\d{2}:\d{2}(?:\.\d*)?(?:[ \t]*(?:Z|[-+]\d{1,2}(?::\d{2})?))?)?$/;

/**
 * The apply document that puts this template back: kind, name, namespace, spec.template. A string
 * that looks like a timestamp (Kite's `restartedAt` annotation) is written quoted: Kite's UI reads
 * the YAML with js-yaml, which takes an unquoted one for a date.
 */
function applyDocument(ref: WorkloadRef, template: Record<string, unknown>): string {
  const doc = new Document({
    apiVersion: `${ref.resolved.group}/${ref.resolved.version}`,
    kind: ref.resolved.kind,
    metadata: { name: ref.name, namespace: ref.namespace },
    spec: { template },
  });
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && YAML_TIMESTAMP.test(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  return doc.toString();
}

function currentRevision(ref: WorkloadRef, workload: KubeObject, all: Revision[]): number | undefined {
  if (ref.resolved.resource === 'deployments') {
    const value = Number(workload.metadata?.annotations?.[REVISION_ANNOTATION]);
    return Number.isInteger(value) ? value : all.at(-1)?.revision;
  }
  const updateRevision = (workload.status as { updateRevision?: string } | undefined)?.updateRevision;
  return all.find((r) => r.record.metadata?.name === updateRevision)?.revision ?? all.at(-1)?.revision;
}

/** One page of the workload's history, newest first; other kinds get an empty page. */
export async function workloadHistory(
  ctx: ToolContext,
  ref: WorkloadRef,
  page: number,
  pageSize: number,
): Promise<HistoryAnswer> {
  const workload = await getJson(ctx, objectPath(ref.resolved, ref.namespace, ref.name));
  const all = hasRevisions(ref.resolved) ? await revisions(ctx, ref, workload) : [];
  const current = currentRevision(ref, workload, all);
  const newestFirst = [...all].reverse();
  const total = newestFirst.length;
  const totalPages = Math.ceil(total / pageSize);
  const data = newestFirst.slice((page - 1) * pageSize, page * pageSize).map((r): HistoryEntry => {
    const previous = all[all.indexOf(r) - 1];
    const created = r.record.metadata?.creationTimestamp ?? '';
    return {
      id: r.revision,
      revision: r.revision,
      current: r.revision === current,
      clusterName: ctx.conn.name,
      resourceType: ref.resource,
      resourceName: ref.name,
      namespace: ref.namespace,
      operationType: 'revision',
      resourceYaml: applyDocument(ref, r.template),
      previousYaml: previous ? applyDocument(ref, previous.template) : '',
      success: true,
      errorMessage: '',
      operatorId: 0,
      operator: { username: r.record.metadata?.annotations?.[CHANGE_CAUSE_ANNOTATION] ?? '', provider: 'kubernetes' },
      changeCause: r.record.metadata?.annotations?.[CHANGE_CAUSE_ANNOTATION] ?? '',
      createdAt: created,
      updatedAt: created,
    };
  });
  return {
    data,
    pagination: {
      page,
      pageSize,
      total,
      totalPages,
      hasNextPage: page < totalPages,
      hasPrevPage: page > 1 && total > 0,
    },
  };
}

/** Rolls the workload back to `toRevision` (0: the one before the current), as kubectl rollout undo. */
export async function rollbackWorkload(
  ctx: ToolContext,
  ref: WorkloadRef,
  toRevision: number,
): Promise<{ message: string; revision: number }> {
  if (!hasRevisions(ref.resolved))
    throw new BadRequestError(
      `${ref.resource} have no revisions to roll back to (only Deployments, StatefulSets and DaemonSets)`,
    );
  const path = objectPath(ref.resolved, ref.namespace, ref.name);
  const workload = await getJson(ctx, path);
  const all = await revisions(ctx, ref, workload);
  const current = currentRevision(ref, workload, all);
  const target =
    toRevision === 0
      ? [...all].reverse().find((r) => r.revision !== current)
      : all.find((r) => r.revision === toRevision);
  if (!target) {
    throw new NotFoundError(
      toRevision === 0
        ? `${ref.resource} ${ref.namespace}/${ref.name} has no previous revision`
        : `revision ${toRevision} of ${ref.resource} ${ref.namespace}/${ref.name} not found`,
    );
  }
  const what = `${ref.resource} ${ref.namespace}/${ref.name}`;
  const currentTemplate = withoutHashLabel((workload.spec as { template?: Record<string, unknown> }).template ?? {});
  if (JSON.stringify(sortKeys(currentTemplate)) === JSON.stringify(sortKeys(target.template))) {
    return {
      message: `${what} skipped rollback (current template already matches revision ${target.revision})`,
      revision: target.revision,
    };
  }
  if (ref.resolved.resource === 'deployments') {
    const annotations: Record<string, string> = {};
    for (const [k, v] of Object.entries(workload.metadata?.annotations ?? {}))
      if (ANNOTATIONS_TO_SKIP.has(k)) annotations[k] = v;
    for (const [k, v] of Object.entries(target.record.metadata?.annotations ?? {}))
      if (!ANNOTATIONS_TO_SKIP.has(k)) annotations[k] = v;
    const patch = [
      { op: 'test', path: '/metadata/resourceVersion', value: workload.metadata?.resourceVersion },
      { op: 'replace', path: '/spec/template', value: target.template },
      { op: 'add', path: '/metadata/annotations', value: annotations },
    ];
    await writeJson(ctx, 'PATCH', path, 'application/json-patch+json', patch, path);
  } else {
    // The ControllerRevision's data is the strategic merge patch that restores its template.
    await writeJson(ctx, 'PATCH', path, 'application/strategic-merge-patch+json', target.record.data, path);
  }
  return { message: `${what} rolled back to revision ${target.revision}`, revision: target.revision };
}

/** A copy with object keys in order (template comparison must not depend on key order). */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}
