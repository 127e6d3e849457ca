import { describe, expect, test } from 'vitest';
import { addressKind, clientNetwork } from '../../src/net/addresses';
import { isRefusedAddress } from '../../src/net/outbound';

/**
 * The outbound guard's judgement of an address, in every form it can be written in. Only the
 * judgement: nothing here connects anywhere.
 */
describe('addressKind', () => {
  test.each([
    ['127.0.0.1', 'private'],
    ['127.255.0.9', 'private'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'], // CGNAT
    ['169.254.1.1', 'private'],
    ['::1', 'private'],
    ['0:0:0:0:0:0:0:1', 'private'],
    ['::ffff:127.0.0.1', 'private'], // IPv4-mapped, dotted
    ['::ffff:7f00:1', 'private'], // IPv4-mapped, as the URL parser writes it
    ['0:0:0:0:0:ffff:7f00:1', 'private'],
    ['[::ffff:7f00:1]', 'private'],
    ['::FFFF:0A00:0001', 'private'], // 10.0.0.1
    ['::7f00:1', 'private'], // IPv4-compatible
    ['::127.0.0.1', 'private'],
    ['::ffff:0:7f00:1', 'private'], // IPv4-translated
    ['64:ff9b::7f00:1', 'private'], // NAT64
    ['64:ff9b::10.0.0.1', 'private'],
    ['64:ff9b:1::1', 'private'], // local-use NAT64
    ['2002:7f00:1::', 'private'], // 6to4 of 127.0.0.1
    ['2002:c0a8:101::1', 'private'], // 6to4 of 192.168.1.1
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fe80::1', 'private'],
    ['fe80::1%eth0', 'private'],
    ['febf::1', 'private'],
    ['fec0::1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:a9fe:a9fe', 'metadata'],
    ['0:0:0:0:0:ffff:a9fe:a9fe', 'metadata'],
    ['::a9fe:a9fe', 'metadata'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b:1::a9fe:a9fe', 'metadata'], // local-use NAT64, /96 layout
    ['64:ff9b:1:a9fe:a9:fea9:fe00:0', 'metadata'], // local-use NAT64, /48 layout (u-octet skipped)
    ['64:ff9b:1:0:a9:fea9:fe00:0', 'metadata'], // local-use NAT64, /64 layout
    ['2002:a9fe:a9fe::', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['0.0.0.0', 'never'],
    ['0.1.2.3', 'never'],
    ['::', 'never'],
    ['0:0:0:0:0:0:0:0', 'never'],
    ['::ffff:0.0.0.0', 'never'],
    ['224.0.0.1', 'never'],
    ['239.255.255.250', 'never'],
    ['255.255.255.255', 'never'],
    ['240.0.0.1', 'never'],
    ['ff02::1', 'never'],
    ['2001:db8::1', 'never'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'never'], // Teredo
    ['192.0.2.1', 'never'],
    ['93.184.216.34', 'public'],
    ['8.8.8.8', 'public'],
    ['172.32.0.1', 'public'],
    ['100.128.0.1', 'public'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::808:808', 'public'],
    ['2606:4700:4700::1111', 'public'],
  ] as const)('%s is %s', (address, kind) => {
    expect(addressKind(address)).toBe(kind);
  });

  test.each(['example.org', '127.1', '2130706433', '0x7f000001', '1:2:3:4:5:6:7:8:9', '1::2::3', '12345::1', ''])(
    '%s is not an address (the guard refuses what it cannot read)',
    (text) => {
      expect(addressKind(text)).toBeUndefined();
      expect(isRefusedAddress(text, true)).toBe(true);
    },
  );

  test('OUTBOUND_ALLOW_PRIVATE lets private addresses through, never metadata or unroutable ones', () => {
    expect(isRefusedAddress('::ffff:7f00:1', false)).toBe(true);
    expect(isRefusedAddress('::ffff:7f00:1', true)).toBe(false);
    expect(isRefusedAddress('::ffff:a9fe:a9fe', true)).toBe(true);
    expect(isRefusedAddress('fd00:ec2::254', true)).toBe(true);
    expect(isRefusedAddress('ff02::1', true)).toBe(true);
    expect(isRefusedAddress('8.8.8.8', false)).toBe(false);
  });
});

describe('clientNetwork', () => {
  test.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::ffff:cb00:7107', '203.0.113.7'],
    ['2001:db8:1:2:aaaa::1', '2001:db8:1:2::/64'],
    ['2001:db8:1:2:bbbb:cccc:dddd:eeee', '2001:db8:1:2::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('%s counts as %s', (address, network) => {
    expect(clientNetwork(address)).toBe(network);
  });
});
