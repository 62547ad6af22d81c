// Authorization of resource requests: the verb (docs/auth.md) of each request, checked
// through the one role function (services.auth.authorize) before anything goes upstream. The
// namespace checked is the one read or written ("_all" for all-namespace and cluster-scoped
// requests), and the resource is the canonical name (see target.ts).
import type { AccessRequest, Principal, Verb } from '../auth/principal.js';
import { ForbiddenError } from '../errors.js';
import { ALL_NAMESPACES } from './segments.js';

export interface Authorizer {
  authorize(principal: Principal, access: AccessRequest): boolean;
  /** 401 SecondFactorRequired when a step-up rule guards the access and the caller's proof is too old. */
  requireFreshFactor(principal: Principal, access: Pick<AccessRequest, 'cluster' | 'resource' | 'verb'>): void;
}

/** GET object get, GET collection list, watch=true watch, POST create, PUT update, PATCH patch, DELETE delete. */
export function verbFor(method: string, hasName: boolean, watch: boolean): Verb {
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (watch) return 'watch';
      return hasName ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    default:
      throw new Error(`no verb for method ${method}`);
  }
}

/** Whether one of the principal's roles allows the access (no error: for optional extras such as pod metrics). */
export function mayAccess(
  auth: Authorizer,
  principal: Principal,
  cluster: string,
  resource: string,
  namespace: string | undefined,
  verb: Verb,
): boolean {
  return auth.authorize(principal, { cluster, namespace: namespace ?? ALL_NAMESPACES, resource, verb });
}

/** How a refusal names the caller: `user alice`, `API key ci`. */
export function callerLabel(principal: Pick<Principal, 'kind' | 'name'>): string {
  return `${principal.kind === 'apikey' ? 'API key' : 'user'} ${principal.name}`;
}

/**
 * Throws 403 unless one of the principal's roles allows the access, then 401 SecondFactorRequired
 * when a step-up rule guards it (a delete, exec, attach) and the caller's second factor is too old.
 */
export function requireAccess(...args: Parameters<typeof mayAccess>): void {
  const [auth, principal, cluster, resource, namespace, verb] = args;
  if (mayAccess(...args)) {
    auth.requireFreshFactor(principal, { cluster, resource, verb });
    return;
  }
  const where = namespace === undefined ? 'across all namespaces' : `in namespace ${namespace}`;
  const who = callerLabel(principal);
  throw new ForbiddenError(`${who} may not ${verb} ${resource} ${where} on cluster ${cluster}`);
}
