// A target cluster's discovery: which resources it serves, in which group and version, namespaced
// or not. Built from the aggregated /api and /apis documents, or on a server without them from
// /api, /apis and each group-version's resource list; a group-version that fails (an aggregated
// API whose backend is down) is skipped without breaking the others.
// Resolution follows kubectl: a bare plural goes to the core group first, then built-in groups
// (no '.' in the name, or *.k8s.io), then the rest, in the API server's priority order, and to
// the group's preferred version; "<plural>.<group>" resolves within that group.
import { createHash } from 'node:crypto';
import type { ResolvedResource } from './types.js';

/** One API group as /apis lists it: versions in priority order (preferred first). */
export interface DiscoveredGroup {
  name: string; // "" for core
  versions: string[];
}

/** An APIResourceList entry (the members used here). */
export interface DiscoveredResource {
  name: string;
  kind: string;
  namespaced: boolean;
  verbs?: string[];
}

/**
 * Fetches a discovery path (with this Accept header) and returns its body, as text or already
 * parsed; throws on failure. Text lets clusters with the same discovery share one snapshot.
 */
export type DiscoveryGetter = (path: string, accept: string) => Promise<unknown>;

/**
 * Snapshots by the sha256 of their two aggregated documents, held weakly: clusters of one version
 * with the same CRDs (most of a fleet) share one index instead of one each, and a document seen
 * before is not parsed again. A hostile cluster gains nothing: equal bytes give an equal index.
 */
const sharedSnapshots = new Map<string, WeakRef<DiscoverySnapshot>>();
const forgetSnapshot = new FinalizationRegistry<string>((key) => {
  if (sharedSnapshots.get(key)?.deref() === undefined) sharedSnapshots.delete(key);
});

function parsed(body: unknown): unknown {
  if (typeof body !== 'string') return body;
  try {
    return JSON.parse(body);
  } catch {
    throw new Error('discovery answered something that is not JSON');
  }
}

/**
 * Aggregated discovery (KEP-3352, GA in 1.30): /api and /apis answer every group, version and
 * resource in one document each, instead of one request per group-version. Older servers answer
 * the plain APIVersions and APIGroupList to the same request, and the per-group-version lists
 * are read as before.
 */
const AGGREGATED = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json';

export interface DiscoverySnapshot {
  index: DiscoveryIndex;
  /** group/version pairs whose resource list could not be read. */
  failed: string[];
}

function tier(group: string): number {
  if (group === '') return 0;
  if (!group.includes('.') || group.endsWith('.k8s.io')) return 1;
  return 2;
}

/** The resolvable view of one cluster's discovery. */
export class DiscoveryIndex {
  private readonly byGroup = new Map<string, Map<string, ResolvedResource>>();
  private readonly byPlural = new Map<string, ResolvedResource>();

  /**
   * groups: in the API server's order (core first); resources: "group/version" (or "v1" for
   * core) → that group-version's resources, absent when it failed.
   */
  constructor(groups: DiscoveredGroup[], resources: Map<string, DiscoveredResource[]>) {
    const ordered = groups
      .map((g, position) => ({ g, position }))
      .sort((a, b) => tier(a.g.name) - tier(b.g.name) || a.position - b.position);
    for (const { g } of ordered) {
      const inGroup = new Map<string, ResolvedResource>();
      for (const version of g.versions) {
        const list = resources.get(g.name === '' ? version : `${g.name}/${version}`);
        for (const r of list ?? []) {
          if (!r.name || r.name.includes('/') || inGroup.has(r.name)) continue;
          inGroup.set(r.name, {
            group: g.name,
            version,
            resource: r.name,
            kind: r.kind,
            namespaced: !!r.namespaced,
            verbs: r.verbs ?? [],
          });
        }
      }
      this.byGroup.set(g.name, inGroup);
      for (const [plural, resolved] of inGroup) {
        if (!this.byPlural.has(plural)) this.byPlural.set(plural, resolved);
      }
    }
  }

  /** "deployments" or "certificates.cert-manager.io" → the resource, or undefined. */
  resolve(segment: string): ResolvedResource | undefined {
    const direct = this.byPlural.get(segment);
    if (direct) return direct;
    const dot = segment.indexOf('.');
    if (dot <= 0) return undefined;
    return this.byGroup.get(segment.slice(dot + 1))?.get(segment.slice(0, dot));
  }

  get size(): number {
    return this.byPlural.size;
  }
}

/**
 * Verb lists shared by every resource and cluster that has the same one (a few dozen distinct
 * lists exist), instead of one array per resource per cluster.
 */
const verbLists = new Map<string, string[]>();
function internedVerbs(verbs: string[]): string[] {
  const key = verbs.join(' ');
  let shared = verbLists.get(key);
  if (!shared) {
    if (verbLists.size >= MAX_VERB_LISTS) return verbs;
    shared = Object.freeze(verbs) as string[];
    verbLists.set(key, shared);
  }
  return shared;
}
/** A hostile cluster cannot grow the shared verb lists past this. */
const MAX_VERB_LISTS = 1024;

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

