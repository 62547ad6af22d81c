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
/** A release inflates to at most this (a Secret is at most 1 MiB; a larger answer is skipped). */
const MAX_RELEASE_BYTES = 16 * 1024 * 1024;

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
  chart?: {
    metadata?: { name?: string; version?: string; appVersion?: string; description?: string; icon?: string };
    values?: Record<string, unknown> | null;
  };
  config?: Record<string, unknown> | null;
  manifest?: string;
  hooks?: Array<{ name?: string; kind?: string; events?: string[] }>;
}

/**
 * A release as Kite shows it (kite-org/kite's HelmRelease): an object in Kubernetes' shape, the
 * newest revision's chart and values in `spec`, Helm's status and times in `status`. The list
 * leaves out what only the detail page reads (values, defaultValues, manifest, notes, hooks).
 */
export interface HelmReleaseView {
  apiVersion: 'v1';
  kind: 'HelmRelease';
  metadata: { name: string; namespace: string; creationTimestamp?: string; labels?: Record<string, string> };
  spec: {
    releaseName: string;
    namespace: string;
    /** `<chart>-<version>`, as `helm list` prints it. */
    chart: string;
    chartName: string;
    chartVersion: string;
    appVersion: string;
    icon?: string;
    revision: number;
    description: string;
    /** Detail only: the values the user supplied (`helm get values`). */
    values?: Record<string, unknown>;
    /** Detail only: the chart's own values. */
    defaultValues?: Record<string, unknown>;
    manifest?: string;
    notes?: string;
    hooks?: Array<{ name: string; kind: string; events: string[] }>;
  };
  status: { status: string; firstDeployed?: string; lastDeployed?: string; deleted?: string };
}

/** One revision, as Kite's history lists it (and `helm history` prints it). */
export interface HelmReleaseHistoryItem {
  revision: number;
  status: string;
  chart: string;
  chartName: string;
  chartVersion: string;
  appVersion: string;
  description: string;
  firstDeployed?: string;
  lastDeployed?: string;
  deleted?: string;
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const time = (value: unknown) => (typeof value === 'string' && value && !value.startsWith('0001-') ? value : undefined);
const object = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/** One revision's history item. */
export function historyItem(record: HelmReleaseRecord): HelmReleaseHistoryItem {
  const meta = record.chart?.metadata ?? {};
  const chartName = text(meta.name);
  const chartVersion = text(meta.version);
  const times = {
    firstDeployed: time(record.info?.first_deployed),
    lastDeployed: time(record.info?.last_deployed),
    deleted: time(record.info?.deleted),
  };
  return {
    revision: record.version,
    status: text(record.info?.status) || 'unknown',
    chart: chartName && chartVersion ? `${chartName}-${chartVersion}` : chartName,
    chartName,
    chartVersion,
    appVersion: text(meta.appVersion),
    description: text(record.info?.description),
    ...Object.fromEntries(Object.entries(times).filter(([, v]) => v !== undefined)),
  };
}

/** The release view of a revision; `detail` adds values, defaults, manifest, notes and hooks. */
export function releaseView(record: HelmReleaseRecord, detail = false): HelmReleaseView {
  const item = historyItem(record);
  const icon = text(record.chart?.metadata?.icon);
  return {
    apiVersion: 'v1',
    kind: 'HelmRelease',
    metadata: {
      name: record.name,
      namespace: record.namespace,
      ...(item.firstDeployed ? { creationTimestamp: item.firstDeployed } : {}),
    },
    spec: {
      releaseName: record.name,
      namespace: record.namespace,
      chart: item.chart,
      chartName: item.chartName,
      chartVersion: item.chartVersion,
      appVersion: item.appVersion,
      ...(icon ? { icon } : {}),
      revision: record.version,
      description: item.description,
      ...(detail
        ? {
            values: object(record.config),
            defaultValues: object(record.chart?.values),
            manifest: text(record.manifest),
            notes: text(record.info?.notes),
            hooks: (record.hooks ?? [])
              .filter((hook) => typeof hook === 'object' && hook !== null)
              .map((hook) => ({
                name: text(hook.name),
                kind: text(hook.kind),
                events: Array.isArray(hook.events) ? hook.events.filter((e) => typeof e === 'string') : [],
              })),
          }
        : {}),
    },
    status: {
      status: item.status,
      ...(item.firstDeployed ? { firstDeployed: item.firstDeployed } : {}),
      ...(item.lastDeployed ? { lastDeployed: item.lastDeployed } : {}),
      ...(item.deleted ? { deleted: item.deleted } : {}),
    },
  };
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
    if (typeof record !== 'object' || record === null || !Number.isInteger(record.version)) return undefined;
    // Where the Secret is and what its labels say, not what its JSON claims: a Secret in one
    // namespace never shows as a release of another.
    const name = secret.metadata?.labels?.name ?? record.name;
    const namespace = secret.metadata?.namespace ?? record.namespace;
    if (typeof name !== 'string' || typeof namespace !== 'string') return undefined;
    return { ...record, name, namespace, hooks: Array.isArray(record.hooks) ? record.hooks : [] };
  } catch {
    return undefined;
  }
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
async function releaseSecrets(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string | undefined,
  name?: string,
): Promise<KubeObject[]> {
  const labelSelector = name === undefined ? RELEASE_SELECTOR : `${RELEASE_SELECTOR},name=${name}`;
  const { list } = await listObjects(kit, ctx, { resource: 'secrets', namespace, name: undefined }, { labelSelector });
  return list.items ?? [];
}

/**
 * The Secrets of the newest revision of each release, by Helm's `name` and `version` labels, so a
 * list inflates one revision per release, not every revision of every release.
 */
export function newestSecrets(secrets: KubeObject[]): KubeObject[] {
  const newest = new Map<string, { version: number; secret: KubeObject }>();
  for (const secret of secrets) {
    const labels = secret.metadata?.labels ?? {};
    const version = Number(labels.version);
    if (!labels.name || !Number.isInteger(version)) continue;
    const key = `${secret.metadata?.namespace}/${labels.name}`;
    if ((newest.get(key)?.version ?? -1) < version) newest.set(key, { version, secret });
  }
  return [...newest.values()].map((entry) => entry.secret);
}

/** The releases of a namespace or of all, newest revision of each. */
export async function listReleases(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string | undefined,
): Promise<HelmReleaseView[]> {
  const secrets = newestSecrets(await releaseSecrets(kit, ctx, namespace));
  return newestRevisions(secrets.flatMap((secret) => decodeReleaseSecret(secret) ?? [])).map((r) => releaseView(r));
}

/** Every revision of a release, oldest first; 404 when it has none. */
export async function releaseHistory(
  kit: ReadKit,
  ctx: CallerContext,
  namespace: string,
  name: string,
): Promise<HelmReleaseRecord[]> {
  const records = (await releaseSecrets(kit, ctx, namespace, name))
    .flatMap((secret) => decodeReleaseSecret(secret) ?? [])
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
