// A sub-path install (KITELINE_BASE_PATH=/kite, behind a front end at https://example.com/kite/):
// every request, plain or upgrade, loses the base path before anything else reads its URL, so
// routes, hooks, guards and audit lines see one shape; a request without it is served as it is
// (a front end that strips the prefix itself, or the kubelet's probes at /healthz). Links kiteline
// makes (redirects, kubeconfigs, the OAuth callback, the UI's base) carry it: publicUrl below.
import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';

/** Requests already rewritten: an upgrade is rewritten by its listener, then routed (rewritten again). */
const rewritten = new WeakSet<IncomingMessage>();

/** Removes `basePath` from the front of the request's URL (`/kite` alone becomes `/`); answers the URL. */
export function stripBasePath(req: IncomingMessage, basePath: string): string {
  const url = req.url ?? '/';
  if (basePath === '' || rewritten.has(req)) return url;
  rewritten.add(req);
  if (url === basePath || url.startsWith(`${basePath}?`)) req.url = `/${url.slice(basePath.length)}`;
  else if (url.startsWith(`${basePath}/`)) req.url = url.slice(basePath.length);
  return req.url ?? url;
}

/** kiteline's URL as this caller reaches it: KITELINE_EXTERNAL_URL, else the request's scheme, host and base path. */
export function publicUrl(request: FastifyRequest, config: Pick<Config, 'externalUrl' | 'basePath'>): string {
  return config.externalUrl ?? `${request.protocol}://${request.host}${config.basePath}`;
}
