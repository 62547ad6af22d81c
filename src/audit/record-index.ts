// Every replica's in-memory view of the whole audit trail: the records of all AuditChunks (any
// replica's), newest first, fed by the chunk watch. Queries read only this; they never call the
// host cluster. Changes are applied when the next query comes: removed chunks in one pass, new
// records sorted among themselves and merged in (chunks mostly arrive in time order, so this is
// linear), never a full re-sort of the trail per chunk.
import { createHash } from 'node:crypto';
import type { AuditChunkResource } from './chunk-store.js';
import { newestFirst, type AuditRecord } from './record.js';

/** A record with its numeric id (Kite's `id`): the same on every replica, stable while it exists. */
export interface IndexedRecord {
  id: number;
  chunk: string;
  record: AuditRecord;
  /** The resource name in lower case, for `search`. */
  lowerName: string;
}

/** Record positions a chunk may have in an id (chunks hold at most MAX_CHUNK_RECORDS records). */
const POSITION_BITS = 2 ** 13;
export const MAX_CHUNK_RECORDS = POSITION_BITS - 1;

/** A 40-bit number from a chunk's name; ids are that times 2^13 plus the position (< 2^53). */
function chunkNumber(name: string): number {
  return createHash('sha256').update(name).digest().readUIntBE(0, 5);
}

function byNewest(a: IndexedRecord, b: IndexedRecord): number {
  return newestFirst(a.record, b.record) || b.id - a.id;
}

/** The exact-match filters of Kite's query that have a lookup of their own (positionsOf). */
export type IndexedField = 'operatorId' | 'operation' | 'cluster' | 'resourceType' | 'name' | 'namespace';

function fieldValue(record: AuditRecord, field: IndexedField): string | number {
  return field === 'operatorId' ? record.operator.id : field === 'resourceType' ? record.resourceType : record[field];
}

export class AuditRecordIndex {
  /** Newest first, up to the changes not applied yet. */
  private sorted: IndexedRecord[] = [];
  /** Per field, per value: the positions in `sorted` (ascending), built on first use after a change. */
  private readonly positions = new Map<IndexedField, Map<string | number, number[]>>();
  private readonly chunks = new Map<string, { version: string; count: number }>();
  private pendingAdds: IndexedRecord[] = [];
  private pendingDeletes = new Set<string>();

  /** A chunk appeared or changed (seen again unchanged after a re-list: ignored). */
  add(chunk: AuditChunkResource): void {
    const name = chunk.metadata.name;
    const version = `${chunk.metadata.uid ?? ''}/${chunk.metadata.resourceVersion ?? ''}`;
    const known = this.chunks.get(name);
    if (known && known.version === version) return;
    if (known) this.remove(name);
    const records = chunk.spec?.records ?? [];
    const base = chunkNumber(name) * POSITION_BITS;
    records.slice(0, MAX_CHUNK_RECORDS).forEach((record, position) => {
      this.pendingAdds.push({ id: base + position, chunk: name, record, lowerName: (record.name ?? '').toLowerCase() });
    });
    this.chunks.set(name, { version, count: records.length });
  }

  /** A chunk was deleted (pruned, or removed by hand). */
  remove(name: string): void {
    if (!this.chunks.delete(name)) return;
    this.pendingDeletes.add(name);
    if (this.pendingAdds.some((e) => e.chunk === name))
      this.pendingAdds = this.pendingAdds.filter((e) => e.chunk !== name);
  }

  /** Records in the index, all chunks. */
  get size(): number {
    this.apply();
    return this.sorted.length;
  }

  /** Every record, newest first (the caller must not change the array). */
  newestFirst(): readonly IndexedRecord[] {
    this.apply();
    return this.sorted;
  }

  /**
   * The positions in newestFirst() (ascending: newest first) of the records whose `field` is
   * `value`. A query with an exact filter scans only these instead of the whole trail; the
   * lookup of a field is built in one pass the first time it is asked for after a change.
   */
  positionsOf(field: IndexedField, value: string | number): readonly number[] {
    this.apply();
    let byValue = this.positions.get(field);
    if (!byValue) {
      byValue = new Map();
      for (let i = 0; i < this.sorted.length; i++) {
        const key = fieldValue(this.sorted[i].record, field);
        const list = byValue.get(key);
        if (list) list.push(i);
        else byValue.set(key, [i]);
      }
      this.positions.set(field, byValue);
    }
    return byValue.get(value) ?? [];
  }

  private apply(): void {
    if (this.pendingDeletes.size === 0 && this.pendingAdds.length === 0) return;
    this.positions.clear();
    if (this.pendingDeletes.size > 0) {
      const gone = this.pendingDeletes;
      this.pendingDeletes = new Set();
      this.sorted = this.sorted.filter((e) => !gone.has(e.chunk));
    }
    if (this.pendingAdds.length === 0) return;
    const adds = this.pendingAdds.sort(byNewest);
    this.pendingAdds = [];
    this.sorted = merge(adds, this.sorted);
  }
}

/** Merges two newest-first lists into one. */
function merge(a: IndexedRecord[], b: IndexedRecord[]): IndexedRecord[] {
  if (b.length === 0) return a;
  // The usual case: everything new is newer than everything known.
  if (byNewest(a[a.length - 1], b[0]) <= 0) return a.concat(b);
  const out = new Array<IndexedRecord>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = byNewest(a[i], b[j]) <= 0 ? a[i++] : b[j++];
  while (i < a.length) out[k++] = a[i++]!;
  while (j < b.length) out[k++] = b[j++]!;
  return out;
}
