// The audit log (docs/operations.md): every write through the gateway (POST, PUT, PATCH, DELETE on
// a known route, admin and resource routes alike, failed ones included) becomes exactly one JSON
// line, msg 'audit', when its response is done, and one record of the durable audit trail
// (services.audit, src/audit/, which owns every output). What the write was comes from
// AUDIT_ROUTES plus what the route resolved (request.auditDetail); request bodies are never
// logged. Admin writes are marked so that, with KITELINE_AUDIT_EVENTS=true, they also become
// Events in the install namespace.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { entryOrigin, type AuditEntry } from '../../audit/record.js';
import { USERNAME_PATTERN } from '../input-rules.js';
import { requestedClusterName } from '../../cluster-access/cluster-select.js';
import { AUDIT_ROUTES, auditField, auditKey, isWriteMethod, type AuditField, type AuditRoute } from '../audit-table.js';

/** What a route learned while handling a write and the table cannot know. */
export interface AuditDetail {
  verb?: string;
  cluster?: string;
  resource?: string;
  namespace?: string;
  name?: string;
  /** What else the action names (a file upload: the file's path). */
  subject?: string;
  dryRun?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by a route that knows more about its write than the audit table (resolved names). */
    auditDetail: AuditDetail | undefined;
  }
}

/** The cluster a resource write asked for, when it failed before the cluster was selected. */
function askedCluster(request: FastifyRequest): string | undefined {
  try {
    return requestedClusterName(request);
  } catch {
    return undefined; // a malformed name: not worth repeating
  }
}

/**
 * The name field of a route. A body.username is kept only when it is a valid username: what a
 * failed login sent as its username may be a password typed into the wrong field.
 */
function auditName(request: FastifyRequest, field: AuditField | undefined): string | undefined {
  const value = auditField(request, field);
  return field === 'body.username' && value !== undefined && !USERNAME_PATTERN.test(value) ? undefined : value;
}

function fallbackRoute(method: string, url: string): AuditRoute {
  return { verb: method.toLowerCase(), resource: url };
}

export function auditEntry(request: FastifyRequest, reply: FastifyReply, url: string): AuditEntry {
  const route = AUDIT_ROUTES[auditKey(request.method, url)] ?? fallbackRoute(request.method, url);
  const detail = request.auditDetail ?? {};
  const principal = request.principal;
  const status = reply.statusCode;
  const body = (request.body && typeof request.body === 'object' ? request.body : {}) as Record<string, unknown>;
  const verb = typeof route.verb === 'function' ? route.verb(body) : route.verb;
  const resource = route.resource ?? auditField(request, route.resourceField);
  const cluster = route.clusterScoped
    ? (detail.cluster ?? request.clusterName ?? askedCluster(request))
    : detail.cluster;
  const record: AuditEntry = {
    ...entryOrigin(principal, request, request.actor),
    when: new Date(Date.now() - reply.elapsedTime).toISOString(),
    cluster: cluster ?? '',
    verb: detail.verb ?? verb,
    resource: detail.resource ?? resource ?? '',
    namespace: detail.namespace ?? auditField(request, route.namespace) ?? '',
    name: detail.name ?? auditName(request, route.name) ?? '',
    result: status < 400 ? 'success' : 'failure',
    status,
  };
  const id = auditField(request, 'params.id');
  if (id !== undefined) record.id = id;
  const subject = detail.subject ?? auditField(request, route.subject);
  if (subject !== undefined) record.subject = subject;
  if (detail.dryRun) record.dryRun = true;
  return record;
}

export default fp(
  async function audit(app: FastifyInstance) {
    app.decorateRequest('auditDetail', undefined);

    // A write route missing from the table is still audited (verb = method), but say so early.
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        if (isWriteMethod(method) && !AUDIT_ROUTES[auditKey(method, route.url)]) {
          app.log.warn({ method, route: route.url }, 'write route missing from the audit table');
        }
      }
    });

    // Also a write whose client left before the answer: the write may well have happened.
    app.onRequestDone((request, reply) => {
      const url = request.routeOptions.url;
      if (url === undefined) return;
      const route = AUDIT_ROUTES[auditKey(request.method, url)];
      // Writes, and the few other routes the table names (the OAuth callback, a sign-in); not the
      // routes that audit each action themselves.
      if (!(isWriteMethod(request.method) || route) || route?.auditedByRoute) return;
      const adminWrite = !route?.clusterScoped;
      app.services.audit.record(auditEntry(request, reply, url), request.log, adminWrite);
    });
  },
  { name: 'kiteline-audit', dependencies: ['kiteline-request-log', 'kiteline-authenticate'] },
);
