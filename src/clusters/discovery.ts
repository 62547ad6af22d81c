// A target cluster's discovery: which resources it serves, in which group and version, namespaced
// or not. Built from /api, /apis and each group-version's resource list; a group-version that
// fails (an aggregated API whose backend is down) is skipped without breaking the others.
// Resolution follows kubectl: a bare plural goes to the core group first, then built-in groups
// (no '.' in the name, or *.k8s.io), then the rest, in the API server's priority order, and to
// the group's preferred version; "<plural>.<group>" resolves within that group.
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

/** Fetches a discovery path and returns its parsed JSON; throws on failure. */
export type DiscoveryGetter = (path: string) => Promise<unknown>;

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

/** Reads a cluster's whole discovery through get(); only /api and /apis failing is fatal. */
export async function loadDiscovery(get: DiscoveryGetter): Promise<DiscoverySnapshot> {
  const [core, apis] = await Promise.all([get('/api'), get('/apis')]);
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
        const list = asObject(await get(path));
        const items = ((list.resources as unknown[] | undefined) ?? []).map(asObject);
        resources.set(
          key,
          items
            .filter((r) => typeof r.name === 'string' && typeof r.kind === 'string')
            .map((r) => ({
              name: r.name as string,
              kind: r.kind as string,
              namespaced: r.namespaced === true,
              verbs: internedVerbs(
                Array.isArray(r.verbs) ? (r.verbs as unknown[]).filter((v): v is string => typeof v === 'string') : [],
              ),
            })),
        );
      } catch {
        failed.push(key);
      }
    }),
  );
  return { index: new DiscoveryIndex(groups, resources), failed: failed.sort() };
}
