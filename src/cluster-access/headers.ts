// Which headers cross the proxy. Upstream: everything the client sent (Accept, Content-Type,
// kubectl's own headers, WebSocket and SPDY negotiation) except credentials and identity
// (Authorization, Cookie, Impersonate-*, the front-proxy X-Remote-*), hop-by-hop headers and Host;
// kiteline adds its own credentials (ClusterConnection) and the caller's impersonation. Back to the
// client: the cluster's headers except hop-by-hop ones and Set-Cookie (a cluster does not set
// cookies on kiteline's origin), plus nosniff and a sandbox policy, so nothing a cluster sends
// (a pod's HTML through a proxy subresource) runs as kiteline's origin in a browser.
import type { IncomingHttpHeaders } from 'node:http';

const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
const NEVER_UPSTREAM: ReadonlySet<string> = new Set([
  'authorization',
  'cookie',
  'host',
  'proxy-authorization',
  'expect',
  'x-cluster-name',
]);
const NEVER_UPSTREAM_PREFIXES = ['impersonate-', 'x-remote-'];

export type HeaderMap = Record<string, string | string[]>;

/** The client's headers that go to the cluster; `keepUpgrade` keeps Connection and Upgrade (an upgrade request). */
export function upstreamRequestHeaders(client: IncomingHttpHeaders, keepUpgrade = false): HeaderMap {
  const out: HeaderMap = {};
  for (const [name, value] of Object.entries(client)) {
    if (
      value === undefined ||
      NEVER_UPSTREAM.has(name) ||
      NEVER_UPSTREAM_PREFIXES.some((prefix) => name.startsWith(prefix))
    )
      continue;
    if (HOP_BY_HOP.has(name) && !(keepUpgrade && (name === 'upgrade' || name === 'connection'))) continue;
    out[name] = value;
  }
  if (keepUpgrade) out.connection = 'Upgrade';
  return out;
}

/** The cluster's response headers that go back to the client (`keepUpgrade`: a 101 answer). */
export function clientResponseHeaders(upstream: IncomingHttpHeaders, keepUpgrade = false): HeaderMap {
  const out: HeaderMap = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined || name === 'set-cookie') continue;
    if (HOP_BY_HOP.has(name) && !(keepUpgrade && (name === 'upgrade' || name === 'connection'))) continue;
    out[name] = value;
  }
  out['x-content-type-options'] = 'nosniff';
  out['content-security-policy'] = 'sandbox';
  return out;
}
