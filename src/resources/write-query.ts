// Query parameters of writes (POST, PUT, PATCH, DELETE) that pass through to the cluster:
// dryRun=All and fieldManager on every write, force on server-side apply.
import { Type, type Static } from 'typebox';

/** The query string of a create or replace. */
export const writeQueryProperties = {
  dryRun: Type.Optional(Type.Unsafe<'All'>({ type: 'string', enum: ['All'] })),
  fieldManager: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: '^[\\x20-\\x7e]+$' })),
  'x-cluster-name': Type.Optional(Type.String()),
};
export const WriteQuery = Type.Object(writeQueryProperties);

/**
 * The query string of a patch: also the patch type, and `force` (only for patchType=apply: take ownership of
 * conflicting fields).
 */
export const PatchQuery = Type.Object({
  ...writeQueryProperties,
  patchType: Type.Optional(Type.String({ maxLength: 32 })),
  force: Type.Optional(Type.Boolean()),
});
export type WriteQuery = Static<typeof WriteQuery> & Partial<Pick<Static<typeof PatchQuery>, 'force'>>;

/** The upstream query string of a create, replace or patch. */
export function writeSearch(query: WriteQuery, options: { apply?: boolean } = {}): URLSearchParams {
  const search = new URLSearchParams();
  if (query.dryRun) search.set('dryRun', query.dryRun);
  if (query.fieldManager) search.set('fieldManager', query.fieldManager);
  if (options.apply && query.force) search.set('force', 'true');
  return search;
}
