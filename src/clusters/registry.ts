// The ClusterDirectory of this replica: its connections (warm ones for the clusters it holds,
// remote ones through their holder for the rest: fleet.ts), indexed by the name clients use.
// Only enabled clusters with a usable kubeconfig have a connection. When two Cluster objects
// claim one name (through kubectl, a rename race, or a cluster source), one serves it and the
// other is reported as a name conflict in its status (both objects' statuses name the other): a
// cluster registered through the API or kubectl wins over one from a source (the name was chosen
// there by a person), then the lower id.
// A miss (lookUp) waits for the start-up's connections, then asks the API server whether the
// cluster is one the watch has not brought yet.
import { pickDefault } from '../host/clusters.js';
import type { WarmConnection } from './connection.js';
import type { RemoteConnection } from './remote-connection.js';
import type { ClusterDirectory, UpstreamObserver } from './types.js';
import { within } from '../within.js';

/** A cluster's connection on this replica: warm when it holds the cluster, else through the holder. */
export type RegisteredConnection = WarmConnection | RemoteConnection;

/** How long a lookup waits for a replica that just started to connect its clusters. */
const STARTUP_WAIT_MS = 10_000;

export class ClusterRegistry implements ClusterDirectory {
  private readonly byObject = new Map<string, RegisteredConnection>();
  private byName = new Map<string, RegisteredConnection>();
  private upstreamObserver: UpstreamObserver | undefined;
  private markCaughtUp: () => void = () => undefined;
  private readonly startup = new Promise<void>((resolve) => (this.markCaughtUp = resolve));
  /** Finds a cluster the host has under a name and this replica has not connected yet (ClusterManager). */
  private unseen: ((name: string) => Promise<RegisteredConnection | undefined>) | undefined;

  /** The reconciler has built the connections of every Cluster the host cache held at start-up. */
  startupDone(): void {
    this.markCaughtUp();
  }

  findUnseenWith(find: (name: string) => Promise<RegisteredConnection | undefined>): void {
    this.unseen = find;
  }

  async lookUp(name: string | undefined): Promise<RegisteredConnection | undefined> {
    await within(this.startup, STARTUP_WAIT_MS);
    const known = name === undefined ? this.defaultCluster() : this.get(name);
    if (known || name === undefined) return known;
    // The one serving the name (a connection just built may lose it to an older claimant).
    return (await this.unseen?.(name)) ? this.get(name) : undefined;
  }

  /** Hands an observer of upstream requests (metrics) to every connection, now and later. */
  observeUpstream(observer: UpstreamObserver): void {
    this.upstreamObserver = observer;
    for (const conn of this.byObject.values()) conn.upstreamObserver = observer;
  }

  get(name: string): RegisteredConnection | undefined {
    return this.byName.get(name);
  }

  /** The connection of one Cluster object (its metadata.name), served or shadowed. */
  forObject(objectName: string): RegisteredConnection | undefined {
    return this.byObject.get(objectName);
  }

  /** True when this object's connection is the one answering for its name. */
  isServing(objectName: string): boolean {
    const conn = this.byObject.get(objectName);
    return !!conn && this.byName.get(conn.name) === conn;
  }

  /** The default cluster: when two claim it (for a moment), the one preferDefault picks. */
  defaultCluster(): RegisteredConnection | undefined {
    return pickDefault(this.byName.values(), (conn) => conn.meta);
  }

  list(): RegisteredConnection[] {
    return [...this.byName.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Adds or replaces the connection of an object; returns the one it replaced. */
  set(conn: RegisteredConnection): RegisteredConnection | undefined {
    const previous = this.byObject.get(conn.meta.objectName);
    conn.upstreamObserver = this.upstreamObserver;
    this.byObject.set(conn.meta.objectName, conn);
    // Most often the name's only claimant (a new cluster, a connection replaced): no rebuild of the
    // whole index, which a start-up with thousands of clusters would do thousands of times.
    const serving = this.byName.get(conn.name);
    if ((!previous || previous.name === conn.name) && (!serving || serving === previous))
      this.byName.set(conn.name, conn);
    else this.reindex();
    return previous === conn ? undefined : previous;
  }

  remove(objectName: string): RegisteredConnection | undefined {
    const previous = this.byObject.get(objectName);
    this.byObject.delete(objectName);
    this.reindex();
    return previous;
  }

  /** Rebuilds the name index (after a connection's name or id changed). */
  reindex(): void {
    const next = new Map<string, RegisteredConnection>();
    const ordered = [...this.byObject.values()].sort(servesFirst);
    for (const conn of ordered) {
      if (!next.has(conn.name)) next.set(conn.name, conn);
    }
    this.byName = next;
  }

  objects(): string[] {
    return [...this.byObject.keys()];
  }

  closeAll(): void {
    for (const conn of this.byObject.values()) conn.close();
    this.byObject.clear();
    this.byName.clear();
  }
}

/** Which of two connections claiming one name serves it: not from a source first, then the lower id. */
export function servesFirst(
  a: { id: number; meta: { objectName: string; source?: unknown } },
  b: { id: number; meta: { objectName: string; source?: unknown } },
): number {
  return (
    Number(a.meta.source !== undefined) - Number(b.meta.source !== undefined) ||
    (a.id || Infinity) - (b.id || Infinity) ||
    a.meta.objectName.localeCompare(b.meta.objectName)
  );
}
