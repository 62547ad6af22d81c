// Validation of the path segments of /api/v1/<resource>/<namespace|_all>[/<name>] before any of
// them reaches an upstream path: a segment that could climb out of its place ('..', '/', '%',
// control characters) is refused with 400. The patterns double as the route's JSON schema.
import { BadRequestError } from '../errors.js';

/** The literal segment meaning "all namespaces" (or "no namespace" for cluster-scoped kinds). */
export const ALL_NAMESPACES = '_all';

/** A plural resource name, optionally followed by its group: "deployments", "certificates.cert-manager.io". */
export const RESOURCE_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/** A DNS label (RFC 1123): a namespace, a container's name. */
const LABEL = '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?';
export const DNS_LABEL_PATTERN = `^${LABEL}$`;
export const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);
/** A namespace (DNS label) or the literal _all. */
export const NAMESPACE_PATTERN = `^(_all|${LABEL})$`;
/** A namespace, _all, or nothing (a query parameter that may be left empty). */
export const OPTIONAL_NAMESPACE_PATTERN = `^(_all|${LABEL})?$`;
/**
 * An object name: DNS subdomains, plus the ':' and '@' that RBAC and a few other kinds allow
 * (e.g. clusterrole "system:controller:foo"). Never '/', '%', whitespace or a leading dot.
 */
export const NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,252}$';

const RESOURCE = new RegExp(RESOURCE_PATTERN);
const NAMESPACE = new RegExp(NAMESPACE_PATTERN);
const NAME = new RegExp(NAME_PATTERN);

export interface PathSegments {
  resource: string;
  /** undefined when the path has no second segment. */
  namespace: string | undefined;
  name: string | undefined;
}

/** Checks decoded path segments; throws BadRequestError naming the bad one. */
export function checkSegments(segments: PathSegments): PathSegments {
  const { resource, namespace, name } = segments;
  if (resource.length > 253 || !RESOURCE.test(resource)) {
    throw new BadRequestError(
      `invalid resource "${printable(resource)}": ` +
        'use a lower-case plural name such as deployments, or <plural>.<group>',
    );
  }
  if (namespace !== undefined && !NAMESPACE.test(namespace)) {
    throw new BadRequestError(`invalid namespace "${printable(namespace)}": use a DNS label or _all`);
  }
  if (name !== undefined && (!NAME.test(name) || name.includes('..'))) {
    throw new BadRequestError(
      `invalid name "${printable(name)}": object names are DNS subdomains (no '/', '%' or '..')`,
    );
  }
  return segments;
}

/** Quotes user input in messages without letting control characters through. */
function printable(value: string): string {
  const cut = value.length > 80 ? `${value.slice(0, 80)}...` : value;
  return cut.replace(/[^\x20-\x7e]/g, '?');
}
