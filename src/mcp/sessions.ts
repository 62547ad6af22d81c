// The MCP sessions of this replica (docs/mcp.md, "Sessions"): only a client that can answer a
// question (its initialize declares elicitation) gets one, because a write tool's confirmation is
// a request from the server inside the call, answered by the client in a later POST that must reach
// the server instance still waiting for it. Everything else stays stateless.
//
// A session is bound to the credential that opened it (its SHA-256, never the credential): a POST
// with the session's id and another credential is answered as if the session did not exist. It
// ends when the client deletes it, after IDLE_MS without a request, when its credential is revoked
// or expires (auth/open-streams.ts, as for any long-lived stream), or when the same credential opens
// more than MAX_PER_CREDENTIAL (its oldest goes), or the replica holds MAX_SESSIONS (the least
// recently used goes). Ending a session aborts its calls, a question waiting for a human included.
//
// With several replicas, a session's id names the replica that holds it (its peer URL, signed with
// the key all replicas share), so a replica that gets a POST of a session it does not hold can hand
// it to the holder (routes/mcp.ts) instead of answering 404; an id not signed so names nobody.
import { randomUUID } from 'node:crypto';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { AuditedRequest } from '../audit/record.js';
import type { Principal } from '../auth/principal.js';
import { sha256 } from '../credentials/secrets-compare.js';

const IDLE_MS = 30 * 60 * 1000;
const MAX_PER_CREDENTIAL = 5;
const MAX_SESSIONS = 500;

export interface McpSession {
  id: string;
  /** The caller as last authenticated (updated in place by every POST: roles as they are now). */
  principal: Principal;
  /** The request being answered (updated in place by every POST: the audit records name it). */
  request: AuditedRequest;
  server: McpServer;
  transport: StreamableHTTPServerTransport;
  /** Aborted when the session ends: its calls stop. */
  abort: AbortController;
  /** What ends the session's registration as an open stream (revocation). */
  forget: () => void;
}

interface Held extends McpSession {
  credential: string;
  idle: NodeJS.Timeout;
}

/** What signs and checks the replica named in a session id (AuthService.sign and .signed). */
export interface IdSigner {
  sign(purpose: string, text: string): string;
  signed(purpose: string, text: string, signature: string): boolean;
}
const ID_PURPOSE = 'mcp-session-holder';

/** A new session id: a random UUID, and when this replica has a peer URL, that URL, signed. */
export function newSessionId(peerUrl: string | undefined, signer: IdSigner): string {
  const id = randomUUID();
  if (!peerUrl) return id;
  const named = `${id}.${Buffer.from(peerUrl).toString('base64url')}`;
  return `${named}.${signer.sign(ID_PURPOSE, named)}`;
}

/** The peer URL of the replica a session id names, when its signature holds; else undefined. */
export function holderOf(sessionId: string, signer: IdSigner): string | undefined {
  const parts = sessionId.split('.');
  if (parts.length !== 3 || sessionId.length > 1024) return undefined;
  const named = `${parts[0]}.${parts[1]}`;
  if (!signer.signed(ID_PURPOSE, named, parts[2])) return undefined;
  return Buffer.from(parts[1], 'base64url').toString('utf8');
}

/** The SHA-256 of a credential, what a session remembers of it. */
export function credentialDigest(credential: string): string {
  return sha256(credential).toString('hex');
}

export class McpSessions {
  /** In order of last use, the least recent first (a Map keeps insertion order). */
  private readonly sessions = new Map<string, Held>();

  /** Keeps a new session of `credential` (its digest), ending what the limits say must go. */
  add(session: McpSession, credential: string): void {
    const mine = [...this.sessions.values()].filter((s) => s.credential === credential);
    for (const old of mine.slice(0, Math.max(0, mine.length - MAX_PER_CREDENTIAL + 1))) this.end(old.id);
    while (this.sessions.size >= MAX_SESSIONS) this.end(this.sessions.keys().next().value!);
    const held: Held = { ...session, credential, idle: this.idleTimer(session.id) };
    this.sessions.set(session.id, held);
  }

  /**
   * The session with this id opened with this credential, marked used now, with `principal` (when
   * given) as its caller and `request` as its request from now on; undefined when there is none
   * (never said apart from another's).
   */
  use(
    id: string,
    credential: string,
    principal: Principal | undefined,
    request: AuditedRequest,
  ): McpSession | undefined {
    const held = this.sessions.get(id);
    if (!held || held.credential !== credential) return undefined;
    this.sessions.delete(id);
    this.sessions.set(id, held);
    clearTimeout(held.idle);
    held.idle = this.idleTimer(id);
    // In place: the session's server holds this object (a request another replica handed over
    // keeps the caller the session has).
    if (principal) Object.assign(held.principal, principal);
    Object.assign(held.request, { id: request.id, ip: request.ip, url: request.url });
    return held;
  }

  /** Ends a session: its calls are aborted, its server and transport closed. */
  end(id: string): void {
    const held = this.sessions.get(id);
    if (!held) return;
    this.sessions.delete(id);
    clearTimeout(held.idle);
    held.forget();
    held.abort.abort();
    void held.transport.close();
    void held.server.close();
  }

  endAll(): void {
    for (const id of [...this.sessions.keys()]) this.end(id);
  }

  private idleTimer(id: string): NodeJS.Timeout {
    const timer = setTimeout(() => this.end(id), IDLE_MS);
    timer.unref();
    return timer;
  }
}
