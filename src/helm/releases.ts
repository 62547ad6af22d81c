// Helm releases read natively (docs/helm.md): Helm keeps each revision of a release as a Secret of
// type `helm.sh/release.v1` in the release's namespace, labelled owner=helm, name=<release>,
// version=<revision>, status=<status>; its `release` value is base64 of the gzipped release JSON
// (chart metadata, the user's values, the rendered manifest, hooks, notes). kiteline lists those
// Secrets as the caller (kiteline's roles: `list` on secrets of the namespace; the host guard; the
// target's RBAC through impersonation), decodes them and shapes the answers: a release is its
// newest revision, as `helm list` shows it, and its history is every revision, as `helm history`.
// Reading a release is reading Secrets: whoever may not list Secrets there sees no release.
import { gunzipSync } from 'node:zlib';
import { listObjects, type CallerContext, type ReadKit } from '../cluster-access/reads.js';
import type { KubeObject } from '../cluster-access/calls.js';
import { NotFoundError } from '../errors.js';

/** The Secret type and labels Helm's storage driver writes. */
export const RELEASE_SECRET_TYPE = 'helm.sh/release.v1';
export const RELEASE_SELECTOR = 'owner=helm';
/** A release inflates to at most this (a Secret is at most 1 MiB; charts compress well, not this well). */
const MAX_RELEASE_BYTES = 32 * 1024 * 1024;

/** The parts of Helm's release JSON kiteline reads (helm.sh/helm/v4/pkg/release/v1). */
export interface HelmReleaseRecord {
  name: string;
  namespace: string;
  version: number;
  info?: {
    first_deployed?: string;
    last_deployed?: string;
    deleted?: string;
    description?: string;
    status?: string;
    notes?: string;
  };
  chart?: { metadata?: { name?: string; version?: string; appVersion?: string; description?: string; icon?: string } };
  config?: Record<string, unknown> | null;
  manifest?: string;
  hooks?: Array<{ name?: string; kind?: string; events?: string[] }>;
}

/** A release (its newest revision) as the list shows it: `helm list -o json`'s columns, camel-cased. */
export interface ReleaseSummary {
  name: string;
  namespace: string;
  revision: number;
  status: string;
  /** `<chart>-<version>`, as `helm list` prints it. */
  chart: string;
  chartName: string;
  chartVersion: string;
  appVersion: string;
  updated: string;
  description: string;
  icon?: string;
}

/** One revision, as `helm history -o json` shows it. */
export interface ReleaseRevision {
  revision: number;
  updated: string;
  status: string;
  chart: string;
  appVersion: string;
  description: string;
}

/** A release with what `helm get all` adds: the user's values, the manifest, the notes. */
export interface ReleaseDetail extends ReleaseSummary {
  firstDeployed: string;
  /** The values the user supplied (`helm get values`), not the chart's defaults. */
  values: Record<string, unknown>;
  manifest: string;
  notes: string;
  hooks: Array<{ name: string; kind: string; events: string[] }>;
}

/**
 * The release JSON a `helm.sh/release.v1` Secret holds: its `release` value (base64 once more,
 * inside the Secret's base64), gzipped unless an old Helm wrote it plain. undefined when it is not
 * one (a malformed or foreign Secret is skipped, never a 500).
 */
