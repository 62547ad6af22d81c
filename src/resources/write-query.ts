// Query parameters of writes (POST, PUT, PATCH, DELETE) that pass through to the cluster:
// dryRun=All and fieldManager on every write, force on server-side apply.
export interface WriteQuery {
  dryRun?: 'All';
  fieldManager?: string;
  /** Only for patchType=apply: take ownership of conflicting fields. */
  force?: boolean;
}

export const writeQueryProperties = {
  dryRun: { type: 'string', enum: ['All'] },
  fieldManager: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[\\x20-\\x7e]+$' },
  'x-cluster-name': { type: 'string' },
} as const;

/** The upstream query string of a create, replace or patch. */
export function writeSearch(query: WriteQuery, options: { apply?: boolean } = {}): URLSearchParams {
  const search = new URLSearchParams();
  if (query.dryRun) search.set('dryRun', query.dryRun);
  if (query.fieldManager) search.set('fieldManager', query.fieldManager);
  if (options.apply && query.force) search.set('force', 'true');
  return search;
}
