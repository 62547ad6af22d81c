// Which resource an object's apiVersion and kind name on a cluster: read from the cluster's
// discovery document of exactly that group-version (/api/v1, /apis/<group>/<version>), so a
// document written for autoscaling/v1 goes to autoscaling/v1 even when the cached discovery
// prefers v2, and a custom resource is found by its kind whatever its plural (never a guessed
// `kind + "s"`). One answer per group-version is kept for the request; forget() drops one after
// a CRD for it was created. Discovery documents are public to any authenticated client, so they
// are read with kiteline's own credentials.
import type { ResolvedResource } from '../clusters/types.js';
import { HttpError } from '../errors.js';
import type { DiscoveredResource } from '../clusters/discovery.js';
import { getJson, type ToolContext } from '../cluster-access/calls.js';

/** "apps/v1" → {group: "apps", version: "v1"}; "v1" → core. Undefined for a malformed string. */
export function splitApiVersion(apiVersion: string): { group: string; version: string } | undefined {
  const parts = apiVersion.split('/');
  const ok = (s: string | undefined) => !!s && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(s) && s.length <= 253;
  if (parts.length === 1 && ok(parts[0])) return { group: '', version: parts[0] };
  if (parts.length === 2 && ok(parts[0]) && ok(parts[1])) return { group: parts[0], version: parts[1] };
  return undefined;
}

export class KindResolver {
  private readonly lists = new Map<string, Promise<DiscoveredResource[] | undefined>>();

  constructor(private readonly ctx: ToolContext) {}

  /** The resource serving `kind` in `apiVersion`, or undefined when the cluster does not serve it. */
  async resolve(apiVersion: string, kind: string): Promise<ResolvedResource | undefined> {
    const gv = splitApiVersion(apiVersion);
    if (!gv) return undefined;
    const list = await this.resources(apiVersion, gv);
    const found = list?.find((r) => r.kind === kind && !r.name.includes('/'));
    if (!found) return undefined;
    return {
      group: gv.group,
      version: gv.version,
      resource: found.name,
      kind: found.kind,
      namespaced: found.namespaced,
      verbs: found.verbs ?? [],
    };
  }

  /** Drops what is known of a group-version (a CRD for it was just created). */
  forget(apiVersion: string): void {
    this.lists.delete(apiVersion);
  }

  private resources(
    apiVersion: string,
    gv: { group: string; version: string },
  ): Promise<DiscoveredResource[] | undefined> {
    let known = this.lists.get(apiVersion);
    if (!known) {
      const path =
        gv.group === ''
          ? `/api/${encodeURIComponent(gv.version)}`
          : `/apis/${encodeURIComponent(gv.group)}/${encodeURIComponent(gv.version)}`;
      known = getJson<{ resources?: DiscoveredResource[] }>(this.ctx, path, {}).then(
        (list) => (Array.isArray(list.resources) ? list.resources : []),
        (err) => {
          if (err instanceof HttpError && err.status === 404) return undefined;
          throw err;
        },
      );
      this.lists.set(apiVersion, known);
    }
    return known;
  }
}
