// /mcp: kiteline as a Model Context Protocol server (docs/mcp.md), Streamable HTTP with the
// official SDK. Stateless by default: each POST builds the caller's server (src/mcp/server.ts) and
// answers in JSON, so any replica answers any call and nothing outlives the request. A client whose
// initialize says it can answer questions (elicitation) gets a session instead (src/mcp/sessions.ts):
// its write tools ask a human through it, so its POSTs come back to this replica's server, answers
// are server-sent events, and DELETE ends it. GET is 405 (no stream of the server's own).
// Callers authenticate with an API key (Authorization), never the session cookie: an agent holds
// a key of its user's, and a page elsewhere cannot make a browser send one (no CSRF); anonymous: 401.
import { request as httpRequest, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pipeline } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { entryOrigin } from '../../audit/record.js';
import type { Principal } from '../../auth/principal.js';
import { RateLimiter } from '../../auth/rate-limiter.js';
import { sha256 } from '../../credentials/secrets-compare.js';
import { UnauthorizedError } from '../../errors.js';
import { credentialDigest, holderOf, McpSessions, newSessionId } from '../../mcp/sessions.js';
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
 * The MCP SDK and the tools load at the first call: about half a second of the process's start
 * otherwise (docs/fleet.md), for an endpoint many installations never use.
 */
