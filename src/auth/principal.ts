// Who is calling: a signed-in user (session cookie) or an API key. Built by authentication from
// the host store's caches, handed to authorization, audit, logs and impersonation.

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
}

/** The verbs of CONTRACT section 6. */
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
