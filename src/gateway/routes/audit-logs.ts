// Kite's audit-log page (Settings → Audit logs): GET /api/v1/admin/audit-logs with Kite's query
// parameters (page, size, operatorId, search, operation, cluster, resourceType, resourceName,
// namespace) and answer {data, total, page, size}, newest first, for admins. It reads the
// replica's in-memory view of the whole trail (src/audit/), never the host cluster.
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../../errors.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, parseAuditQuery } from '../../audit/query.js';
import { objectOf, replies, resourceHistoryProperties } from '../schemas.js';

const PREFIX = '/api/v1/admin/audit-logs';

const filter = (description: string) => ({ type: 'string', maxLength: 1000, description });
// Strings here: query.ts parses and checks each value, answering Kite's "invalid page parameter".
const querystring = {
  type: 'object',
  properties: {
    page: filter('page number, from 1 (default 1)'),
    size: filter(`records per page, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE})`),
    operatorId: filter('only what this user (by id) did; 0 or empty: everyone'),
    search: filter('a part of the resource name, any case'),
    operation: filter('the operation: create, update, patch, delete, login, ...'),
    cluster: filter('the target cluster'),
    resourceType: filter('the resource (plural name: deployments, users, ...)'),
    resourceName: filter('the resource name, exactly'),
    namespace: filter('the namespace'),
  },
} as const;

const str = { type: 'string' };
const int = { type: 'integer' };
const auditLog = objectOf(
  {
    ...resourceHistoryProperties({ resourceYaml: 'always empty: kiteline never stores objects', previousYaml: 'always empty' }),
    errorMessage: { type: 'string', description: 'the HTTP status of a failed action, e.g. "HTTP 403 Forbidden"' },
    operator: objectOf({ id: int, username: str, name: str, provider: { type: 'string', enum: ['password', 'api_key', 'anonymous'] }, kind: { type: 'string', enum: ['user', 'apikey', 'anonymous'] } }),
    status: { type: 'integer', description: 'the HTTP status of the answer' },
    requestId: str,
    clientAddress: str,
    path: { type: 'string', description: 'the request path, without its query' },
    objectId: { type: 'string', description: 'admin routes with an :id: that id' },
    subject: { type: 'string', description: 'what else the action names: the user of a role assignment, the file of an upload, the container of a terminal' },
    dryRun: { type: 'boolean' },
    bytesIn: { type: 'integer', description: 'sessions: bytes from the client' },
    bytesOut: { type: 'integer', description: 'sessions: bytes to the client' },
  },
  'one audited action (Kite ResourceHistory shape, plus kiteline fields)',
);

export default async function auditLogRoutes(app: FastifyInstance) {
  const route = {
    onRequest: app.requireAdmin,
    schema: {
      tags: ['operations'],
      summary: 'The audit trail (Kite audit logs), newest first (role admin)',
      description:
        'Every write through the gateway, logins, failed logins and proxy sessions, from every replica, kept per the audit retention. Filters are exact matches except `search`.',
      querystring,
      response: replies({ 200: objectOf({ data: { type: 'array', items: auditLog }, total: int, page: int, size: int }) }),
    },
  };
  const list = async (request: { query: unknown }) => {
    const trail = app.services.audit.trail;
    if (!trail) throw new NotFoundError('the audit trail is off (KITELINE_AUDIT_TRAIL=false); audit records are only in the log');
    return trail.query(parseAuditQuery(request.query as Record<string, unknown>));
  };
  app.get(PREFIX, route, list);
  app.get(`${PREFIX}/`, route, list);
}