async function mcpModules() {
  const [{ StreamableHTTPServerTransport }, { createMcpServer }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('../../mcp/server.js'),
  ]);
  return { StreamableHTTPServerTransport, createMcpServer };
}

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
 * A request one replica hands to another (the holder of its session) carries, instead of the
 * client's credential, the handing replica's claim: `<credential digest>.<expiry>.<signature>`,
 * signed with the key every replica shares over the method, session, digest, expiry and body.
 * The credential itself never leaves the replica it was sent to (an address that is no longer a
 * replica's, after a rollout, learns nothing it can use), and a claim is good for a few seconds,
 * for that one body. A handed-over request is never handed on again.
 */
const FORWARDED_HEADER = 'x-kiteline-mcp-forwarded';
const HOP_PURPOSE = 'mcp-session-hop';
const HOP_SECONDS = 30;
const HOP_CONNECT_MS = 5000;
/** What a handed-over request keeps of the client's headers. */
const FORWARDED_REQUEST_HEADERS = [
  'content-type',
  'accept',
  'user-agent',
  SESSION_HEADER,
  'mcp-protocol-version',
  'last-event-id',
];
/** The text a hop's claim signs. */
function hopClaim(method: string, sessionId: string, credential: string, expiry: number, body: string): string {
  return [method, sessionId, credential, expiry, sha256(body).toString('hex')].join('\n');
}
const FORWARDED_ANSWER_HEADERS = ['content-type', 'cache-control', SESSION_HEADER, 'mcp-protocol-version', 'allow'];

/**
 * Streamable HTTP's answer to a session id nobody holds (the client starts a new one): a JSON-RPC
 * error, written as it is (not an error of the API's shape).
 */
function writeUnknownSession(raw: ServerResponse) {
  const body = {
    jsonrpc: '2.0',
    error: { code: -32001, message: 'session not found: initialize a new one' },
    id: null,
  };
  raw.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function unknownSession(reply: FastifyReply) {
  reply.hijack();
  writeUnknownSession(reply.raw);
}

export default async function mcpRoutes(app: App) {
  const { services } = app;
  // Tool calls per principal and minute (in memory, per replica, like the login limit).
  const toolCalls = new RateLimiter(services.config.mcpToolCallsPerMinute, 60);
  const sessions = new McpSessions();
  app.addHook('onClose', async () => sessions.endAll());

  /**
   * A request of a session this replica does not hold: handed to the replica its id names (a POST
   * that reached the wrong replica behind a Service), or 404 when it names none, names this one,
   * was handed over already, or its holder cannot be reached (gone: the client starts anew).
   */
  function toHolder(request: FastifyRequest, reply: FastifyReply, sessionId: string, credential: string) {
    const holder = holderOf(sessionId, services.auth);
    if (!holder || holder === services.config.peerUrl) return unknownSession(reply);
    reply.hijack();
    const body = request.method === 'POST' ? JSON.stringify(request.body) : '';
    // Not the client's credential: this replica has checked it, and says so for this one request.
    const expiry = Math.floor(Date.now() / 1000) + HOP_SECONDS;
    const claim = hopClaim(request.method, sessionId, credential, expiry, body);
    const headers: Record<string, string> = {
      [FORWARDED_HEADER]: `${credential}.${expiry}.${services.auth.sign(HOP_PURPOSE, claim)}`,
      // The client's address as this replica saw it: the holder believes it only from a trusted proxy.
      'x-forwarded-for': request.ip,
      'content-length': String(Buffer.byteLength(body)),
    };
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = request.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const url = new URL(MCP_PATH, `${holder}/`);
    const upstream = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method: request.method, headers });
    const connecting = setTimeout(() => upstream.destroy(new Error('the holder did not answer')), HOP_CONNECT_MS);
    upstream.once('response', (answer) => {
      clearTimeout(connecting);
      const kept: Record<string, string> = {};
      for (const name of FORWARDED_ANSWER_HEADERS) {
        const value = answer.headers[name];
        if (typeof value === 'string') kept[name] = value;
      }
      reply.raw.writeHead(answer.statusCode ?? 502, kept);
      // Either side ending early ends the other (a holder gone mid-stream ends the client's answer).
      pipeline(answer, reply.raw, () => upstream.destroy());
    });
    upstream.once('error', () => {
      clearTimeout(connecting);
      if (!reply.raw.headersSent) writeUnknownSession(reply.raw);
      else reply.raw.destroy();
    });
    reply.raw.once('close', () => upstream.destroy());
    upstream.end(body);
  }

  /**
   * A request another replica handed over: its claim (the credential's digest that replica checked,
   * for this method, session and body, until a few seconds from now) must hold under the key every
   * replica shares; then the session of that credential answers it, with the caller it has.
   */
  function fromPeer(request: FastifyRequest, reply: FastifyReply, sessionId: string | undefined) {
    const [credential, expiryText, signature] = String(request.headers[FORWARDED_HEADER]).split('.');
    const expiry = Number(expiryText);
    const now = Date.now() / 1000;
    const body = request.method === 'POST' ? JSON.stringify(request.body) : '';
    const holds =
      sessionId !== undefined &&
      signature !== undefined &&
      Number.isInteger(expiry) &&
      expiry >= now &&
      expiry <= now + HOP_SECONDS + 1 &&
      services.auth.signed(HOP_PURPOSE, hopClaim(request.method, sessionId, credential, expiry, body), signature);
    if (!holds) throw new UnauthorizedError('a handed-over MCP request whose claim does not hold');
    return toSession(request, reply, sessionId, credential, 'handedOver');
  }

  /**
   * A request of a session (a POST of its messages, or the DELETE that ends it), by the credential
   * with this digest: answered here when this replica holds that session; else handed to the
   * replica its id names, then 404. `caller` is the authenticated caller (from now on the
   * session's), or `handedOver` for a request another replica handed here: the session keeps its
   * caller, and a request is never handed on twice.
   */
  function toSession(
    request: FastifyRequest,
    reply: FastifyReply,
    sessionId: string,
    credential: string,
    caller: Principal | 'handedOver',
  ) {
    const handedOver = caller === 'handedOver';
    const session = sessions.use(sessionId, credential, handedOver ? undefined : caller, request);
    if (!session) return handedOver ? unknownSession(reply) : toHolder(request, reply, sessionId, credential);
    if (request.method === 'DELETE') {
      sessions.end(sessionId);
      return reply.code(204).send();
    }
    reply.hijack();
    return session.transport.handleRequest(request.raw, reply.raw, request.body);
  }

  /** The digest of the caller's API key; a session cookie alone is refused (agents hold keys). */
  function credentialOf(request: FastifyRequest): string {
    const { authorization } = request.headers;
    if (!authorization)
      throw new UnauthorizedError('MCP takes an API key (Authorization: Bearer <key>), not a session cookie');
    return credentialDigest(authorization);
  }

  /** Checked by the caller's own credential, or (a request handed over by another replica) in fromPeer. */
  const callerOrPeer = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.headers[FORWARDED_HEADER] === undefined) await app.requireUser(request, reply);
  };

  app.post(
    MCP_PATH,
    {
      onRequest: callerOrPeer,
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
      const sessionId = request.headers[SESSION_HEADER];
      if (request.headers[FORWARDED_HEADER] !== undefined)
        return fromPeer(request, reply, typeof sessionId === 'string' ? sessionId : undefined);
      const principal = request.principal!;
      const credential = credentialOf(request);
      if (typeof sessionId === 'string') return toSession(request, reply, sessionId, credential, principal);
      const client = String(request.headers['user-agent'] ?? '').slice(0, MAX_CLIENT_LENGTH);
      // A user's MCP tokens share the user's budget (a user may hold several); an API key has its own.
      const budget = [principal.tokenAudience ? `user:${principal.name}` : `${principal.kind}:${principal.id}`];
      const session = asksForSession(request.body);
      // A session's calls end with the session, a stateless call's with its HTTP request.
      const ended = new AbortController();
      // A session's server keeps its own copy of the caller and the request, updated by each POST.
      const caller = session ? { ...principal } : principal;
      const answering = { id: request.id, ip: request.ip, url: request.url };
      const { StreamableHTTPServerTransport, createMcpServer } = await mcpModules();
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
        sessionIdGenerator: () => newSessionId(services.config.peerUrl, services.auth),
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
  app.delete(MCP_PATH, { onRequest: callerOrPeer, schema: { hide: true } }, async (request, reply) => {
    const sessionId = request.headers[SESSION_HEADER];
    if (request.headers[FORWARDED_HEADER] !== undefined)
      return fromPeer(request, reply, typeof sessionId === 'string' ? sessionId : undefined);
    if (typeof sessionId !== 'string') return notAllowed(reply, 'POST');
    return toSession(request, reply, sessionId, credentialOf(request), request.principal!);
  });
}
