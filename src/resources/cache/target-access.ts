// The target cluster's own decision on a cached read, without asking it on every request: a
// SelfSubjectAccessReview sent as the impersonated caller (the same Impersonate-User and -Group
// headers its pass-through read would carry, so the answer is the target's RBAC, webhook or any
// other authorizer on exactly that identity), kept for a few seconds, and forgotten at once when
// any Role, ClusterRole, RoleBinding or ClusterRoleBinding of the cluster changes (four watches
// per cluster, opened when its first cached read is authorized). Until those watches run, or when
// a review fails, the answer is "unsure" and the read goes to the cluster.
//
// A get is first asked without its name: allowed for every name of the namespace means allowed
// for this one (a rule naming objects never allows a request without a name), so a dashboard
// reading many objects costs one review per namespace, not one per object.
import type { ClusterConnection, ResolvedResource } from '../../clusters/types.js';
import type { UpstreamHeaders } from '../../cluster-access/impersonation.js';
import { readJson } from '../../cluster-access/upstream.js';
import { streamLines } from '../../cluster-access/stream-lines.js';
import type { Logger } from '../../log.js';

const RBAC_RESOURCES = ['roles', 'rolebindings', 'clusterroles', 'clusterrolebindings'];
const MAX_DECISIONS = 10_000;
const WATCH_SECONDS = 300;
const RETRY_MS = 1000;
/** After an RBAC change, decisions are asked again but not kept for this long. */
const SETTLE_MS = 2000;

/** What a read asks the target. */
export interface ReadAttributes {
  verb: 'get' | 'list';
  resolved: ResolvedResource;
  namespace: string | undefined;
  name: string | undefined;
}

interface Decision {
  allowed: boolean;
  expiresAt: number;
}

/** One cluster's decisions and the watches that forget them. */
class ClusterDecisions {
  readonly decisions = new Map<string, Decision>();
  /** RBAC watches running (all four): only then are decisions kept. */
  watching = 0;
  /** Bumped each time every decision is forgotten (a decision asked before is not kept). */
  generation = 0;
  private forgotAt = 0;
  private readonly controller = new AbortController();

  constructor(
    readonly conn: ClusterConnection,
    private readonly log: Logger,
  ) {
    for (const resource of RBAC_RESOURCES) void this.watchLoop(resource);
  }

  get trusted(): boolean {
    return this.watching === RBAC_RESOURCES.length;
  }

  stop(): void {
    this.controller.abort();
    this.forgetAll();
  }

  forgetAll(): void {
    this.decisions.clear();
    this.generation++;
    this.forgotAt = Date.now();
  }

  /**
   * Whether a decision made now may be kept: not in the moments after an RBAC change, when the
   * target's own authorizer (it reads RBAC from a cache of its own) may not have seen it yet.
   */
  get settled(): boolean {
    return this.trusted && Date.now() - this.forgotAt > SETTLE_MS;
  }

