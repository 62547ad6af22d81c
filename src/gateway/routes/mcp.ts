// /mcp: kiteline as a Model Context Protocol server (docs/mcp.md), Streamable HTTP with the
// official SDK. Stateless by default: each POST builds the caller's server (src/mcp/server.ts) and
// answers in JSON, so any replica answers any call and nothing outlives the request. A client whose
// initialize says it can answer questions (elicitation) gets a session instead (src/mcp/sessions.ts):
// its write tools ask a human through it, so its POSTs come back to this replica's server, answers
// are server-sent events, and DELETE ends it. GET is 405 (no stream of the server's own).
// Callers authenticate with an API key (Authorization), never the session cookie: an agent holds
// a key of its user's, and a page elsewhere cannot make a browser send one (no CSRF); anonymous: 401.
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyReply } from 'fastify';
import { entryOrigin } from '../../audit/record.js';
import { RateLimiter } from '../../auth/rate-limiter.js';
import { UnauthorizedError } from '../../errors.js';
import { createMcpServer } from '../../mcp/server.js';
import { credentialDigest, McpSessions } from '../../mcp/sessions.js';
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

const SESSION_HEADER = 'mcp-session-id';

/**
 * Does this JSON-RPC message open a session that can answer questions: an initialize whose client
 * declares form elicitation (`elicitation: {}` is the 2025-06-18 way of saying it)?
 */
function asksForSession(body: unknown): boolean {
  const message = body as { method?: unknown; params?: { capabilities?: { elicitation?: unknown } } } | undefined;
  const elicitation = message?.params?.capabilities?.elicitation as Record<string, unknown> | null | undefined;
  if (message?.method !== 'initialize' || typeof elicitation !== 'object' || elicitation === null) return false;
  return Object.keys(elicitation).length === 0 || typeof elicitation.form === 'object';
}

/**
 * Streamable HTTP's answer to a session id this replica does not hold (the client starts a new
 * one): a JSON-RPC error, written as it is (not an error of the API's shape).
 */
function unknownSession(reply: FastifyReply) {
  reply.hijack();
  const body = {
    jsonrpc: '2.0',
    error: { code: -32001, message: 'session not found: initialize a new one' },
    id: null,
  };
  reply.raw.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

export default async function mcpRoutes(app: App) {
  const { services } = app;
  // Tool calls per principal and minute (in memory, per replica, like the login limit).
  const toolCalls = new RateLimiter(services.config.mcpToolCallsPerMinute, 60);
  const sessions = new McpSessions();
  app.addHook('onClose', async () => sessions.endAll());

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
      const { authorization } = request.headers;
      if (!authorization)
        throw new UnauthorizedError('MCP takes an API key (Authorization: Bearer <key>), not a session cookie');
      const credential = credentialDigest(authorization);
      const sessionId = request.headers[SESSION_HEADER];
      if (typeof sessionId === 'string') {
        const session = sessions.use(sessionId, credential, principal, request);
        if (!session) return unknownSession(reply);
        reply.hijack();
        return session.transport.handleRequest(request.raw, reply.raw, request.body);
      }
      const client = String(request.headers['user-agent'] ?? '').slice(0, MAX_CLIENT_LENGTH);
      // A user's MCP tokens share the user's budget (a user may hold several); an API key has its own.
      const budget = [principal.tokenAudience ? `user:${principal.name}` : `${principal.kind}:${principal.id}`];
      const session = asksForSession(request.body);
      // A session's calls end with the session, a stateless call's with its HTTP request.
      const ended = new AbortController();
      // A session's server keeps its own copy of the caller and the request, updated by each POST.
      const caller = session ? { ...principal } : principal;
      const answering = { id: request.id, ip: request.ip, url: request.url };
      const server = createMcpServer(caller, {
        clusters: services.clusters,
        auth: services.auth,
        hostGuard: services.hostGuard,
        searchIndexes: services.searchIndexes,
        signal: session ? ended.signal : signal,
        client,
        audit: (entry) => services.audit.record({ ...entryOrigin(caller, answering), ...entry }),
        overLimit: () => {
          const wait = toolCalls.retryAfter(budget);
          if (wait === undefined) toolCalls.record(budget);
          return wait;
        },
        counted: (tool, result) => services.metrics.mcpToolCalled(tool, result),
      });
      if (!session) {
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        reply.hijack();
        reply.raw.once('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        return transport.handleRequest(request.raw, reply.raw, request.body);
      }
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          // Ends with the credential (revoked, expired, its roles gone) like any long-lived stream.
          const forget = services.openStreams.open(principal, () => sessions.end(id));
          sessions.add(
            { id, principal: caller, request: answering, server, transport, abort: ended, forget },
            credential,
          );
        },
        onsessionclosed: (id) => sessions.end(id),
      });
      await server.connect(transport);
      reply.hijack();
      return transport.handleRequest(request.raw, reply.raw, request.body);
    }),
  );

  // Not operations of the API: Streamable HTTP's way of saying "no stream of the server's own", and
  // of ending a session.
  const notAllowed = (reply: FastifyReply, allow: string) =>
    reply.code(405).header('allow', allow).send({
      error: 'POST JSON-RPC messages to /mcp (DELETE ends a session)',
      reason: 'MethodNotAllowed',
      code: 405,
    });
  app.get(MCP_PATH, { onRequest: app.requireUser, schema: { hide: true } }, async (_request, reply) =>
    notAllowed(reply, 'POST, DELETE'),
  );
  app.delete(MCP_PATH, { onRequest: app.requireUser, schema: { hide: true } }, async (request, reply) => {
    const sessionId = request.headers[SESSION_HEADER];
    if (typeof sessionId !== 'string') return notAllowed(reply, 'POST');
    const { authorization } = request.headers;
    if (!authorization || !sessions.use(sessionId, credentialDigest(authorization), request.principal!, request))
      return unknownSession(reply);
    sessions.end(sessionId);
    return reply.code(204).send();
  });
}
