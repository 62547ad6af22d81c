// The one authorization rule: a request is allowed when ONE of the caller's roles matches its
// cluster, namespace, resource and verb (docs/auth.md). Pure functions over role specs;
// AuthService feeds them the roles from the host cache.
import type { RoleSpec } from '../host/resources.js';
import { patternsMatch } from './patterns.js';
import type { AccessRequest } from './principal.js';

export type RoleRules = Pick<RoleSpec, 'clusters' | 'namespaces' | 'resources' | 'verbs'>;

export function roleAllows(role: RoleRules, access: AccessRequest): boolean {
  return (
    patternsMatch(role.verbs, access.verb) &&
    patternsMatch(role.clusters, access.cluster) &&
    patternsMatch(role.resources, access.resource) &&
    patternsMatch(role.namespaces, access.namespace)
  );
}

export function rolesAllow(roles: Iterable<RoleRules>, access: AccessRequest): boolean {
  for (const role of roles) if (roleAllows(role, access)) return true;
  return false;
}

/** Rules with a role's MCP block (an agent's extra limits). */
export type AgentRoleRules = RoleRules & Pick<RoleSpec, 'mcp'>;

/** Some role denies agents this tool (a deny wins over every other role). */
export function agentToolDenied(roles: Iterable<AgentRoleRules>, tool: string): boolean {
  for (const role of roles) if (role.mcp?.denyTools?.length && patternsMatch(role.mcp.denyTools, tool)) return true;
  return false;
}

/** Some role denies agents this resource (a deny wins over every other role). */
export function agentResourceDenied(roles: Iterable<AgentRoleRules>, resource: string): boolean {
  for (const role of roles) {
    if (role.mcp?.denyResources?.length && patternsMatch(role.mcp.denyResources, resource)) return true;
  }
  return false;
}

/**
 * An agent's write runs without asking a human when a role that grants it says so
 * (mcp.confirmWrites: false); by default every write asks.
 */
export function agentWriteUnconfirmed(roles: Iterable<AgentRoleRules>, access: AccessRequest): boolean {
  for (const role of roles) if (role.mcp?.confirmWrites === false && roleAllows(role, access)) return true;
  return false;
}

/** Some role grants this verb anywhere (what decides whether an agent is shown a write tool at all). */
export function rolesGrantVerb(roles: Iterable<RoleRules>, verb: string): boolean {
  for (const role of roles) {
    const grantsSomething = [role.clusters, role.namespaces, role.resources].every((list) => (list?.length ?? 0) > 0);
    if (grantsSomething && patternsMatch(role.verbs, verb)) return true;
  }
  return false;
}

/** Some role reaches the cluster at all (what GET /api/v1/clusters lists): it matches the cluster
 * and can do something (its other lists are not empty). */
export function rolesReachCluster(roles: Iterable<RoleRules>, cluster: string): boolean {
  for (const role of roles) {
    const grantsSomething = [role.namespaces, role.resources, role.verbs].every((list) => (list?.length ?? 0) > 0);
    if (grantsSomething && patternsMatch(role.clusters, cluster)) return true;
  }
  return false;
}
