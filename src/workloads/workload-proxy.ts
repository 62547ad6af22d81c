// The links of Kite's pod and service pages, /api/v1/namespaces/<ns>/{pods|services}/<name>[:<port>]/proxy/<path>:
// the cluster's own proxy subresource (the API server reaches the pod or a ready endpoint of the
// service), any method, the request body streamed up and the answer streamed back as it comes.
//
// What a pod answers is hostile content served from kiteline's origin, so the answer's headers go
// through the proxy's policy (src/cluster-access/headers.ts: no Set-Cookie, nosniff, `Content-Security-Policy:
// sandbox`, so no script of the pod runs as kiteline), and here also without WWW-Authenticate (no
// login prompt in kiteline's name) and without Access-Control-* (a pod grants no other origin
// access to anything). Nothing of the caller's credentials reaches the pod: no cookie, no
// Authorization (the proxy's upstream header policy); the cluster sees kiteline's credentials and
// the caller's impersonation.
//
// The path after /proxy is the client's, byte for byte, except that a segment that is "." or ".."
// (plain or percent-encoded) or hides a "/" or "\" is refused: it could climb out of the proxy
// subresource on the API server.
import type { IncomingHttpHeaders } from 'node:http';
import { BadRequestError } from '../errors.js';
import { clientResponseHeaders, type HeaderMap } from '../cluster-access/headers.js';
import { CLUSTER_SELECTOR } from '../cluster-access/cluster-select.js';
import { POD_RESOURCE, SERVICE_RESOURCE } from './access.js';
import { DNS_LABEL } from '../cluster-access/segments.js';

export type ProxyKind = 'pods' | 'services';

/** `name`, `name:port` or `scheme:name:port` (scheme http or https; a port number or name). */
export const PROXY_TARGET_PATTERN =
  '^((https?):)?[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?(:([0-9]{1,5}|[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?))?$';
const PROXY_TARGET = new RegExp(PROXY_TARGET_PATTERN);
const CONTROL = /[\x00-\x1f\x7f]/;

/** Response headers a pod's answer never carries to the browser, beyond the proxy's own policy. */
const DROPPED_ANSWER_HEADERS = ['www-authenticate', 'proxy-authenticate'];
const DROPPED_ANSWER_PREFIXES = ['access-control-'];

export interface ProxyTarget {
  kind: ProxyKind;
  namespace: string;
  /** The pod or service name (without scheme and port). */
  name: string;
  /** The subresource the roles check: pods/proxy or services/proxy. */
  resource: string;
  /** Path and query on the cluster's API server. */
  upstreamPath: string;
}

/**
 * Reads the target from the raw request URL (`/api/v1/namespaces/<ns>/<kind>/<target>/proxy[/<path>][?<query>]`).
 * Throws 400 for a bad namespace, target or path segment.
 */
export function proxyTarget(kind: ProxyKind, rawUrl: string): ProxyTarget {
  const queryAt = rawUrl.indexOf('?');
  const rawPath = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt);
  const segments = rawPath.split('/');
  // ['', 'api', 'v1', 'namespaces', ns, kind, target, 'proxy', ...rest]
  const [namespace, target] = [decoded(segments[4] ?? ''), decoded(segments[6] ?? '')];
  if (segments[5] !== kind || segments[7] !== 'proxy')
    throw new BadRequestError(`expected /api/v1/namespaces/<namespace>/${kind}/<name>[:<port>]/proxy/<path>`);
  if (!DNS_LABEL.test(namespace)) throw new BadRequestError(`invalid namespace "${printable(namespace)}": a DNS label`);
  if (target.length > 300 || !PROXY_TARGET.test(target)) {
    throw new BadRequestError(
      `invalid ${kind === 'pods' ? 'pod' : 'service'} "${printable(target)}": ` +
        '<name>, <name>:<port> or <scheme>:<name>:<port>',
    );
  }
  const rest = segments.slice(8);
  for (const segment of rest) {
    const plain = decoded(segment);
    if (plain === '.' || plain === '..' || /[/\\]/.test(plain) || CONTROL.test(plain)) {
      throw new BadRequestError(
        `invalid proxy path segment "${printable(plain)}": no ".", "..", encoded slashes or control characters`,
      );
    }
  }
  const name = target.replace(/^https?:/, '').split(':')[0];
  const query = queryAt < 0 ? '' : withoutClusterSelector(rawUrl.slice(queryAt + 1));
  const path = `/api/v1/namespaces/${namespace}/${kind}/${target}/proxy${rest.length > 0 ? `/${rest.join('/')}` : ''}`;
  return { kind, namespace, name, resource: `${kind}/proxy`, upstreamPath: query ? `${path}?${query}` : path };
}

/** The kind (for the host guard) of a proxy target. */
export function proxiedKind(kind: ProxyKind) {
  return kind === 'pods' ? POD_RESOURCE : SERVICE_RESOURCE;
}

/** The answer's headers for the browser: the proxy's policy, without authentication prompts and CORS grants. */
export function proxyAnswerHeaders(upstream: IncomingHttpHeaders): HeaderMap {
  const headers = clientResponseHeaders(upstream);
  for (const name of Object.keys(headers)) {
    if (DROPPED_ANSWER_HEADERS.includes(name) || DROPPED_ANSWER_PREFIXES.some((prefix) => name.startsWith(prefix)))
      delete headers[name];
  }
  return headers;
}

/** The query without kiteline's own cluster selector (the pod has no use for it); otherwise as sent. */
function withoutClusterSelector(query: string): string {
  return query
    .split('&')
    .filter((pair) => pair !== '' && decodedOrSelf(pair.split('=', 1)[0]) !== CLUSTER_SELECTOR)
    .join('&');
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new BadRequestError(`malformed percent-encoding in "${printable(segment)}"`);
  }
}

function decodedOrSelf(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

function printable(text: string): string {
  return text.replace(/[\x00-\x1f\x7f]/g, '?').slice(0, 64);
}
