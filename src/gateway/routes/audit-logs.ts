// Kite's audit-log page (Settings → Audit logs): GET /api/v1/admin/audit-logs with Kite's query
// parameters (page, size, operatorId, search, operation, cluster, resourceType, resourceName,
// namespace) and answer {data, total, page, size}, newest first, for admins. It reads the
// replica's in-memory view of the whole trail (src/audit/), never the host cluster.
import { Type, type Static } from 'typebox';
import { NotFoundError, ServiceUnavailableError } from '../../errors.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, parseAuditQuery } from '../../audit/query.js';
import { bothSlashes, objectOf, resourceHistoryProperties, schemaOf, stringEnum, type App } from '../schemas.js';

const PREFIX = '/api/v1/admin/audit-logs';
/** How long a query waits for a trail that is still loading (a gateway that just started). */
const TRAIL_LOAD_WAIT_MS = 10_000;

const filter = (description: string) => Type.Optional(Type.String({ maxLength: 1000, description }));
// Strings here: query.ts parses and checks each value, answering Kite's "invalid page parameter".
const AuditLogQuery = Type.Object({
  page: filter('page number, from 1 (default 1)'),
  size: filter(`records per page, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE})`),
  operatorId: filter('only what this user (by id) did; 0 or empty: everyone'),
  search: filter('a part of the resource name, any case'),
  operation: filter('the operation: create, update, patch, delete, login, ...'),
  cluster: filter('the target cluster'),
  resourceType: filter('the resource (plural name: deployments, users, ...)'),
  resourceName: filter('the resource name, exactly'),
  namespace: filter('the namespace'),
});

const str = Type.String();
const int = Type.Integer();
const AuditLog = objectOf(
  {
    ...resourceHistoryProperties({
      resourceYaml: 'always empty: kiteline never stores objects',
      previousYaml: 'always empty',
    }),
    errorMessage: Type.String({ description: 'the HTTP status of a failed action, e.g. "HTTP 403 Forbidden"' }),
    operator: objectOf({
      id: int,
      username: str,
      name: str,
      provider: stringEnum(['password', 'api_key', 'anonymous']),
      kind: stringEnum(['user', 'apikey', 'anonymous']),
    }),
    status: Type.Integer({ description: 'the HTTP status of the answer' }),
    requestId: str,
    clientAddress: str,
    path: Type.String({ description: 'the request path, without its query' }),
    objectId: Type.String({ description: 'admin routes with an :id: that id' }),
    subject: Type.String({
      description:
        'what else the action names: the user of a role assignment, the file of an upload, the container of a terminal',
    }),
    dryRun: Type.Boolean(),
    bytesIn: Type.Integer({ description: 'sessions: bytes from the client' }),
    bytesOut: Type.Integer({ description: 'sessions: bytes to the client' }),
    arguments: Type.String({ description: "MCP tool calls: the call's arguments as JSON, without secret values" }),
    recording: Type.String({
      description:
        'recorded sessions: the recording id; GET /api/v1/admin/sessions/<id> (and /<id>/replay, the replay page)',
    }),
  },
  'one audited action (Kite ResourceHistory shape, plus kiteline fields)',
);

const AuditLogPage = objectOf({ data: Type.Array(AuditLog), total: int, page: int, size: int });

export default async function auditLogRoutes(app: App) {
  const schema = schemaOf('operations')('The audit trail (Kite audit logs), newest first (role admin)', {
    description:
      'Every write through the gateway, logins, failed logins and proxy sessions, from every replica, ' +
      'kept per the audit retention. Filters are exact matches except `search`.',
    querystring: AuditLogQuery,
    response: { 200: AuditLogPage },
  });
  const list = async (request: { query: Static<typeof AuditLogQuery> }) => {
    const trail = app.services.audit.trail;
    if (!trail)
      throw new NotFoundError('the audit trail is off (KITELINE_AUDIT_TRAIL=false); audit records are only in the log');
    const query = parseAuditQuery(request.query);
    if (!(await trail.loaded(TRAIL_LOAD_WAIT_MS)))
      throw new ServiceUnavailableError('the audit trail is still loading (the gateway started a moment ago); retry');
    return trail.query(query);
  };
  bothSlashes(PREFIX, (url) => app.get(url, { schema }, list));
}
