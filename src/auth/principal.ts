// Who is calling: a signed-in user (session cookie) or an API key. Built by authentication from
// the host store's caches, handed to authorization, audit, logs and impersonation.
import type { TokenAudience } from '../host/resources.js';

export interface Principal {
  kind: 'user' | 'apikey';
  /** The User's or APIKey's integer id. */
  id: number;
  /** Username, or `apikey:<key name>` for an API key: what logs, audit and Impersonate-User show. */
  name: string;
  /** Names of the kiteline Roles this principal holds. */
  roles: string[];
  /** Groups sent as Impersonate-Group (e.g. "kiteline:authenticated", "kiteline:role:admin"). */
  groups: string[];
  /** A session's start (login time, seconds since the epoch): refreshes keep it. */
  sessionStartedAt?: number;
  /**
   * When the caller last proved a second factor (seconds since the epoch): a session's TOTP code or
   * passkey, or for a token minted for a user, that of the session it was minted from.
   */
  secondFactorAt?: number;
  /** A session that may only enrol a second factor (the admins require one and the user has none). */
  enrolmentOnly?: boolean;
  /**
   * A token minted for a user (an API key it owns) is for one door only, never kiteline's own API
   * (the authenticate plugin): `kubernetes` (a kubeconfig token) under /k8s/clusters/, `mcp` on /mcp,
   * `console` (a kubectl console's) under /k8s/clusters/ of the clusters in `tokenClusters`.
   */
  tokenAudience?: TokenAudience;
  /** A console token reaches only these clusters, whatever its roles say. */
  tokenClusters?: readonly string[];
}

/** The ways in: kiteline's own API, the Kubernetes API proxy, /mcp. */
export type TokenDoor = 'kiteline' | 'kubernetes' | 'mcp';

/** Where each kind of token minted for a user is accepted, as a refusal elsewhere names it. */
const TOKEN_DOORS: Record<TokenAudience, string> = {
  kubernetes: 'a kubeconfig token is accepted only on the Kubernetes API, under /k8s/clusters/',
  mcp: 'an MCP token is accepted only on /mcp',
  console: "a kubectl console's token is accepted only on the Kubernetes API of its cluster",
};
/** The door each audience opens: a console's token is a kubeconfig token bound to its cluster. */
const DOOR_OF: Record<TokenAudience, TokenDoor> = { kubernetes: 'kubernetes', mcp: 'mcp', console: 'kubernetes' };

/**
 * Why this principal may not come in through `door` (kiteline's own API, the Kubernetes API proxy,
 * or /mcp), or undefined when it may: a token minted for a user opens its audience's door only.
 * Every way in asks (the authenticate plugin for routed requests, the proxy's upgrade sessions).
 */
export function tokenRefusal(principal: Principal, door: TokenDoor): string | undefined {
  const audience = principal.tokenAudience;
  return audience === undefined || DOOR_OF[audience] === door ? undefined : TOKEN_DOORS[audience];
}

/**
 * Every user and group kiteline sends to a cluster (Impersonate-User, Impersonate-Group) starts
 * with this prefix, so a kiteline user named like one of the cluster's own users (an OIDC user,
 * "system:..." names) can never act as that user: the cluster's RBAC binds kiteline's identities
 * separately (e.g. a ClusterRoleBinding to Group "kiteline:role:admin").
 */
export const CLUSTER_IDENTITY_PREFIX = 'kiteline:';

/** The user a cluster sees: "kiteline:<username>", "kiteline:apikey:<key name>" for an API key. */
export function clusterUserName(principal: Pick<Principal, 'name'>): string {
  return CLUSTER_IDENTITY_PREFIX + principal.name;
}

/** The groups of a principal holding these roles: "kiteline:authenticated", "kiteline:role:<role>". */
export function clusterGroups(roles: readonly string[]): string[] {
  return [`${CLUSTER_IDENTITY_PREFIX}authenticated`, ...roles.map((role) => `${CLUSTER_IDENTITY_PREFIX}role:${role}`)];
}

/** The verbs a role grants (docs/auth.md, "Roles and authorization"). */
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

/** One authorization question: may the principal do verb on resource in namespace of cluster? */
export interface AccessRequest {
  cluster: string;
  /** The namespace written to or read from; "_all" for cluster-scoped or all-namespace requests. */
  namespace: string;
  /** Plural resource name as requested (e.g. "deployments", "certificates.cert-manager.io"). */
  resource: string;
  verb: Verb;
}
