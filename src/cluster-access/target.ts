// Where a request goes on the target cluster: the resolved resource's scope applied to the path's
// namespace and name, and the upstream API paths built from them. Rules (docs/resources.md):
// a namespaced kind with no second segment or _all means "all namespaces" (lists only); a
// cluster-scoped kind needs _all (or nothing); a name under _all on a namespaced kind is a 400.
import type { ResolvedResource } from '../clusters/types.js';
import { BadRequestError } from '../errors.js';
import { ALL_NAMESPACES, type PathSegments } from './segments.js';

export interface ResourceTarget {
  resolved: ResolvedResource;
  /** The name roles and messages use (see canonicalResourceName). */
  resource: string;
  /** The namespace of the path; undefined for all namespaces or a cluster-scoped kind. */
  namespace: string | undefined;
  name: string | undefined;
}

/**
 * The one name a resource is authorized under, whatever alias the client used: the bare plural
 * for core and built-in groups ("deployments", also when asked as "deployments.apps"), and
 * "<plural>.<group>" for every other group (custom resources, e.g. "certificates.cert-manager.io").
 * So a role excluding "!secrets" cannot be side-stepped by spelling the group out.
 */
export function canonicalResourceName(resolved: ResolvedResource): string {
  return isBuiltInGroup(resolved.group) ? resolved.resource : `${resolved.resource}.${resolved.group}`;
}

/** kubectl's notion of a built-in group: the core group, groups without a dot, and *.k8s.io. */
export function isBuiltInGroup(group: string): boolean {
  return group === '' || !group.includes('.') || group.endsWith('.k8s.io');
}

/** Applies the resource's scope to the path; throws 400 for a path that does not fit it. */
export function planTarget(resolved: ResolvedResource, segments: PathSegments): ResourceTarget {
  const resource = canonicalResourceName(resolved);
  const { namespace, name } = segments;
  if (!resolved.namespaced) {
    if (namespace !== undefined && namespace !== ALL_NAMESPACES) {
      const path = `/api/v1/${segments.resource}/_all${name ? `/${name}` : ''}`;
      throw new BadRequestError(`${resource} are cluster-scoped: use ${path} instead of namespace "${namespace}"`);
    }
    return { resolved, resource, namespace: undefined, name };
  }
  if (namespace === undefined || namespace === ALL_NAMESPACES) {
    if (name !== undefined) {
      throw new BadRequestError(
        `${resource} are namespaced: use /api/v1/${segments.resource}/<namespace>/${name} instead of _all`,
      );
    }
    return { resolved, resource, namespace: undefined, name };
  }
  return { resolved, resource, namespace, name };
}

/** /api/<version> for the core group, /apis/<group>/<version> otherwise. */
export function groupVersionPath(resolved: ResolvedResource): string {
  const version = encodeURIComponent(resolved.version);
  return resolved.group === '' ? `/api/${version}` : `/apis/${encodeURIComponent(resolved.group)}/${version}`;
}

/** The collection path: in one namespace when given (and the kind is namespaced), else across all. */
export function collectionPath(resolved: ResolvedResource, namespace: string | undefined): string {
  const plural = encodeURIComponent(resolved.resource);
  if (resolved.namespaced && namespace !== undefined) {
    return `${groupVersionPath(resolved)}/namespaces/${encodeURIComponent(namespace)}/${plural}`;
  }
  return `${groupVersionPath(resolved)}/${plural}`;
}

/** The path of one object. */
export function objectPath(resolved: ResolvedResource, namespace: string | undefined, name: string): string {
  return `${collectionPath(resolved, namespace)}/${encodeURIComponent(name)}`;
}

/** "configmaps shop/settings" or "nodes node-1": how messages name an object. */
export function describeObject(resource: string, namespace: string | undefined, name: string): string {
  return `${resource} ${namespace ? `${namespace}/` : ''}${name}`;
}

/** The apiVersion string of the resolved resource: "v1" or "apps/v1". */
export function apiVersionOf(resolved: ResolvedResource): string {
  return resolved.group === '' ? resolved.version : `${resolved.group}/${resolved.version}`;
}
