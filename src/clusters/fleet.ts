// Which replica holds which cluster. Every replica computes the same answer from the live members
// (host/replicas.ts) with rendezvous hashing: a cluster goes to the member whose hash of
// (member, cluster) is highest, so a member that joins takes about 1/N of the clusters from the
// others and one that leaves hands only its own to the rest; nothing else moves. The holder keeps
// the cluster's warm connection (probe, discovery, pools); the others reach it through the
// holder's internal hop (remote-connection.ts, gateway/routes/fleet-hop.ts), signed with a key
// every replica derives from the shared session key.
// A replica that cannot reach a peer's hop suspects it: it hands that peer's clusters to the next
// in line (as every replica will once the peer's Lease expires) until the peer renews again.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Pool } from 'undici';
import type { Replica, ReplicaLeases } from '../host/replicas.js';
import { LEASE_SECONDS } from '../host/replicas.js';

/** The request header that carries a hop's signature. */
export const HOP_HEADER = 'x-kiteline-hop';
/** The path prefix of the internal hop. */
export const HOP_PREFIX = '/internal/fleet/';
/** A signature is good for this long (it names the method and path it was made for). */
const HOP_VALID_MS = 60_000;
/** How long requests in flight to a replica that left may go on (a watch then ends; its client watches again). */
const DEPARTED_POOL_GRACE_MS = 30_000;
/** A peer whose hop refused a connection is passed over for this long, unless its Lease moves first. */
const SUSPECT_MS = LEASE_SECONDS * 1000 + 2_000;

/** Emits 'change' when the holders of clusters may have changed (members joined, left, suspected). */
export class Fleet extends EventEmitter {
  private readonly pools = new Map<string, Pool>();
  private readonly suspects = new Map<string, number>();
  private key: (() => Buffer) | undefined;
  private hopKey: { from: Buffer; key: Buffer } | undefined;
  private readonly usedNonces = new Map<string, number>();
  private noncesPrunedAt = 0;

  constructor(private readonly leases: ReplicaLeases) {
    super();
    leases.on('change', (members: Replica[]) => {
      const addresses = new Set(members.map((m) => m.address));
      for (const [address, pool] of this.pools) {
        if (addresses.has(address)) continue;
        // A replica that left: its requests in flight finish (it serves them while it stops).
        this.pools.delete(address);
        void pool.close().catch(() => undefined);
        setTimeout(() => void pool.destroy().catch(() => undefined), DEPARTED_POOL_GRACE_MS).unref();
      }
      for (const identity of this.suspects.keys())
        if (!members.some((m) => m.identity === identity)) this.suspects.delete(identity);
      this.emit('change');
    });
  }

  get identity(): string {
    return this.leases.identity;
  }

  /** The key source the hop's signatures derive from (the session key: every replica has it). */
  useKey(key: () => Buffer): void {
    this.key = key;
  }

  /** Live members minus suspects; this replica always counts. */
  members(): Replica[] {
    const now = Date.now();
    const all = this.leases.members();
    const usable = all.filter((m) => m.identity === this.identity || !((this.suspects.get(m.identity) ?? 0) > now));
    return usable.length > 0 ? usable : [{ identity: this.identity, address: '' }];
  }

  /** The replica that holds a Cluster object (by its metadata.name). */
  holderOf(objectName: string, members: Replica[] = this.members()): Replica {
    let best = members[0];
    let bestScore = -1n;
    for (const member of members) {
      const score = createHash('sha256')
        .update(member.identity)
        .update('\n')
        .update(objectName)
        .digest()
        .readBigUInt64BE();
      if (score > bestScore) [best, bestScore] = [member, score];
    }
    return best;
  }

  holds(objectName: string): boolean {
    return this.holderOf(objectName).identity === this.identity;
  }

  /** A peer's hop did not answer: pass it over until its Lease shows it alive (or SUSPECT_MS). */
  suspect(identity: string): void {
    if (identity === this.identity || (this.suspects.get(identity) ?? 0) > Date.now()) return;
    this.suspects.set(identity, Date.now() + SUSPECT_MS);
    setTimeout(() => this.emit('change'), SUSPECT_MS + 10).unref();
    this.emit('change');
  }

