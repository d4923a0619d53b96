/**
 * Who may reach the server, as configured: API keys (LAMER_API_KEYS), the gateways whose forwarded
 * headers are trusted (LAMER_TRUST_PROXY), the host names accepted in the `Host` header
 * (LAMER_ALLOWED_HOSTS; src/plugins/app/host-check.ts reads each request's Host with `hostNameOf`),
 * and which listen addresses and host names are loopback ones. Every parser throws a ConfigError
 * naming the bad entry.
 */
import { isIP } from 'node:net';
import { ConfigError } from './values.js';
import type { ApiKey } from './types.js';

/**
 * Parse `LAMER_API_KEYS`: comma-separated `key:tenant[:admin]` entries.
 * @throws ConfigError for an empty key or tenant, a duplicate key or an unknown flag.
 */
export function parseApiKeys(raw: string | undefined): ApiKey[] {
  if (raw === undefined || raw.trim() === '') return [];
  const keys: ApiKey[] = [];
  for (const entry of raw.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const parts = entry.split(':');
    const [key, tenant, flag] = parts;
    if (parts.length < 2 || parts.length > 3 || !key || !tenant || (flag !== undefined && flag !== 'admin')) {
      throw new ConfigError(
        `LAMER_API_KEYS: bad entry ${JSON.stringify(entry.slice(0, 8) + '...')}: expected key:tenant or key:tenant:admin`,
      );
    }
    if (key.length < 8) throw new ConfigError('LAMER_API_KEYS: every key must have at least 8 characters');
    if (keys.some((k) => k.key === key)) throw new ConfigError('LAMER_API_KEYS: duplicate key');
    keys.push({ key, tenant, admin: flag === 'admin' });
  }
  return keys;
}

/**
 * LAMER_TRUST_PROXY: comma-separated IPv4/IPv6 addresses or CIDR ranges (`10.0.0.2`,
 * `10.0.0.0/24`, `fd00::/8`). `true`/`*` are refused on purpose: trusting every peer's
 * X-Forwarded-For would let any client choose its own address (and its rate-limit bucket).
 * @throws ConfigError naming the bad entry.
 */
export function parseTrustProxy(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  return raw.split(',').map((part) => {
    const entry = part.trim();
    const [addr, prefix, extra] = entry.split('/');
    const family = isIP(addr ?? '');
    const maxPrefix = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= maxPrefix);
    if (family === 0 || !prefixOk || extra !== undefined) {
      throw new ConfigError(
        `LAMER_TRUST_PROXY: ${JSON.stringify(entry)} is not an IP address or CIDR range ` +
          '(expected e.g. "10.0.0.2" or "10.0.0.0/24"; list the gateway addresses, never all clients)',
      );
    }
    return entry;
  });
}

/** A DNS name: dot-separated labels of letters, digits and inner hyphens (no trailing dot). */
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * The host name of a `Host` header value (`name`, `name:port`, `1.2.3.4:port`, `[v6]:port`) in the
 * form {@link parseAllowedHosts} gives: lower-cased, one trailing dot dropped, IPv6 without
 * brackets and in canonical form (`0:0:0:0:0:0:0:1` is `::1`); the port is ignored. Null when the
 * value is not a host name or address followed by an optional port (`a b`, `x@y`, ``).
 */
export function hostNameOf(header: string): string | null {
  const v = header.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(v);
  if (bracketed) return isIP(bracketed[1]!) === 6 ? canonicalIpv6(bracketed[1]!) : null;
  const plain = /^([^:]+)(?::\d{1,5})?$/.exec(v);
  if (!plain) return null;
  const name = plain[1]!.endsWith('.') ? plain[1]!.slice(0, -1) : plain[1]!;
  return isIP(name) === 4 || DNS_NAME.test(name) ? name : null;
}

/** An IPv6 address in the WHATWG URL's canonical text (lower-case, longest zero run as `::`). */
function canonicalIpv6(addr: string): string {
  return new URL(`http://[${addr}]/`).hostname.slice(1, -1);
}

/**
 * True when a host name from {@link hostNameOf} names this machine's loopback interface:
 * `localhost`, an IPv4 address in 127.0.0.0/8, or `::1`.
 */
export function isLoopbackHostName(name: string): boolean {
  return name === 'localhost' || name === '::1' || (isIP(name) === 4 && name.startsWith('127.'));
}

/**
 * LAMER_ALLOWED_HOSTS: comma-separated host names or addresses (`lamer.internal`, `10.0.0.7`,
 * `[fd00::1]` or `fd00::1`) accepted in the `Host` header besides loopback ones; without a port
 * (any port is accepted). Returned lower-cased, without a trailing dot, IPv6 without brackets.
 * `*` is refused on purpose: accepting every Host would undo the DNS-rebinding check.
 * @throws ConfigError naming the bad entry.
 */
export function parseAllowedHosts(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  const out: string[] = [];
  for (const part of raw.split(',')) {
    const entry = part.trim();
    if (entry === '') continue;
    const bare = entry.replace(/^\[(.*)\]$/, '$1');
    const name = isIP(bare) === 6 ? canonicalIpv6(bare) : /^[^:]+:\d+$/.test(entry) ? 'port' : hostNameOf(entry);
    if (name === 'port') {
      throw new ConfigError(`LAMER_ALLOWED_HOSTS: ${JSON.stringify(entry)}: give the host name without a port (every port is accepted)`);
    }
    if (name === null) {
      throw new ConfigError(
        `LAMER_ALLOWED_HOSTS: ${JSON.stringify(entry)} is not a host name or IP address ` +
          '(expected e.g. "lamer.internal,10.0.0.7"; list the names clients use, never "*")',
      );
    }
    if (!out.includes(name)) out.push(name);
  }
  return out;
}

/** True when `host` only accepts connections from this machine. */
export function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}
