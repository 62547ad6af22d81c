// A long-running answer of the gateway (a watch, followed logs, a live pod list, a proxied stream)
// ends when its caller's credentials are revoked (auth/open-streams.ts). By default its connection
// is destroyed, as when a replica goes away (kubectl and client libraries see the stream cut and
// ask again, now refused); an event stream ends with Kite's `error` event instead. One registration
// per request: a later call (the live pod list, once its event stream has started) only changes
// how the answer is ended.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EndStream, StreamOptions } from '../auth/open-streams.js';
import type { Services } from './services.js';

/** How each registered request's answer is ended (changed by a later call). */
const endings = new WeakMap<FastifyRequest, { end: EndStream }>();

export function endOnRevocation(
  services: Pick<Services, 'openStreams'>,
  request: FastifyRequest,
  reply: FastifyReply,
  how: StreamOptions & { end?: EndStream } = {},
): void {
  const principal = request.principal;
  if (!principal || reply.raw.destroyed) return;
  const registered = endings.get(request);
  if (registered) {
    if (how.end) registered.end = how.end;
    return;
  }
  const ending = { end: how.end ?? (() => void reply.raw.destroy()) };
  endings.set(request, ending);
  const forget = services.openStreams.open(principal, (message) => ending.end(message), {
    stillAllowed: how.stillAllowed,
  });
  reply.raw.once('close', forget);
}
