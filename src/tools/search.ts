// The global search (GET /api/v1/search?q=&limit=&namespace=): Kite's answer
// `{results: [{id, name, namespace?, resourceType, createdAt}], total}` from a cluster's search
// index (search-index.ts), plus `partial` when the index may be missing objects.
//
// What a query matches (case-insensitive):
// - a part of an object's name ("web" finds deployment web-frontend), or a label value equal to it
//   ("frontend" finds what is labelled tier=frontend);
// - `key=value` or `key:value`: the objects whose label key has exactly that value (Kite's form);
// - a first word naming a kind ("pod web", "cm settings", "deploy api") keeps only that kind (Kite's).
// Results come exact name first, then names starting with the query, then names containing it,
// then label matches; each group in Kite's kind order (deployments, pods, daemonsets, ...), then by
// namespace and name. `total` counts every match the caller may see (Kite counted only the ones it
// returned); `limit` cuts the list.
//
// The index holds what kiteline itself can see: an object is answered only when `mayList` says the
// caller may list its kind in its namespace (kiteline's roles), and never anything of kiteline's
// own install namespace on its host cluster.
import { mayAccess, type Authorizer } from '../cluster-access/access.js';
import type { CallerContext } from '../cluster-access/reads.js';
import { BadRequestError } from '../errors.js';
import type { IndexedObject, SearchIndexes } from './search-index.js';
import { KIND_ORDER, kindNamed } from './search-kinds.js';

/** Kite's default and kiteline's most results per search. */
export const DEFAULT_SEARCH_LIMIT = 50;
export const MAX_SEARCH_LIMIT = 100;
/** The longest query. */
export const MAX_QUERY_LENGTH = 100;

/** One result, as Kite's UI reads it (it links to /<resourceType>/<namespace>/<name>). */
export interface SearchResult {
  /** The object's uid. */
  id: string;
  name: string;
  /** Absent for a cluster-scoped kind. */
  namespace?: string;
  /** The plural resource name: pods, deployments, ... */
  resourceType: string;
  /** metadata.creationTimestamp (RFC 3339). */
  createdAt: string;
}

export interface SearchAnswer {
  results: SearchResult[];
  total: number;
  /** The index may be missing objects (still loading, failing, or over its size limit). */
  partial: boolean;
}

export interface SearchRequest {
  /** The query, 1 to MAX_QUERY_LENGTH characters, not blank. */
  text: string;
  limit: number;
  /** Only objects of this namespace (cluster-scoped kinds are then left out). */
  namespace?: string;
}

/** What search reads of an index. */
export interface SearchableIndex {
  objects(): Iterable<IndexedObject>;
  readonly partial: boolean;
  readonly hiddenNamespace: string | undefined;
}

/** May the caller list `resource` in `namespace` (undefined: a cluster-scoped kind)? */
export type ListPermission = (resource: string, namespace: string | undefined) => boolean;

/** How well an object matches: lower is better; undefined when it does not. */
type Ranking = (object: IndexedObject) => number | undefined;

const EXACT_NAME = 0;
const NAME_PREFIX = 1;
const NAME_PART = 2;
const LABEL_VALUE = 3;

interface ParsedQuery {
  /** The only kind to search, when the query starts with a kind's name. */
  resource?: string;
  rank: Ranking;
}

/** Kite's kind prefix, then a label selector (`key=value`, `key:value`) or a name part. */
function parseQuery(text: string): ParsedQuery {
  let rest = text.trim();
  let resource: string | undefined;
  const [first, ...others] = rest.split(/\s+/);
  const kind = others.length > 0 ? kindNamed(first) : undefined;
  if (kind) {
    resource = kind.resource;
    rest = others.join(' ');
  }
  const separator = rest.search(/[=:]/);
  if (separator > 0) {
    const key = rest.slice(0, separator).trim();
    const value = rest.slice(separator + 1).trim();
    return { resource, rank: (o) => (o.labels?.[key] === value ? EXACT_NAME : undefined) };
  }
  const term = rest.toLowerCase();
  return {
    resource,
    rank: (o) => {
      const at = o.nameLower.indexOf(term);
      if (at === 0) return o.nameLower.length === term.length ? EXACT_NAME : NAME_PREFIX;
      if (at > 0) return NAME_PART;
      if (o.labels && Object.values(o.labels).some((value) => value.toLowerCase() === term)) return LABEL_VALUE;
      return undefined;
    },
  };
}

function compareMatches(
  a: { object: IndexedObject; rank: number },
  b: { object: IndexedObject; rank: number },
): number {
  return (
    a.rank - b.rank ||
    KIND_ORDER.get(a.object.resource)! - KIND_ORDER.get(b.object.resource)! ||
    (a.object.namespace < b.object.namespace ? -1 : a.object.namespace > b.object.namespace ? 1 : 0) ||
    (a.object.name < b.object.name ? -1 : a.object.name > b.object.name ? 1 : 0)
  );
}

/** Searches the index for what the caller may list. */
export function searchIndex(index: SearchableIndex, request: SearchRequest, mayList: ListPermission): SearchAnswer {
  const { resource, rank } = parseQuery(request.text);
  const hidden = index.hiddenNamespace;
  const allowed = new Map<string, boolean>();
  const matches: Array<{ object: IndexedObject; rank: number }> = [];
  for (const object of index.objects()) {
    if (resource !== undefined && object.resource !== resource) continue;
    if (request.namespace !== undefined && object.namespace !== request.namespace) continue;
    if (
      hidden !== undefined &&
      (object.namespace === hidden || (object.resource === 'namespaces' && object.name === hidden))
    )
      continue;
    const matched = rank(object);
    if (matched === undefined) continue;
    const scope = `${object.resource}/${object.namespace}`;
    let may = allowed.get(scope);
    if (may === undefined) {
      may = mayList(object.resource, object.namespace === '' ? undefined : object.namespace);
      allowed.set(scope, may);
    }
    if (may) matches.push({ object, rank: matched });
  }
  matches.sort(compareMatches);
  const results = matches.slice(0, request.limit).map(({ object }): SearchResult => ({
    id: object.uid,
    name: object.name,
    ...(object.namespace ? { namespace: object.namespace } : {}),
    resourceType: object.resource,
    createdAt: object.createdAt,
  }));
  return { results, total: matches.length, partial: index.partial };
}

/**
 * A search of the caller's cluster, as the caller (the search route's and MCP's): the cluster's
 * index (started on first use), settled, then only what the caller may list. A blank query: 400;
 * namespace empty or `_all`: every namespace.
 */
export async function searchAsCaller(
  indexes: SearchIndexes,
  auth: Authorizer,
  ctx: CallerContext,
  request: { text: string; limit: number; namespace: string | undefined },
): Promise<SearchAnswer> {
  if (request.text.trim() === '') throw new BadRequestError('the query must not be blank');
  const namespace = request.namespace === '' || request.namespace === '_all' ? undefined : request.namespace;
  const index = indexes.forCluster(ctx.conn);
  await index.settle(ctx.signal);
  return searchIndex(index, { text: request.text, limit: request.limit, namespace }, (resource, objectNamespace) =>
    mayAccess(auth, ctx.principal, ctx.conn.name, resource, objectNamespace, 'list'),
  );
}
