// The PromQL passthrough (GET /api/v1/prometheus/query and /query_range, docs/monitoring.md): a
// caller's own query sent to the cluster's Prometheus, answered with Prometheus' own JSON.
//
// PromQL reads every series Prometheus holds, whatever namespace it describes, so the query of a
// caller who is not an admin is rewritten first (promql.ts): every vector selector gets the matcher
// `namespace=~"<the namespaces the caller may query>"`. Those are the cluster's namespaces as they
// are now, each kept when one of the caller's roles allows `create` on `prometheus/query` in it
// (minus kiteline's install namespace on its own host cluster). A series without a namespace
// label (a node's, Prometheus' own) matches no such matcher, so it stays out; so do namespaces
// created after the list was read, and deleted namespaces whose series remain.
import type { KubeList, ToolContext } from '../cluster-access/calls.js';
import { getJson } from '../cluster-access/calls.js';
import { withSearch } from '../cluster-access/read-query.js';
import { prometheusQuery, type Endpoint, type QueryParams } from './prometheus.js';
import { limitToNamespaces } from './promql.js';

const PAGE_SIZE = 500;

/** The names of the cluster's namespaces, read with kiteline's own credentials (they are not shown). */
export async function clusterNamespaces(ctx: ToolContext): Promise<string[]> {
  const names: string[] = [];
  let token = '';
  do {
    const search = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (token) search.set('continue', token);
    const page = await getJson<KubeList>(ctx, withSearch('/api/v1/namespaces', search), {});
    for (const ns of page.items ?? []) if (ns.metadata?.name) names.push(ns.metadata.name);
    token = page.metadata?.continue ?? '';
  } while (token);
  return names;
}

/**
 * Runs the caller's query (with `params`: time, or start, end and step): as it is (`namespaces`
 * undefined: an admin), or limited to these namespaces (at least one).
 */
export async function passthrough(
  ctx: ToolContext,
  endpoint: Endpoint,
  query: string,
  params: QueryParams,
  namespaces: readonly string[] | undefined,
): Promise<Buffer> {
  const sent = namespaces === undefined ? query : await limitToNamespaces(query, namespaces);
  return prometheusQuery(ctx.conn, endpoint, { ...params, query: sent }, ctx.signal);
}
