/**
 * What an IP address reaches, for the outbound guard (src/net/outbound.ts). An address is read as
 * numbers, never compared as text: `::ffff:127.0.0.1`, `::ffff:7f00:1` and
 * `0:0:0:0:0:ffff:7f00:1` are one address, and IPv6 forms that carry an IPv4 address inside
 * (mapped, compatible, translated, NAT64, 6to4) are judged by the IPv4 address they carry, since
 * the host's stack or a gateway delivers them there.
 *
 * - `metadata`: cloud metadata services, which hand out credentials: refused always.
 * - `never`: nothing a server should call (unspecified, multicast, broadcast, reserved, documentation).
 * - `private`: loopback, RFC 1918, CGNAT, link-local, unique local: refused unless OUTBOUND_ALLOW_PRIVATE.
 * - `public`: anything else.
 */
export type AddressKind = 'public' | 'private' | 'metadata' | 'never';

type Range = readonly [base: number, bits: number, kind: Exclude<AddressKind, 'public'>];

/** IPv4 special-purpose ranges (RFC 6890 and its updates), most specific first. */
const V4_RANGES: readonly Range[] = [
  [v4('169.254.169.254'), 32, 'metadata'], // AWS, GCP, Azure, OpenStack ...
  [v4('100.100.100.200'), 32, 'metadata'], // Alibaba Cloud
  [v4('192.0.0.192'), 32, 'metadata'], // Oracle Cloud
  [v4('0.0.0.0'), 8, 'never'], // "this network"; 0.0.0.0 reaches the local host on Linux
  [v4('10.0.0.0'), 8, 'private'],
  [v4('100.64.0.0'), 10, 'private'], // CGNAT
  [v4('127.0.0.0'), 8, 'private'],
  [v4('169.254.0.0'), 16, 'private'],
  [v4('172.16.0.0'), 12, 'private'],
  [v4('192.0.0.0'), 24, 'never'], // IETF protocol assignments
  [v4('192.0.2.0'), 24, 'never'], // documentation
  [v4('192.88.99.0'), 24, 'never'], // 6to4 relay anycast
  [v4('192.168.0.0'), 16, 'private'],
  [v4('198.18.0.0'), 15, 'private'], // benchmarking, used by labs
  [v4('198.51.100.0'), 24, 'never'], // documentation
  [v4('203.0.113.0'), 24, 'never'], // documentation
  [v4('224.0.0.0'), 4, 'never'], // multicast
  [v4('240.0.0.0'), 4, 'never'], // reserved, and 255.255.255.255
];

/** The kind of an IP address written as Node, DNS or the WHATWG URL parser write it; undefined if it is not one. */
export function addressKind(address: string): AddressKind | undefined {
  const text = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const four = parseV4(text);
  if (four !== undefined) return v4Kind(four);
  const groups = parseV6(text);
  return groups && v6Kind(groups);
}

function v4Kind(address: number): AddressKind {
  for (const [base, bits, kind] of V4_RANGES) {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    if ((address & mask) >>> 0 === base) return kind;
  }
  return 'public';
}

function v6Kind(g: readonly number[]): AddressKind {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const low32 = ((g[6] << 16) | g[7]) >>> 0;
  if (zeros(0, 8)) return 'never'; // ::
  if (zeros(0, 7) && g[7] === 1) return 'private'; // ::1
  if (zeros(0, 5) && g[5] === 0xffff) return v4Kind(low32); // ::ffff:a.b.c.d, mapped
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return v4Kind(low32); // ::ffff:0:a.b.c.d, translated (SIIT)
  if (zeros(0, 6)) return v4Kind(low32); // ::a.b.c.d, compatible (deprecated, still routed by some stacks)
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4Kind(low32); // 64:ff9b::/96, NAT64
  // 64:ff9b:1::/48, local-use NAT64 (RFC 8215): where the IPv4 address sits depends on the prefix
  // length the network chose, so it is private, and metadata if any layout carries a metadata address.
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1)
    return localNat64Embeddings(g).some((a) => v4Kind(a) === 'metadata') ? 'metadata' : 'private';
  if (g[0] === 0x2002) return v4Kind(((g[1] << 16) | g[2]) >>> 0); // 2002::/16, 6to4
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && zeros(2, 7) && g[7] === 0x254) return 'metadata'; // AWS over IPv6
  if (g[0] === 0x2001 && g[1] === 0x0db8) return 'never'; // documentation
  if (g[0] === 0x2001 && g[1] < 0x200) return 'never'; // 2001::/23, IETF protocol assignments (Teredo among them)
  if (g[0] === 0x100 && zeros(1, 4)) return 'never'; // 100::/64, discard
  if ((g[0] & 0xfe00) === 0xfc00) return 'private'; // fc00::/7, unique local
  if ((g[0] & 0xffc0) === 0xfe80 || (g[0] & 0xffc0) === 0xfec0) return 'private'; // link-local, site-local
  if ((g[0] & 0xff00) === 0xff00) return 'never'; // multicast
  return 'public';
}

/** The IPv4 addresses a local-use NAT64 address may carry: one per RFC 6052 prefix length of /48 or longer (bits 64-71 are the zero u-octet). */
function localNat64Embeddings(g: readonly number[]): number[] {
  const whole = g.reduce((n, x) => (n << 16n) | BigInt(x), 0n);
  const bits = (from: number, count: number) =>
    Number((whole >> BigInt(128 - from - count)) & ((1n << BigInt(count)) - 1n));
  return [
    ((bits(48, 16) << 16) | bits(72, 16)) >>> 0, // /48
    ((bits(56, 8) << 24) | bits(72, 24)) >>> 0, // /56
    bits(72, 32) >>> 0, // /64
    bits(96, 32) >>> 0, // /96
  ];
}

function v4(text: string): number {
  return parseV4(text) as number;
}

/** Dotted quad, four decimal parts (the only form DNS and the URL parser hand over). */
function parseV4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return undefined;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

/** Eight 16-bit groups, with `::` and a trailing dotted quad expanded. */
function parseV6(text: string): number[] | undefined {
  if (!text.includes(':')) return undefined;
  let body = text.toLowerCase();
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(body);
  if (quad) {
    const n = parseV4(quad[1]);
    if (n === undefined) return undefined;
    body = `${body.slice(0, quad.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = body.split('::');
  if (halves.length > 2) return undefined;
  const read = (half: string) => (half === '' ? [] : half.split(':'));
  const head = read(halves[0]);
  const tail = halves.length === 2 ? read(halves[1]) : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (!groups.every((x) => /^[0-9a-f]{1,4}$/.test(x))) return undefined;
  return groups.map((x) => parseInt(x, 16));
}

/**
 * The network a client address stands for when counting what one client holds: the IPv4 address
 * (also when written IPv4-mapped, as a dual-stack listener reports it), or the /64 of an IPv6
 * address, since one IPv6 host is handed a whole /64 and can take a new address from it at will.
 */
export function clientNetwork(address: string): string {
  const text = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const four = parseV4(text);
  if (four !== undefined) return text;
  const groups = parseV6(text);
  if (!groups) return text;
  if (groups.slice(0, 5).every((x) => x === 0) && groups[5] === 0xffff)
    return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join('.');
  return `${groups
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}
