// The "Events:" section of kubectl describe: the object's core/v1 Events, found as kubectl's
// searchEvents finds them (a field selector on the involved object's name, namespace, kind and UID),
// printed oldest first with their age, count, source and the involved field.
import { num, str, since, type Json } from './format.js';
import type { RelatedReader } from './related.js';
import type { DescribeWriter } from './text.js';

/** The involved object as kubectl references it; an empty kind or uid is left out of the selector. */
export interface EventRef {
  kind: string;
  name: string;
  /** "" for a cluster-scoped object (its events are searched in all namespaces). */
  namespace: string;
  uid: string;
}

/** fields.EscapeValue: a backslash, comma or equals sign in a field selector value. */
function escapeFieldValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/,/g, '\\,').replace(/=/g, '\\=');
}

/** The reference kubectl builds for an object (reference.GetReference). */
export function refOf(object: Json): EventRef {
  return {
    kind: str(object.kind),
    name: str(object.metadata?.name),
    namespace: str(object.metadata?.namespace),
    uid: str(object.metadata?.uid),
  };
}

/** The object's events (throws when the caller may not list events there). */
export async function searchEvents(related: RelatedReader, ref: EventRef): Promise<Json[]> {
  const fields: Array<[string, string]> = [
    ['involvedObject.name', ref.name],
    ['involvedObject.namespace', ref.namespace],
  ];
  if (ref.kind) fields.push(['involvedObject.kind', ref.kind]);
  if (ref.uid) fields.push(['involvedObject.uid', ref.uid]);
  const fieldSelector = fields
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${escapeFieldValue(v)}`)
    .join(',');
  return related.list('events', ref.namespace || undefined, { fieldSelector });
}

/**
 * Like searchEvents, but a failed search is an empty list: kubectl ignores the error and prints
 * "Events: <none>" (its search hands back the list it had started, empty, with the error).
 */
export async function eventsOrNone(related: RelatedReader, ref: EventRef): Promise<Json[]> {
  try {
    return await searchEvents(related, ref);
  } catch (err) {
    if (related.isAborted()) throw err;
    return [];
  }
}

function lastTimestampMs(e: Json): number {
  const ms = typeof e.lastTimestamp === 'string' ? Date.parse(e.lastTimestamp) : NaN;
  return Number.isNaN(ms) ? -Infinity : ms;
}

/** The Age column: since the first sighting, with the count and the last one for a repeated event. */
function eventAge(e: Json): string {
  const first = e.eventTime ? since(e.eventTime) : since(e.firstTimestamp);
  if (e.series) return `${since(e.series.lastObservedTime)} (x${num(e.series.count)} over ${first})`;
  const count = num(e.count);
  if (count > 1) return `${since(e.lastTimestamp)} (x${count} over ${first})`;
  return first;
}

/** kubectl's DescribeEvents (oldest last-seen first; the sort is stable for the short lists it sorts). */
export function describeEvents(w: DescribeWriter, events: Json[]): void {
  if (events.length === 0) {
    w.write(0, 'Events:\t<none>\n');
    return;
  }
  w.flush();
  const sorted = [...events].sort((a, b) => {
    const [x, y] = [lastTimestampMs(a), lastTimestampMs(b)];
    return x < y ? -1 : x > y ? 1 : 0;
  });
  w.write(0, 'Events:\n  Type\tReason\tAge\tFrom\tMessage\n');
  w.write(1, '----\t------\t----\t----\t-------\n');
  for (const e of sorted) {
    const source = str(e.source?.component) || str(e.reportingComponent);
    const fieldPath = str(e.involvedObject?.fieldPath);
    const message = fieldPath ? `${fieldPath}: ${str(e.message).trim()}` : str(e.message).trim();
    w.write(1, `${str(e.type)}\t${str(e.reason)}\t${eventAge(e)}\t${source}\t${message}\n`);
  }
}
