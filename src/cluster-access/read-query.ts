// Query parameters of reads (get, list, watch) mapped onto the upstream request. Only the
// parameters kiteline knows pass through; unknown ones (e.g. Kite's reduce=true) are dropped.
import { Type, type Static } from 'typebox';
import { BadRequestError } from '../errors.js';

/** The read query string (shared by the three GET routes): its schema and its type. */
export const ReadQuery = Type.Object({
  labelSelector: Type.Optional(Type.String({ maxLength: 4096 })),
  fieldSelector: Type.Optional(Type.String({ maxLength: 4096 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000 })),
  continue: Type.Optional(Type.String({ maxLength: 8192 })),
  resourceVersion: Type.Optional(Type.String({ maxLength: 64 })),
  resourceVersionMatch: Type.Optional(
    Type.Unsafe<'Exact' | 'NotOlderThan'>({ type: 'string', enum: ['Exact', 'NotOlderThan'] }),
  ),
  watch: Type.Optional(Type.Boolean()),
  allowWatchBookmarks: Type.Optional(Type.Boolean()),
  timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
  'x-cluster-name': Type.Optional(Type.String()),
});
export type ReadQuery = Static<typeof ReadQuery>;

/** The upstream query string of a list (or of a watch when query.watch). */
export function listSearch(query: ReadQuery): URLSearchParams {
  const search = new URLSearchParams();
  if (query.labelSelector) search.set('labelSelector', query.labelSelector);
  if (query.fieldSelector) search.set('fieldSelector', query.fieldSelector);
  if (query.resourceVersion !== undefined && query.resourceVersion !== '')
    search.set('resourceVersion', query.resourceVersion);
  if (query.resourceVersionMatch) search.set('resourceVersionMatch', query.resourceVersionMatch);
  if (query.timeoutSeconds !== undefined) search.set('timeoutSeconds', String(query.timeoutSeconds));
  if (query.watch) {
    if (query.limit !== undefined || query.continue)
      throw new BadRequestError('limit and continue cannot be combined with watch=true');
    search.set('watch', 'true');
    if (query.allowWatchBookmarks) search.set('allowWatchBookmarks', 'true');
  } else {
    if (query.limit !== undefined) search.set('limit', String(query.limit));
    if (query.continue) search.set('continue', query.continue);
  }
  return search;
}

/** Watching one object is a watch on its collection narrowed to its name. */
export function objectWatchSearch(query: ReadQuery, name: string): URLSearchParams {
  const byName = `metadata.name=${name}`;
  return listSearch({ ...query, fieldSelector: query.fieldSelector ? `${byName},${query.fieldSelector}` : byName });
}

/** The upstream query string of a get. */
export function getSearch(query: ReadQuery): URLSearchParams {
  const search = new URLSearchParams();
  if (query.resourceVersion !== undefined && query.resourceVersion !== '')
    search.set('resourceVersion', query.resourceVersion);
  return search;
}

/** path?query, leaving out an empty query. */
export function withSearch(path: string, search: URLSearchParams): string {
  const text = search.toString();
  return text ? `${path}?${text}` : path;
}