export function decodeReleaseSecret(secret: KubeObject): HelmReleaseRecord | undefined {
  const data = (secret as { data?: Record<string, string>; type?: string }).data;
  if ((secret as { type?: string }).type !== RELEASE_SECRET_TYPE || typeof data?.release !== 'string') return undefined;
  try {
    const inner = Buffer.from(Buffer.from(data.release, 'base64').toString('latin1'), 'base64');
    const json =
      inner[0] === 0x1f && inner[1] === 0x8b ? gunzipSync(inner, { maxOutputLength: MAX_RELEASE_BYTES }) : inner;
    const record = JSON.parse(json.toString('utf8')) as HelmReleaseRecord;
    if (typeof record?.name !== 'string' || typeof record.version !== 'number') return undefined;
    return record;
  } catch {
    return undefined;
  }
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');

export function releaseSummary(record: HelmReleaseRecord): ReleaseSummary {
  const meta = record.chart?.metadata ?? {};
  const chartName = text(meta.name);
  const chartVersion = text(meta.version);
  return {
    name: record.name,
    namespace: text(record.namespace),
    revision: record.version,
    status: text(record.info?.status) || 'unknown',
    chart: chartName && chartVersion ? `${chartName}-${chartVersion}` : chartName,
    chartName,
    chartVersion,
    appVersion: text(meta.appVersion),
    updated: text(record.info?.last_deployed),
    description: text(record.info?.description),
    ...(meta.icon ? { icon: text(meta.icon) } : {}),
  };
}

export function releaseRevision(record: HelmReleaseRecord): ReleaseRevision {
  const { revision, updated, status, chart, appVersion, description } = releaseSummary(record);
  return { revision, updated, status, chart, appVersion, description };
}

export function releaseDetail(record: HelmReleaseRecord): ReleaseDetail {
  return {
    ...releaseSummary(record),
    firstDeployed: text(record.info?.first_deployed),
    values: record.config && typeof record.config === 'object' ? record.config : {},
    manifest: text(record.manifest),
    notes: text(record.info?.notes),
    hooks: (record.hooks ?? []).map((hook) => ({
      name: text(hook.name),
      kind: text(hook.kind),
      events: Array.isArray(hook.events) ? hook.events.filter((e) => typeof e === 'string') : [],
    })),
  };
}

/** The newest revision of each release, by namespace then name (what `helm list --all` shows, uninstalled aside). */
export function newestRevisions(records: HelmReleaseRecord[]): HelmReleaseRecord[] {
  const newest = new Map<string, HelmReleaseRecord>();
  for (const record of records) {
    const key = `${record.namespace}/${record.name}`;
    if ((newest.get(key)?.version ?? -1) < record.version) newest.set(key, record);
  }
  return [...newest.values()]
    .filter((record) => record.info?.status !== 'uninstalled')
    .sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
}

/** Helm's release Secrets of a namespace (undefined: all namespaces), as the caller; `name` narrows to one release. */
async function releaseRecords(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string | undefined,
  name?: string,
): Promise<HelmReleaseRecord[]> {
  const labelSelector = name === undefined ? RELEASE_SELECTOR : `${RELEASE_SELECTOR},name=${name}`;
  const { list } = await listObjects(kit, ctx, { resource: 'secrets', namespace, name: undefined }, { labelSelector });
  return (list.items ?? []).flatMap((secret) => decodeReleaseSecret(secret) ?? []);
}

/** The releases of a namespace or of all, newest revision of each. */
export async function listReleases(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string | undefined,
): Promise<ReleaseSummary[]> {
  return newestRevisions(await releaseRecords(kit, ctx, namespace)).map(releaseSummary);
}

/** Every revision of a release, oldest first; 404 when it has none. */
export async function releaseHistory(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string,
  name: string,
): Promise<HelmReleaseRecord[]> {
  const records = (await releaseRecords(kit, ctx, namespace, name))
    .filter((record) => record.name === name)
    .sort((a, b) => a.version - b.version);
  if (records.length === 0) throw new NotFoundError(`release ${name} not found in namespace ${namespace}`);
  return records;
}

/** The newest revision of a release, or the one asked for; 404 when there is none. */
export async function readRelease(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string,
  name: string,
  revision?: number,
): Promise<HelmReleaseRecord> {
  const history = await releaseHistory(kit, ctx, namespace, name);
  const found = revision === undefined ? history.at(-1) : history.find((record) => record.version === revision);
  if (!found) throw new NotFoundError(`release ${name} has no revision ${revision}`);
  return found;
}
