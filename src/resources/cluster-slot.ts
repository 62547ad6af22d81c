// A request's hold on its cluster: one of the caller's slots there (429 with Retry-After beyond
// the per-principal limits, clusters/caller-limits.ts), given back when the answer is over, sent,
// failed or left by the client. A long-running answer (a watch, a delete that waits until the
// object is gone) may be silent for minutes: it lifts the server's idle timeout for itself.
import type { FastifyReply } from 'fastify';
import type { Principal } from '../auth/principal.js';
import type { ClusterConnection } from '../clusters/types.js';

/** Takes the caller's slot on the cluster for this request, until its answer is over. */
export function holdClusterSlot(
  reply: FastifyReply,
  conn: ClusterConnection,
  principal: Principal,
  longRunning: boolean,
): void {
  const release = conn.admit(`${principal.kind}:${principal.id}`, longRunning);
  if (reply.raw.closed) return release();
  reply.raw.once('close', release);
  if (longRunning) reply.raw.setTimeout(0);
}

/** Whether a resource request is long-running: a watch, or a delete that waits (the default). */
export function isLongRunning(method: string, query: { watch?: boolean; wait?: boolean; dryRun?: string }): boolean {
  if (method === 'GET') return query.watch === true;
  return method === 'DELETE' && query.wait !== false && !query.dryRun;
}
