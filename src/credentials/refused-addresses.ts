// The addresses kiteline never connects to for a cluster: link-local (169.254.0.0/16, fe80::/10)
// and the cloud metadata endpoints (AWS's fd00:ec2::254, Alibaba's 100.100.100.200). No API server
// lives there, but the node's metadata service does, with the node's cloud credentials; and a
// cluster's server is chosen by whoever registers it, which with cluster sources is not
// necessarily an admin (docs/clusters.md). Checked twice: the URL when a kubeconfig is accepted
// (every spelling the URL parser leaves: it already turns decimal, octal and hex IPv4 into dotted
// quads, and IPv6 into its short form), and each address a host name resolves to when a
// connection opens (guardedLookup), so a name, or a name whose DNS answer changes later, cannot go
// where the URL could not.
// Registries named in an image (GET /api/v1/image/tags) are chosen by any signed-in user, so they
// get a wider rule: no address outside the public internet (internalAddress), unless an admin lists
// the registry (config.ts, imageRegistries).
import { lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** An IPv4 prefix refused, as a base address and prefix length. */
const REFUSED_IPV4: Array<[string, number]> = [
  ['169.254.0.0', 16], // link-local: AWS, GCP, Azure, OCI metadata (169.254.169.254), ECS (169.254.170.2)
  ['100.100.100.200', 32], // Alibaba Cloud metadata
];

/**
 * Where an IPv6 address carries an IPv4 one in its low 32 bits: a connection to it reaches the
 * IPv4 address (mapped: this very host's IPv4 stack; the others through a translator).
 * BlockList already checks IPv4-mapped (::ffff:0:0/96) addresses against the IPv4 rules.
 */
const IPV4_IN_LOW_BITS = [
  '::ffff:0:', // IPv4-translated (SIIT, RFC 2765)
  '::', // IPv4-compatible (deprecated, still parsed)
  '64:ff9b::', // NAT64 well-known prefix (RFC 6052)
];

/** Adds IPv4 prefixes to a list, with every IPv6 spelling that reaches them. */
function addIpv4(list: BlockList, prefixes: Array<[string, number]>): void {
  for (const [address, prefix] of prefixes) {
    list.addSubnet(address, prefix, 'ipv4');
    const [a, b, c, d] = address.split('.').map(Number) as [number, number, number, number];
    const high = ((a << 8) | b).toString(16);
    const low = ((c << 8) | d).toString(16);
    for (const embedding of IPV4_IN_LOW_BITS) list.addSubnet(`${embedding}${high}:${low}`, 96 + prefix, 'ipv6');
    // 6to4 (2002::/16) carries the IPv4 address in bits 16 to 47.
    list.addSubnet(`2002:${high}:${low}::`, 16 + prefix, 'ipv6');
  }
}

const refused = new BlockList();
addIpv4(refused, REFUSED_IPV4);
refused.addSubnet('fe80::', 10, 'ipv6'); // IPv6 link-local
refused.addAddress('fd00:ec2::254', 'ipv6'); // AWS metadata over IPv6

/** IPv4 prefixes outside the public internet, besides REFUSED_IPV4 (RFC 6890's special-purpose ranges). */
const INTERNAL_IPV4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private: pod and Service networks live here
  ['100.64.0.0', 10], // shared address space (carrier-grade NAT, some pod networks)
  ['127.0.0.0', 8], // loopback: kiteline's own and its node's services
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address
];

const internal = new BlockList();
addIpv4(internal, [...REFUSED_IPV4, ...INTERNAL_IPV4]);
internal.addSubnet('fe80::', 10, 'ipv6'); // link-local
internal.addSubnet('fc00::', 7, 'ipv6'); // unique local (AWS's fd00:ec2::254 too)
internal.addSubnet('ff00::', 8, 'ipv6'); // multicast
internal.addSubnet('2001:db8::', 32, 'ipv6'); // documentation
internal.addSubnet('100::', 64, 'ipv6'); // discard

/** Why kiteline does not connect there, for messages. */
export const REFUSED_WHY = 'a link-local or cloud metadata address';
/** Why an address outside the public internet is refused, for messages. */
export const INTERNAL_WHY = 'a loopback, private, link-local or otherwise non-public address';

/** `why` when the IP address (IPv4, or IPv6 with or without brackets and zone) is in `list`. */
function listed(list: BlockList, address: string, why: string): string | undefined {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 0) return undefined;
  return list.check(bare, family === 4 ? 'ipv4' : 'ipv6') ? why : undefined;
}

/**
 * Whether an IP address is one kiteline never connects to: the reason when it is, else
 * undefined. A host name is not an address: undefined.
 */
export function refusedAddress(address: string): string | undefined {
  return listed(refused, address, REFUSED_WHY);
}

/**
 * Whether an IP address is outside the public internet (loopback, private, shared, link-local,
 * unique local, multicast, reserved; the unspecified :: and the loopback ::1 fall in the IPv4
 * embeddings of 0.0.0.0/8): the reason when it is, else undefined. A host name: undefined.
 */
export function internalAddress(address: string): string | undefined {
  return listed(internal, address, INTERNAL_WHY);
}

/** A host name resolved to an address kiteline does not connect to. */
export class RefusedAddressError extends Error {
  readonly code = 'EADDRREFUSED_KITELINE';
  constructor(hostname: string, address: string, why = REFUSED_WHY) {
    super(`${hostname} resolves to ${address}, ${why}: kiteline does not connect there`);
    this.name = 'RefusedAddressError';
  }
}

/**
 * The `lookup` of net.connect and tls.connect (so of undici's connect options too): resolves with
 * `resolve` (dns.lookup unless a test gives another) and fails the connection, before any byte is
 * sent, when any address the name resolves to is refused by `refuse` (refusedAddress unless given;
 * with `all`, as Node's happy eyeballs asks, one refused address among several refuses the name:
 * the next answer could pick it).
 * IP literals never reach a lookup; refusedAddress checks them in the URL.
 */
export function guardedLookup(
  resolve: LookupFunction = dnsLookup,
  refuse: (address: string) => string | undefined = refusedAddress,
): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, options, (err, address, family) => {
      if (err) return callback(err, address);
      const addresses = Array.isArray(address) ? address.map((a) => a.address) : [address];
      for (const candidate of addresses) {
        const why = refuse(candidate);
        if (why !== undefined)
          return callback(new RefusedAddressError(hostname, candidate, why), Array.isArray(address) ? [] : '');
      }
      callback(null, address, family);
    });
  };
}
