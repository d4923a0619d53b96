/**
 * Who may reach the server, as configured (src/config/access.ts): API keys, trusted gateways,
 * allowed host names and the loopback checks. Every parser throws a ConfigError naming the bad entry.
 */
import { describe, expect, it } from 'vitest';
import {
  hostNameOf, isLoopback, isLoopbackHostName, parseAllowedHosts, parseApiKeys, parseTrustProxy,
} from '../../src/config/access.js';
import { ConfigError } from '../../src/config/values.js';

describe('parseApiKeys', () => {
  it('parses key:tenant[:admin] entries; none when unset or blank', () => {
    expect(parseApiKeys('key1abcd:tenantA, key2abcd:tenantB:admin')).toEqual([
      { key: 'key1abcd', tenant: 'tenantA', admin: false },
      { key: 'key2abcd', tenant: 'tenantB', admin: true },
    ]);
    expect(parseApiKeys(undefined)).toEqual([]);
    expect(parseApiKeys(' ')).toEqual([]);
  });
  it.each([
    ['onlykey', /LAMER_API_KEYS: bad entry/],
    ['key1abcd:t:root', /LAMER_API_KEYS: bad entry/],
    ['short:t', /at least 8 characters/],
    ['key1abcd:a,key1abcd:b', /duplicate key/],
  ])('%j is rejected', (raw, msg) => {
    expect(() => parseApiKeys(raw)).toThrow(ConfigError);
    expect(() => parseApiKeys(raw)).toThrow(msg);
  });
  it('never repeats more than the first 8 characters of a bad entry (it may be a key)', () => {
    expect(() => parseApiKeys('abcdefghSECRETSECRET')).toThrow(ConfigError);
    expect(() => parseApiKeys('abcdefghSECRETSECRET')).not.toThrow(/SECRET/);
  });
});

describe('parseTrustProxy', () => {
  it('parses addresses and CIDR ranges, and refuses anything else by name', () => {
    expect(parseTrustProxy(undefined)).toEqual([]);
    expect(parseTrustProxy(' ')).toEqual([]);
    expect(parseTrustProxy('10.0.0.2, 10.0.0.0/24,fd00::/8,::1')).toEqual(['10.0.0.2', '10.0.0.0/24', 'fd00::/8', '::1']);
    for (const bad of ['true', '*', '10.0.0.0/33', 'fd00::/129', '10.0.0.1/8/1', 'gateway.local', '10.0.0.0/']) {
      expect(() => parseTrustProxy(bad)).toThrow(ConfigError);
    }
    expect(() => parseTrustProxy('10.0.0.1,nope')).toThrow(/"nope"/);
  });
});

describe('parseAllowedHosts', () => {
  it('none unless set; names and addresses, lower-cased, IPv6 without brackets', () => {
    expect(parseAllowedHosts(undefined)).toEqual([]);
    expect(parseAllowedHosts(' Lamer.Internal ,10.0.0.7,[FD00::1], fd00::2, gpu-1.example.com., ')).toEqual([
      'lamer.internal', '10.0.0.7', 'fd00::1', 'fd00::2', 'gpu-1.example.com',
    ]);
  });
  it.each([
    ['*', /LAMER_ALLOWED_HOSTS: "\*" is not a host name/],
    ['lamer.internal:8080', /without a port/],
    ['http://lamer.internal', /LAMER_ALLOWED_HOSTS: "http:\/\/lamer.internal"/],
    ['bad host', /LAMER_ALLOWED_HOSTS: "bad host"/],
    ['-x.example', /LAMER_ALLOWED_HOSTS/],
    ['[fd00::1', /LAMER_ALLOWED_HOSTS/],
  ])('%j is rejected', (raw, msg) => {
    expect(() => parseAllowedHosts(raw)).toThrow(ConfigError);
    expect(() => parseAllowedHosts(raw)).toThrow(msg);
  });
});

describe('hostNameOf', () => {
  it('is the Host header\'s name in parseAllowedHosts\' form, the port ignored', () => {
    expect(hostNameOf('Lamer.Internal:8080')).toBe('lamer.internal');
    expect(hostNameOf('gpu-1.example.com.')).toBe('gpu-1.example.com');
    expect(hostNameOf('10.0.0.7:80')).toBe('10.0.0.7');
    expect(hostNameOf('[0:0:0:0:0:0:0:1]:8080')).toBe('::1');
    expect(hostNameOf('[FD00::1]')).toBe('fd00::1');
  });
  it('is null for anything that is not a host name or address with an optional port', () => {
    for (const bad of ['', 'a b', 'x@y', '[not-v6]:80', 'host:port', 'fd00::1']) expect(hostNameOf(bad)).toBeNull();
  });
});

describe('loopback', () => {
  it('host names of the loopback interface', () => {
    for (const name of ['localhost', '127.0.0.1', '127.8.9.10', '::1']) expect(isLoopbackHostName(name)).toBe(true);
    for (const name of ['lamer.internal', '10.0.0.7', 'fd00::1', '127.example.com']) expect(isLoopbackHostName(name)).toBe(false);
  });
  it('listen addresses that only accept connections from this machine', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) expect(isLoopback(host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.7']) expect(isLoopback(host)).toBe(false);
  });
});