/** A resource entry's verbs, as strings, shared (internedVerbs). */
function verbsOf(r: Record<string, unknown>): string[] {
  return internedVerbs(
    Array.isArray(r.verbs) ? (r.verbs as unknown[]).filter((v): v is string => typeof v === 'string') : [],
  );
}

/** The snapshot of two APIGroupDiscoveryList documents (/api and /apis); a stale group-version counts as failed. */
function fromAggregated(core: unknown, apis: unknown): DiscoverySnapshot {
  const groups: DiscoveredGroup[] = [];
  const resources = new Map<string, DiscoveredResource[]>();
  const failed: string[] = [];
  for (const [document, isCore] of [
    [core, true],
    [apis, false],
  ] as const) {
    for (const raw of (asObject(document).items as unknown[] | undefined) ?? []) {
      const g = asObject(raw);
      // The core group's name is "" and so left out of its metadata.
      const given = asObject(g.metadata).name;
      const name = typeof given === 'string' ? given : '';
      if ((name === '') !== isCore) continue;
      const versions: string[] = [];
      for (const rawVersion of (g.versions as unknown[] | undefined) ?? []) {
        const v = asObject(rawVersion);
        if (typeof v.version !== 'string') continue;
        versions.push(v.version);
        const key = name === '' ? v.version : `${name}/${v.version}`;
        if (v.freshness === 'Stale') {
          failed.push(key);
          continue;
        }
        const list = ((v.resources as unknown[] | undefined) ?? []).map(asObject);
        resources.set(
          key,
          list
            .filter((r) => typeof r.resource === 'string' && typeof asObject(r.responseKind).kind === 'string')
            .map((r) => ({
              name: r.resource as string,
              kind: asObject(r.responseKind).kind as string,
              namespaced: r.scope === 'Namespaced',
              verbs: verbsOf(r),
            })),
        );
      }
      groups.push({ name, versions });
    }
  }
  if (!groups.some((g) => g.name === '')) groups.unshift({ name: '', versions: ['v1'] });
  return { index: new DiscoveryIndex(groups, resources), failed: failed.sort() };
}

/** Reads a cluster's whole discovery through get(); only /api and /apis failing is fatal. */
export async function loadDiscovery(get: DiscoveryGetter): Promise<DiscoverySnapshot> {
  const [coreBody, apisBody] = await Promise.all([get('/api', AGGREGATED), get('/apis', AGGREGATED)]);
  const key =
    typeof coreBody === 'string' && typeof apisBody === 'string'
      ? createHash('sha256').update(coreBody).update('\0').update(apisBody).digest('base64url')
      : undefined;
  const known = key === undefined ? undefined : sharedSnapshots.get(key)?.deref();
  if (known) return known;
  const [core, apis] = [parsed(coreBody), parsed(apisBody)];
  const aggregated = (doc: unknown) => asObject(doc).kind === 'APIGroupDiscoveryList';
  if (aggregated(core) && aggregated(apis)) {
    const snapshot = fromAggregated(core, apis);
    if (key !== undefined) {
      sharedSnapshots.set(key, new WeakRef(snapshot));
      forgetSnapshot.register(snapshot, key);
    }
    return snapshot;
  }
  const groups: DiscoveredGroup[] = [];
  const coreVersions = (asObject(core).versions as unknown[] | undefined)?.filter(
    (v): v is string => typeof v === 'string',
  ) ?? ['v1'];
  groups.push({ name: '', versions: coreVersions });
  for (const raw of (asObject(apis).groups as unknown[] | undefined) ?? []) {
    const g = asObject(raw);
    if (typeof g.name !== 'string' || g.name === '') continue;
    const listed = ((g.versions as unknown[] | undefined) ?? [])
      .map((v) => asObject(v).version)
      .filter((v): v is string => typeof v === 'string');
    const preferred = asObject(g.preferredVersion).version;
    const versions = typeof preferred === 'string' ? [preferred, ...listed.filter((v) => v !== preferred)] : listed;
    groups.push({ name: g.name, versions });
  }

  const paths = groups.flatMap((g) =>
    g.versions.map((v) =>
      g.name === '' ? { key: v, path: `/api/${v}` } : { key: `${g.name}/${v}`, path: `/apis/${g.name}/${v}` },
    ),
  );
  const resources = new Map<string, DiscoveredResource[]>();
  const failed: string[] = [];
  await Promise.all(
    paths.map(async ({ key, path }) => {
      try {
        const list = asObject(parsed(await get(path, 'application/json')));
        const items = ((list.resources as unknown[] | undefined) ?? []).map(asObject);
        resources.set(
          key,
          items
            .filter((r) => typeof r.name === 'string' && typeof r.kind === 'string')
            .map((r) => ({
              name: r.name as string,
              kind: r.kind as string,
              namespaced: r.namespaced === true,
              verbs: verbsOf(r),
            })),
        );
      } catch {
        failed.push(key);
      }
    }),
  );
  return { index: new DiscoveryIndex(groups, resources), failed: failed.sort() };
}
