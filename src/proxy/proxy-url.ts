// The URL of a proxied request, /k8s/clusters/<cluster>/<Kubernetes API path>?<query>: the
// cluster's name, the path as the API server will read it (percent-decoded, like Go's URL.Path),
// and the raw path and query that go upstream unchanged. A path the gateway and the API server
// could read differently is refused (400): dot segments, empty segments, an encoded '/', control
// characters, malformed percent-encoding.
import { BadRequestError } from '../errors.js';

export const PROXY_PREFIX = '/k8s/clusters/';

export interface ProxyUrl {
  cluster: string;
  /** The decoded path on the cluster, e.g. /api/v1/namespaces/shop/pods. */
  path: string;
  /** The same path as the client sent it, forwarded as is. */
  rawPath: string;
  /** The query without "?", "" when none. */
  query: string;
}

const CONTROL = /[\x00-\x1f\x7f]/;

/** Parses a request URL under PROXY_PREFIX; throws 400 for a malformed one. */
export function parseProxyUrl(url: string): ProxyUrl {
  const mark = url.indexOf('?');
  const rawFull = mark < 0 ? url : url.slice(0, mark);
  const query = mark < 0 ? '' : url.slice(mark + 1);
  if (!rawFull.startsWith(PROXY_PREFIX))
    throw new BadRequestError(`not a cluster proxy path: use ${PROXY_PREFIX}<cluster>/<Kubernetes API path>`);
  const rest = rawFull.slice(PROXY_PREFIX.length);
  const slash = rest.indexOf('/');
  const cluster = decode(slash < 0 ? rest : rest.slice(0, slash));
  const rawPath = slash < 0 ? '/' : rest.slice(slash);
  if (cluster === '') throw new BadRequestError(`no cluster name: use ${PROXY_PREFIX}<cluster>/<Kubernetes API path>`);
  if (/%2f/i.test(rawPath)) throw new BadRequestError('an encoded "/" is not allowed in a proxied path');
  const path = decode(rawPath);
  const segments = path.slice(1).replace(/\/$/, '').split('/');
  if (path !== '/' && segments.some((segment) => segment === '' || segment === '.' || segment === '..')) {
    throw new BadRequestError('a proxied path may not contain empty, "." or ".." segments');
  }
  return { cluster, path, rawPath, query };
}

function decode(raw: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw new BadRequestError('malformed percent-encoding in the path');
  }
  if (CONTROL.test(decoded)) throw new BadRequestError('control characters are not allowed in the path');
  return decoded;
}

/** The query with `fieldSelector` replaced (all its values: the API server reads only the first). */
export function withFieldSelector(query: string, fieldSelector: string): string {
  const params = new URLSearchParams(query);
  params.set('fieldSelector', fieldSelector);
  return params.toString();
}