  /** The replicas suspected now (their identities). */
  suspected(): string[] {
    const now = Date.now();
    return [...this.suspects].filter(([, until]) => until > now).map(([identity]) => identity);
  }

  /** The keep-alive pool to a peer's hop (one per peer, shared by all its clusters). */
  pool(address: string): Pool {
    let pool = this.pools.get(address);
    if (!pool) {
      pool = new Pool(address, { connections: null, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
      this.pools.set(address, pool);
    }
    return pool;
  }

  private derivedKey(): Buffer {
    if (!this.key) throw new Error('the fleet has no key (Fleet.useKey not called)');
    const from = this.key();
    if (this.hopKey?.from !== from)
      this.hopKey = { from, key: createHmac('sha256', from).update('kiteline internal hop v1').digest() };
    return this.hopKey.key;
  }

  /**
   * The hop header for one request: who sends it, a nonce, until when, and a MAC over those, the
   * method, the path and the headers that say as whom and how it runs (Impersonate-*, the hop's
   * options). A header captured on the network is good for no other request, and only once.
   */
  sign(method: string, path: string, headers: Record<string, string | string[] | undefined>): string {
    const expires = Date.now() + HOP_VALID_MS;
    const sender = Buffer.from(this.identity).toString('base64url');
    const nonce = randomBytes(12).toString('base64url');
    return `${sender}.${nonce}.${expires}.${this.mac([sender, nonce, expires, method, path], headers)}`;
  }

  /** Whether a hop header is good for this request (made by a replica for it, not expired, not seen before). */
  verify(
    header: string | string[] | undefined,
    method: string,
    path: string,
    headers: Record<string, string | string[] | undefined>,
  ): boolean {
    if (typeof header !== 'string') return false;
    const [sender, nonce, expiresText, mac] = header.split('.');
    const expires = Number(expiresText);
    if (!sender || !nonce || !mac || !Number.isSafeInteger(expires)) return false;
    const now = Date.now();
    if (expires < now || expires > now + 2 * HOP_VALID_MS) return false;
    const expected = Buffer.from(this.mac([sender, nonce, expires, method, path], headers));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    return this.firstUse(nonce, expires);
  }

  /** A signature's nonce is taken once; kept until the signature expires. */
  private firstUse(nonce: string, expires: number): boolean {
    if (this.usedNonces.has(nonce)) return false;
    const now = Date.now();
    if (now - this.noncesPrunedAt > 1_000) {
      this.noncesPrunedAt = now;
      for (const [seen, until] of this.usedNonces) if (until < now) this.usedNonces.delete(seen);
    }
    this.usedNonces.set(nonce, expires);
    return true;
  }

  private mac(
    [sender, nonce, expires, method, path]: [string, string, number, string, string],
    headers: Record<string, string | string[] | undefined>,
  ): string {
    const hmac = createHmac('sha256', this.derivedKey()).update(
      `${sender}\n${nonce}\n${expires}\n${method.toUpperCase()}\n${path}`,
    );
    for (const [name, values] of boundHeaders(headers)) hmac.update(`\n${name}:${values.join('\0')}`);
    return hmac.digest('base64url');
  }

  close(): void {
    for (const pool of this.pools.values()) void pool.destroy().catch(() => undefined);
    this.pools.clear();
  }
}

/**
 * The headers a hop's signature covers, by name: Impersonate-* (as whom the cluster request runs)
 * and the hop's own options (how it runs, whom the sender suspects), each with all its values.
 */
function boundHeaders(headers: Record<string, string | string[] | undefined>): Array<[string, string[]]> {
  const bound: Array<[string, string[]]> = [];
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value === undefined || lower === HOP_HEADER) continue;
    if (lower.startsWith('impersonate-') || lower.startsWith('x-kiteline-hop-'))
      bound.push([lower, (Array.isArray(value) ? value : [value]).map(String)]);
  }
  return bound.sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
}
