// Pure logic: the addresses kiteline never connects to (link-local and cloud metadata), in every
// spelling an address can take (issue 32 point 6): IPv4-mapped, IPv4-translated, IPv4-compatible,
// NAT64 and 6to4 embeddings, IPv6 zones, and the decimal, octal and hex IPv4 forms the URL parser
// normalizes; and the connect-time lookup that refuses a name resolving to one of them.
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import t from 'tap';
import { stringify } from 'yaml';
import { KubeconfigError, sanitizeKubeconfig } from '../../src/credentials/kubeconfig.js';
import { guardedLookup, RefusedAddressError, refusedAddress } from '../../src/credentials/refused-addresses.js';

t.test('refused: link-local and metadata addresses in every spelling', async (t) => {
  const refused = [
    '169.254.169.254',
    '169.254.0.1',
    '169.254.255.255',
    '169.254.170.2', // AWS ECS task metadata
    '100.100.100.200', // Alibaba Cloud metadata
    '::ffff:169.254.169.254', // IPv4-mapped, dotted
    '::ffff:a9fe:a9fe', // IPv4-mapped, hex
    '0:0:0:0:0:ffff:a9fe:a9fe',
    '::FFFF:A9FE:A9FE',
    '::ffff:100.100.100.200',
    '::ffff:0:a9fe:a9fe', // IPv4-translated (SIIT)
    '::a9fe:a9fe', // IPv4-compatible (deprecated, still parsed)
    '::169.254.169.254',
    '64:ff9b::a9fe:a9fe', // NAT64, well-known prefix
    '64:ff9b::169.254.169.254',
    '64:ff9b::6464:64c8',
    '2002:a9fe:a9fe::1', // 6to4 of 169.254.169.254
    'fe80::1', // IPv6 link-local
    'FE80::1',
    'fe80::1%eth0',
    'febf:ffff::1',
    'fd00:ec2::254', // AWS metadata over IPv6
  ];
  for (const address of refused) t.ok(refusedAddress(address), `${address} is refused`);
});

t.test('allowed: everything else, loopback and private networks included', async (t) => {
  const allowed = [
    '127.0.0.1',
    '10.0.0.1',
    '192.168.1.10',
    '169.253.255.255',
    '169.255.0.0',
    '100.100.100.201',
    '8.8.8.8',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a0a:a0a', // NAT64 of 10.10.10.10
    '2002:a0a:a0a::1',
    'fec0::1',
    'fe7f::1',
    'fd00:ec2::253',
    '2001:db8::1',
  ];
  for (const address of allowed) t.equal(refusedAddress(address), undefined, `${address} is allowed`);
  t.equal(refusedAddress('metadata.google.internal'), undefined, 'a name is not an address (resolved at connect)');
  t.equal(refusedAddress(''), undefined, 'empty: not an address');
});

t.test('a kubeconfig server in any spelling of a refused address: 400 material', async (t) => {
  const servers = [
    'http://169.254.169.254',
    'http://2852039166', // decimal
    'http://0xa9fea9fe', // hex
    'http://0xA9FEA9FE',
    'http://0251.0376.0251.0376', // octal
    'http://0xa9.0xfe.0xa9.0xfe',
    'http://0251.254.169.254',
    'http://169.254.43518', // two-part
    'http://169.254.169.254.', // trailing dot
    'http://100.100.100.200',
    'https://[::ffff:169.254.169.254]',
    'https://[::ffff:a9fe:a9fe]:6443',
    'https://[0:0:0:0:0:ffff:a9fe:a9fe]',
    'https://[::ffff:0:a9fe:a9fe]',
    'https://[::a9fe:a9fe]',
    'https://[::169.254.169.254]',
    'https://[64:ff9b::a9fe:a9fe]',
    'https://[64:ff9b::169.254.169.254]:443',
    'https://[2002:a9fe:a9fe::]',
    'https://[fe80::1]:6443',
    'https://[fd00:ec2::254]',
  ];
  for (const server of servers) {
    const kubeconfig = stringify({
      clusters: [{ name: 'c', cluster: { server } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
    let error: unknown;
    try {
      sanitizeKubeconfig(kubeconfig);
    } catch (err) {
      error = err;
    }
    t.ok(error instanceof KubeconfigError, `${server} is refused`);
    t.match((error as Error | undefined)?.message, /link-local or cloud metadata/, `${server}: the reason`);
  }
});

/** A resolver answering from a table, in both of dns.lookup's callback forms. */
function tableResolver(table: Record<string, string[]>) {
  const calls: string[] = [];
  const resolve = (
    hostname: string,
    options: LookupOneOptions & { all?: boolean },
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses) {
      const err: NodeJS.ErrnoException = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), {
        code: 'ENOTFOUND',
      });
      return callback(err, '');
    }
    const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    if (options.all) return callback(null, all);
    callback(null, all[0].address, all[0].family);
  };
  return { resolve, calls };
}

function lookupOnce(
  lookup: ReturnType<typeof guardedLookup>,
  hostname: string,
  options: { all?: boolean },
): Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family?: number }> {
  return new Promise((resolve) =>
    lookup(hostname, options, (err, address, family) => resolve({ err, address, family })),
  );
}

t.test('the connect-time lookup refuses names that resolve to refused addresses', async (t) => {
  const { resolve, calls } = tableResolver({
    'metadata.example': ['169.254.169.254'],
    'mapped.example': ['::ffff:169.254.169.254'],
    'nat64.example': ['64:ff9b::a9fe:a9fe'],
    'v6ll.example': ['fe80::1'],
    'mixed.example': ['10.0.0.1', '169.254.169.254'],
    'good.example': ['10.0.0.1', '2001:db8::1'],
  });
  const lookup = guardedLookup(resolve as never);
  for (const all of [false, true]) {
    for (const name of ['metadata.example', 'mapped.example', 'nat64.example', 'v6ll.example']) {
      const { err } = await lookupOnce(lookup, name, { all });
      t.ok(err instanceof RefusedAddressError, `${name} (all: ${all}) refused`);
      t.match(err?.message, new RegExp(`^${name.replace('.', '\\.')} resolves to .*link-local or cloud metadata`));
      t.equal(err?.code, 'EADDRREFUSED_KITELINE');
    }
  }
  const mixed = await lookupOnce(lookup, 'mixed.example', { all: true });
  t.ok(mixed.err instanceof RefusedAddressError, 'one refused address among several refuses the name');
  const good = await lookupOnce(lookup, 'good.example', { all: true });
  t.equal(good.err, null);
  t.same(good.address, [
    { address: '10.0.0.1', family: 4 },
    { address: '2001:db8::1', family: 6 },
  ]);
  const one = await lookupOnce(lookup, 'good.example', {});
  t.same([one.err, one.address, one.family], [null, '10.0.0.1', 4], 'the single-address form passes through');
  const missing = await lookupOnce(lookup, 'missing.example', {});
  t.equal(missing.err?.code, 'ENOTFOUND', "the resolver's own errors pass through");
  t.ok(calls.includes('good.example'), 'the given resolver is asked');
});
