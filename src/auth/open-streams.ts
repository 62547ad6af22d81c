// The open long-lived streams of this replica, by who opened them (Teleport's idea of tracking live
// sessions per identity): kubectl's exec, attach, port-forward and watches through the proxy, Kite's
// terminals and log WebSockets, live pod lists, watches and followed logs on the resource routes.
// Authentication happens once per request, so without this a stream outlived the revocation of its
// credentials for as long as it lasted. Whenever the identity caches change (users, roles, API keys,
// OAuth providers, Secrets: an admin route, kubectl or another replica, all the same), every open
// stream's principal is checked again with AuthService.recheck, and a stream ends when its
// principal no longer authenticates, or no longer may do what the stream does (the stream's own
// check, where it has one), or else lost a role it held when the stream opened. A timer ends each
// stream when its credential expires (an API key's expiresAt, a session's absolute lifetime).
// docs/auth.md, "Revocation ends open streams".
import type { Logger } from '../log.js';
import type { Authentication } from './auth-service.js';
import type { Principal } from './principal.js';

/** Why a stream was ended: its credential is gone or refused, it expired, or its roles no longer allow it. */
export type RevocationReason = 'revoked' | 'expired' | 'forbidden';

/** What ends one stream: a WebSocket's close frame, an event stream's error event, a socket's destruction. */
export type EndStream = (message: string) => void;

export interface StreamOptions {
  /**
   * Whether the principal, as it is now, may still do what the stream does (its authorization
   * asked again). Without it, a stream ends when its principal lost a role it held at the start.
   */
  stillAllowed?: (principal: Principal) => boolean;
}

/** What the registry asks of authentication (AuthService). */
export interface CredentialChecks {
  recheck(principal: Principal): Authentication;
  credentialExpiresAt(principal: Principal): number | undefined;
  heldRoles(principal: Principal): string[];
}

interface OpenStream extends StreamOptions {
  principal: Principal;
  end: EndStream;
  /** The roles the principal held (that existed) when the stream opened. */
  roles: readonly string[];
  expiryTimer?: NodeJS.Timeout;
}

/** The longest delay setTimeout takes (about 24.8 days); a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Cache events come in bursts (a user deleted with its keys): one recheck per burst. */
const COALESCE_MS = 20;

export class OpenStreams {
  private readonly streams = new Set<OpenStream>();
  private pending: NodeJS.Timeout | undefined;

  constructor(
    private readonly auth: CredentialChecks,
    private readonly log: Logger,
    /** Hears each ended stream (a metric). */
    private readonly onEnded: (reason: RevocationReason) => void = () => undefined,
  ) {}

  get size(): number {
    return this.streams.size;
  }

  /**
   * Registers an open stream of `principal`; `end` ends it when its credentials are revoked.
   * Returns the stream's deregistration, to call when it ends by itself.
   */
  open(principal: Principal, end: EndStream, options: StreamOptions = {}): () => void {
    const stream: OpenStream = { principal, end, roles: this.auth.heldRoles(principal), ...options };
    this.streams.add(stream);
    this.armExpiry(stream);
    // A revocation between the request's authentication and now would otherwise go unseen. Checked
    // on the next turn: the caller finishes wiring the stream first (its end then has something to end).
    setImmediate(() => this.recheck(stream));
    return () => this.forget(stream);
  }

  /** Checks every open stream again soon (the identity caches changed). */
  identityChanged(): void {
    if (this.pending !== undefined) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      this.recheckAll();
    }, COALESCE_MS);
    this.pending.unref();
  }

  /** Checks every open stream now; ends those no longer allowed. */
  recheckAll(): void {
    for (const stream of [...this.streams]) this.recheck(stream);
  }

  /** Stops the timers (the gateway is closing; its streams end with it). */
  stop(): void {
    clearTimeout(this.pending);
    for (const stream of this.streams) clearTimeout(stream.expiryTimer);
    this.streams.clear();
  }

  private recheck(stream: OpenStream, expiring = false): void {
    if (!this.streams.has(stream)) return;
    const verdict = this.verdict(stream, expiring);
    if (!verdict) return;
    this.forget(stream);
    this.log.info(
      { who: stream.principal.name, whoKind: stream.principal.kind, reason: verdict.reason },
      'open stream ended: credentials revoked',
    );
    this.onEnded(verdict.reason);
    try {
      stream.end(verdict.message);
    } catch (err) {
      this.log.warn({ err }, 'ending a revoked stream failed');
    }
  }

  /** Why the stream must end now, or undefined while it may go on. */
  private verdict(stream: OpenStream, expiring: boolean): { reason: RevocationReason; message: string } | undefined {
    const result = this.auth.recheck(stream.principal);
    if ('failure' in result)
      return { reason: expiring ? 'expired' : 'revoked', message: `credentials revoked: ${result.failure}` };
    const now = result.principal;
    if (stream.stillAllowed) {
      if (stream.stillAllowed(now)) return undefined;
      return { reason: 'forbidden', message: 'credentials revoked: your roles no longer allow this stream' };
    }
    const held = new Set(this.auth.heldRoles(now));
    const lost = stream.roles.filter((role) => !held.has(role));
    if (lost.length === 0) return undefined;
    return { reason: 'forbidden', message: `credentials revoked: role ${lost.join(', ')} no longer held` };
  }

  private armExpiry(stream: OpenStream): void {
    const expiresAt = this.auth.credentialExpiresAt(stream.principal);
    if (expiresAt === undefined) return;
    // A little after the moment itself, so the check that runs then sees it passed.
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, expiresAt - Date.now()) + 50);
    stream.expiryTimer = setTimeout(() => {
      this.recheck(stream, true);
      // Still valid: a later expiry than one timer reaches, or one moved (a key edited): armed again.
      if (this.streams.has(stream) && delay > 1000) this.armExpiry(stream);
    }, delay);
    stream.expiryTimer.unref();
  }

  private forget(stream: OpenStream): void {
    clearTimeout(stream.expiryTimer);
    this.streams.delete(stream);
  }
}
