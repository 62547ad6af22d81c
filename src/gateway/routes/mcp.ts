// POST /mcp: kiteline as a Model Context Protocol server (docs/mcp.md), Streamable HTTP with the
// official SDK, stateless: each POST builds the caller's server (src/mcp/server.ts) and answers in
// JSON, so any replica answers any call and nothing outlives the request. GET and DELETE (a
// server-sent stream, a session to end) are 405: there are no sessions to resume or end.
// Callers authenticate with an API key (Authorization), never the session cookie: an agent holds
// a key of its user's, and a page elsewhere cannot make a browser send one (no CSRF); anonymous: 401.
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { entryOrigin } from '../../audit/record.js';
import { RateLimiter } from '../../auth/rate-limiter.js';
import { UnauthorizedError } from '../../errors.js';
import { createMcpServer } from '../../mcp/server.js';
import { MCP_PATH } from '../plugins/authenticate.js';
import { schemaOf, streamed, type App } from '../schemas.js';
import { withClientSignal } from '../tool-request.js';

const schema = schemaOf('mcp');
/** The agent's client as the audit record names it: its User-Agent, bounded. */
const MAX_CLIENT_LENGTH = 128;

const JsonRpcAnswer = streamed({
  description: 'the JSON-RPC answer (application/json), written by the MCP SDK',
  content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
});

export default async function mcpRoutes(app: App) {
  const { services } = app;
  // Tool calls per principal and minute (in memory, per replica, like the login limit).
  const toolCalls = new RateLimiter(services.config.mcpToolCallsPerMinute, 60);

  app.post(
    MCP_PATH,
    {
      onRequest: app.requireUser,
      schema: schema('Model Context Protocol (Streamable HTTP, stateless): tools acting as the caller', {
        description:
          'JSON-RPC 2.0 messages of MCP: initialize, tools/list, tools/call. Authenticate with an API key ' +
          '(Authorization: Bearer <key>); send Accept: application/json, text/event-stream. Every tool call ' +
          "is authorized with the key's roles and audited.",
        documentedBody: { description: 'a JSON-RPC 2.0 request, notification or batch' },
        response: { 200: JsonRpcAnswer },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const principal = request.principal!;
      if (!request.headers.authorization)
        throw new UnauthorizedError('MCP takes an API key (Authorization: Bearer <key>), not a session cookie');
      const origin = entryOrigin(principal, request);
      const client = String(request.headers['user-agent'] ?? '').slice(0, MAX_CLIENT_LENGTH);
      // A user's MCP tokens share the user's budget (a user may hold several); an API key has its own.
      const caller = [principal.tokenAudience ? `user:${principal.name}` : `${principal.kind}:${principal.id}`];
      const server = createMcpServer(principal, {
        clusters: services.clusters,
        auth: services.auth,
        hostGuard: services.hostGuard,
        searchIndexes: services.searchIndexes,
        signal,
        client,
        audit: (entry) => services.audit.record({ ...origin, ...entry }),
        overLimit: () => {
          const wait = toolCalls.retryAfter(caller);
          if (wait === undefined) toolCalls.record(caller);
          return wait;
        },
        counted: (tool, result) => services.metrics.mcpToolCalled(tool, result),
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.hijack();
      reply.raw.once('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    }),
  );

  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: MCP_PATH,
      onRequest: app.requireUser,
      // Not operations of the API: Streamable HTTP's way of saying "no stream, no session".
      schema: { hide: true },
      handler: async (_request, reply) =>
        reply.code(405).header('allow', 'POST').send({
          error: 'the MCP endpoint is stateless: POST JSON-RPC messages',
          reason: 'MethodNotAllowed',
          code: 405,
        }),
    });
  }
}
