// Which audit chunks the retention lets go: those whose newest record is older than the maximum
// age, and those wholly past the newest maxRecords records (chunks counted newest first). Whole
// chunks are deleted, so storage may hold up to one chunk more than the limit per replica while
// queries already show exactly the newest maxRecords (query.ts).

export interface ChunkSummary {
  name: string;
  /** Time of the chunk's newest record (ISO 8601). */
  newest: string;
  count: number;
}

export interface Retention {
  maxAgeSeconds: number;
  maxRecords: number;
}

/** The oldest record time the retention keeps at `now` (ISO 8601). */
export function retainedSince(retention: Retention, now = Date.now()): string {
  return new Date(now - retention.maxAgeSeconds * 1000).toISOString();
}

/** Names of the chunks to delete, oldest first. */
export function chunksToPrune(chunks: readonly ChunkSummary[], retention: Retention, now = Date.now()): string[] {
  const notBefore = retainedSince(retention, now);
  const newestFirst = [...chunks].sort((a, b) =>
    a.newest !== b.newest ? (a.newest < b.newest ? 1 : -1) : a.name < b.name ? 1 : -1,
  );
  const prune: string[] = [];
  let newer = 0;
  for (const chunk of newestFirst) {
    if (chunk.newest < notBefore || newer >= retention.maxRecords) prune.push(chunk.name);
    newer += chunk.count;
  }
  return prune.reverse();
}
