// What every resource-tool route (events, apply, node actions, history, CRDs) does first, once
// the caller is authenticated: pick the cluster the caller may use, take one of the caller's slots
// on it, build the caller's upstream headers, and an abort signal that fires when the client goes
// away. `run` wraps a handler so failures after the client left are a 499, as the resource routes do.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import type { ClusterConnection } from '../clusters/types.js';
import { selectCluster } from '../cluster-access/cluster-select.js';
import { holdClusterSlot } from '../resources/cluster-slot.js';
import { impersonationHeaders } from '../cluster-access/impersonation.js';
import { clientClosed } from '../cluster-access/upstream.js';
import type { ToolContext } from '../cluster-access/calls.js';
import { endOnRevocation } from './stream-revocation.js';

export interface ToolRequest extends ToolContext {
  principal: Principal;
}

/**
 * The caller (authenticated: onRequest) and the cluster the request selects among those it may use;
 * the cluster's name goes to the request log.
 */
export async function callerCluster(
  app: FastifyInstance,
  request: FastifyRequest,
): Promise<{ principal: Principal; conn: ClusterConnection }> {
  const principal = request.principal!;
  const conn = await selectCluster(app.services.clusters, request, (cluster) =>
    app.services.auth.canAccessCluster(principal, cluster),
  );
  request.clusterName = conn.name;
  return { principal, conn };
}

/**
 * The cluster and context of a tool request. `longRunning` (a drain, an apply that waits for a
 * CRD) lifts the server's idle timeout and takes a long-running slot.
 */
export async function toolRequest(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  signal: AbortSignal,
  longRunning = false,
): Promise<ToolRequest> {
  const { principal, conn } = await callerCluster(app, request);
  holdClusterSlot(reply, conn, principal, longRunning);
  if (longRunning) endOnRevocation(app.services, request, reply);
  return { principal, conn, headers: impersonationHeaders(conn, principal), signal };
}

/**
 * Runs a handler with a signal aborted when the client goes away; failures after that are 499s.
 * Generic in the request and reply, so a route's handler keeps the types its schema gives them.
 */
export function withClientSignal<Req extends FastifyRequest, Rep extends FastifyReply, R>(
  handler: (request: Req, reply: Rep, signal: AbortSignal) => Promise<R>,
) {
  return async (request: Req, reply: Rep): Promise<R> => {
    const controller = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    if (request.raw.socket?.destroyed) controller.abort();
    try {
      return await handler(request, reply, controller.signal);
    } catch (err) {
      if (controller.signal.aborted) throw clientClosed();
      throw err;
    }
  };
}
