// Per-cluster impersonation: when the cluster's `impersonate` option is on, the caller's identity
// goes to the cluster as Impersonate-User and one Impersonate-Group per group, so the cluster's
// own RBAC, audit and fairness see the real user, always under the "kiteline:" prefix
// (src/auth/principal.ts), never as one of the cluster's own users. The gateway builds every upstream header itself:
// nothing the client sent (Authorization, Impersonate-*, cookies) is ever forwarded.
import { clusterUserName, type Principal } from '../auth/principal.js';
import type { ClusterConnection } from '../clusters/types.js';

/** Headers for the upstream request (a header with several values is an array). */
export type UpstreamHeaders = Record<string, string | string[]>;

export function impersonationHeaders(
  conn: Pick<ClusterConnection, 'impersonate'>,
  principal: Principal,
): UpstreamHeaders {
  if (!conn.impersonate) return {};
  const headers: UpstreamHeaders = { 'impersonate-user': clusterUserName(principal) };
  const groups = principal.groups.filter((g) => g !== '');
  if (groups.length > 0) headers['impersonate-group'] = groups;
  return headers;
}

/**
 * The headers of one upstream request: the gateway's own (accept, content-type) plus
 * impersonation. Multi-valued headers stay arrays: node:http sends one header line per value,
 * which is how the API server reads several Impersonate-Group headers.
 */
export function upstreamHeaders(own: Record<string, string>, impersonation: UpstreamHeaders): UpstreamHeaders {
  return { ...own, ...impersonation };
}