  /** Lists (for the resourceVersion), then watches: any change forgets every decision. */
  private async watchLoop(resource: string): Promise<void> {
    const path = `/apis/rbac.authorization.k8s.io/v1/${resource}`;
    const signal = this.controller.signal;
    while (!signal.aborted) {
      let counted = false;
      try {
        const list = await readJson<{ metadata?: { resourceVersion?: string } }>(
          await this.conn.request({ method: 'GET', path: `${path}?limit=1`, headers: JSON_ACCEPT, signal }),
        );
        let rv = list.metadata?.resourceVersion ?? '';
        for (;;) {
          const search = new URLSearchParams({
            watch: 'true',
            allowWatchBookmarks: 'true',
            resourceVersion: rv,
            timeoutSeconds: String(WATCH_SECONDS),
          });
          const res = await this.conn.request({
            method: 'GET',
            path: `${path}?${search}`,
            headers: JSON_ACCEPT,
            signal,
            longRunning: true,
          });
          if (res.statusCode !== 200) {
            res.resume();
            break;
          }
          if (!counted) {
            counted = true;
            this.watching++;
          }
          let broken = false;
          for await (const line of streamLines(res, 1024 * 1024)) {
            const event = JSON.parse(line) as { type?: string; object?: { metadata?: { resourceVersion?: string } } };
            if (event.type === 'ERROR') {
              broken = true;
              break;
            }
            rv = event.object?.metadata?.resourceVersion ?? rv;
            if (event.type !== 'BOOKMARK') this.forgetAll();
          }
          if (broken) {
            res.destroy();
            break;
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        this.log.debug({ err, cluster: this.conn.name, resource }, 'RBAC watch for cached reads broke');
      }
      // A gap in the watch: what was decided during it may be out of date.
      if (counted) this.watching--;
      this.forgetAll();
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

const JSON_ACCEPT = { accept: 'application/json' };

export class TargetAccess {
  private readonly clusters = new Map<string, ClusterDecisions>();

  constructor(
    private readonly ttlMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Whether the target allows the impersonated caller this read: true, false, or undefined when
   * kiteline cannot tell yet (its RBAC watches are not running, or the review failed).
   */
  async allows(
    conn: ClusterConnection,
    impersonation: UpstreamHeaders,
    read: ReadAttributes,
    signal: AbortSignal,
  ): Promise<boolean | undefined> {
    // Without impersonation every read of the cluster is kiteline's own: its roles alone decide.
    if (!conn.impersonate) return true;
    const cluster = this.cluster(conn);
    if (!cluster.trusted) return undefined;
    const who = JSON.stringify(impersonation);
    const broad = await this.decide(cluster, who, impersonation, { ...read, name: undefined }, signal);
    if (broad !== false || read.name === undefined) return broad;
    return this.decide(cluster, who, impersonation, read, signal);
  }

  /** Forgets a cluster (it was removed or its connection replaced). */
  forget(conn: ClusterConnection): void {
    const cluster = this.clusters.get(conn.name);
    if (cluster?.conn !== conn) return;
    cluster.stop();
    this.clusters.delete(conn.name);
  }

  /** Stops the RBAC watches of every cluster but these (the ones with a cache left). */
  retainOnly(live: ReadonlySet<ClusterConnection>): void {
    for (const [name, cluster] of this.clusters) {
      if (live.has(cluster.conn)) continue;
      cluster.stop();
      this.clusters.delete(name);
    }
  }

  close(): void {
    for (const cluster of this.clusters.values()) cluster.stop();
    this.clusters.clear();
  }

  private cluster(conn: ClusterConnection): ClusterDecisions {
    let cluster = this.clusters.get(conn.name);
    if (cluster && cluster.conn !== conn) {
      cluster.stop();
      cluster = undefined;
    }
    if (!cluster) {
      cluster = new ClusterDecisions(conn, this.log);
      this.clusters.set(conn.name, cluster);
    }
    return cluster;
  }

  private async decide(
    cluster: ClusterDecisions,
    who: string,
    impersonation: UpstreamHeaders,
    read: ReadAttributes,
    signal: AbortSignal,
  ): Promise<boolean | undefined> {
    const { verb, resolved, namespace, name } = read;
    const key = [who, verb, resolved.group, resolved.resource, namespace ?? '', name ?? ''].join('\0');
    const now = Date.now();
    const known = cluster.decisions.get(key);
    if (known && known.expiresAt > now) return known.allowed;
    const generation = cluster.generation;
    let allowed: boolean;
    try {
      const review = await readJson<{ status?: { allowed?: boolean } }>(
        await cluster.conn.request({
          method: 'POST',
          path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
          headers: { ...JSON_ACCEPT, 'content-type': 'application/json', ...impersonation },
          body: JSON.stringify({
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: {
              resourceAttributes: {
                verb,
                group: resolved.group,
                version: resolved.version,
                resource: resolved.resource,
                ...(namespace ? { namespace } : {}),
                ...(name ? { name } : {}),
              },
            },
          }),
          signal,
        }),
      );
      allowed = review.status?.allowed === true;
    } catch {
      return undefined;
    }
    // Kept only while the watches ran the whole time (a change meanwhile cleared the map).
    if (cluster.settled && cluster.generation === generation) {
      if (cluster.decisions.size >= MAX_DECISIONS) cluster.decisions.clear();
      cluster.decisions.set(key, { allowed, expiresAt: now + this.ttlMs });
    }
    return allowed;
  }
}
