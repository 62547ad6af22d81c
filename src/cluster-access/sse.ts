// Server-sent events (text/event-stream) on a Fastify reply, as Kite's EventSource clients read
// them: named events (`event: <name>` + `data: <text>`), a `: ping` comment every 15 seconds so
// proxies and browsers keep an idle stream open, and the head sent at once (the first event may be
// minutes away). Each event is written the moment it is sent, never batched; `send` resolves when
// the client can take more, so a slow reader slows the producer instead of piling up memory.
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { FastifyReply } from 'fastify';

/** How often an idle stream gets a `: ping` comment (Kite's interval). */
export const SSE_PING_INTERVAL_MS = 15_000;

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  // nginx (and proxies that read it) must not buffer the stream.
  'x-accel-buffering': 'no',
  'x-content-type-options': 'nosniff',
} as const;

/** One open event stream; ended by `end()` or when the client goes away (`signal`). */
export class EventStream {
  private readonly out = new PassThrough();
  private readonly ping: NodeJS.Timeout;

  /** Starts the 200 answer on the reply. `signal` fires when the client has gone. */
  constructor(
    reply: FastifyReply,
    private readonly signal: AbortSignal,
    pingIntervalMs = SSE_PING_INTERVAL_MS,
  ) {
    reply.code(200).headers(SSE_HEADERS);
    reply.raw.once('pipe', () => reply.raw.flushHeaders());
    void reply.send(this.out);
    this.ping = setInterval(() => this.out.write(': ping\n\n'), pingIntervalMs);
    this.out.once('close', () => clearInterval(this.ping));
    signal.addEventListener('abort', () => this.end(), { once: true });
  }

  get closed(): boolean {
    return this.signal.aborted || this.out.writableEnded;
  }

  /**
   * Sends one event. Data with line breaks goes as several `data:` lines (the client joins them
   * with "\n"), so nothing in it can end the event early. Resolves once the client can take more.
   */
  async send(event: string, data: string): Promise<void> {
    if (this.closed) return;
    const lines = data.split(/\r\n|\r|\n/).map((line) => `data: ${line}\n`);
    if (this.out.write(`event: ${event}\n${lines.join('')}\n`)) return;
    try {
      await once(this.out, 'drain', { signal: this.signal });
    } catch {
      /* the client went away: the producer sees `closed` */
    }
  }

  /** Sends a JSON event (Kite's `error`, `close` and object events). */
  sendJson(event: string, payload: unknown): Promise<void> {
    return this.send(event, JSON.stringify(payload));
  }

  /**
   * Sends Kite's `error` event ({error: message}) and ends the answer at once, without waiting for
   * a slow reader (the caller's credentials were revoked: nothing more is sent).
   */
  endWithError(message: string): void {
    if (this.closed) return;
    this.out.write(`event: error\ndata: ${JSON.stringify({ error: message })}\n\n`);
    this.end();
  }

  /** Ends the answer (the client's EventSource sees the stream close). */
  end(): void {
    clearInterval(this.ping);
    if (!this.out.writableEnded) this.out.end();
  }
}
