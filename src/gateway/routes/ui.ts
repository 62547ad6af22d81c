// Kite's web UI at kiteline's own address (KITELINE_UI_DIR: a built Kite UI, docs/ui.md), as
// Kite's binary serves its own: index.html for every page path (the single-page app routes in the
// browser), the build's files as they are. Registered only when a UI directory is configured.
//   - index.html gets the base path the way Kite's server gives it: `__KITE_BASE__` (newer builds'
//     asset paths) filled, `window.__dynamic_base__` set in an inline script right after <head>
//     (every build reads it for its API, WebSocket, SSE and router paths); read once at start-up.
//   - index.html is never cached and carries a Content-Security-Policy naming the hash of each of
//     its inline scripts (no other inline script runs); files under /assets/ (content-hashed
//     names) are cached for a year; any other file is revalidated. Pre-compressed `.br`/`.gz`
//     siblings are sent to clients that accept them (@fastify/static).
//   - kiteline's own paths (config.ts KITELINE_PATHS) are never the UI's: a file there is not served and a miss is
//     the API's JSON 404, as is a missing asset (no page served in place of a script).
//   - Only the regular files found at start-up are served (no symlinks, no dotfiles, nothing
//     added later): a request names one of them exactly or gets the page or a 404. A compressed
//     twin is looked up when its file is sent; one that is not a regular file refuses start-up.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { KITELINE_PATHS } from '../../config.js';
import { ConfigError } from '../../errors.js';

/** Vite's output: content-hashed names only, safe to cache for good. */
const ASSETS = '/assets/';
/** A UI build has a few hundred files; a directory with more than this is not one (`/`, say). */
const MAX_FILES = 20_000;
const PRECOMPRESSED = /\.(br|gz)$/;
const IMMUTABLE = 'public, max-age=31536000, immutable';

export function isReservedPath(path: string): boolean {
  return KITELINE_PATHS.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

export interface IndexPage {
  html: string;
  contentSecurityPolicy: string;
}

/**
 * index.html as served under `basePath` ('' or `/kite`): placeholders filled, the base script
 * injected, and the policy that lets exactly its inline scripts run.
 */
export function prepareIndex(source: string, basePath: string): IndexPage {
  const baseScript = `<script>window.__dynamic_base__=${JSON.stringify(basePath)};</script>`;
  const filled = source.replaceAll('__KITE_BASE__', basePath);
  const head = /<head(\s[^>]*)?>/i.exec(filled);
  const html = head
    ? `${filled.slice(0, head.index + head[0].length)}\n    ${baseScript}${filled.slice(head.index + head[0].length)}`
    : `${baseScript}\n${filled}`;
  const hashes = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)]
    .filter(([, attributes]) => !/\bsrc\s*=/i.test(attributes))
    .map(([, , body]) => `'sha256-${createHash('sha256').update(body).digest('base64')}'`);
  const contentSecurityPolicy = [
    "default-src 'self'",
    `script-src 'self' ${[...new Set(hashes)].join(' ')}`,
    // React, Monaco and xterm set style attributes; styles cannot run code.
    "style-src 'self' 'unsafe-inline'",
    // Vite inlines small images as data: URIs; sign-in providers' avatars are elsewhere.
    "img-src 'self' data: blob: https:",
    "font-src 'self' data:",
    // 'self' covers the same host's ws: and wss: (the terminals and log streams).
    "connect-src 'self'",
    "worker-src 'self' blob:",
    // The UI embeds its own pages (?iframe=true), and only its own origin may embed it.
    "frame-src 'self'",
    "frame-ancestors 'self'",
    "base-uri 'self'",
    "form-action 'self'",
    "object-src 'none'",
  ].join('; ');
  return { html, contentSecurityPolicy };
}

/**
 * The URL paths (`/assets/index-abc.js`) of the directory's regular files, read once: dotfiles,
 * symlinks and compressed twins left out. A twin (`x.js.br`) is sent in place of its file by
 * @fastify/static, so one that is not a regular file refuses the directory.
 */
export function uiFiles(dir: string): Set<string> {
  const files = new Set<string>();
  let entries = 0;
  const walk = (folder: string, prefix: string): void => {
    let listing;
    try {
      listing = readdirSync(folder, { withFileTypes: true });
    } catch (err) {
      throw new ConfigError(`ui-dir: cannot read ${folder}: ${(err as Error).message}`);
    }
    for (const entry of listing) {
      if (++entries > MAX_FILES)
        throw new ConfigError(`ui-dir holds more than a UI build's ${MAX_FILES} entries: ${dir}`);
      const path = `${prefix}/${entry.name}`;
      if (PRECOMPRESSED.test(entry.name)) {
        if (!entry.isFile()) throw new ConfigError(`ui-dir: ${path} must be a regular file (it may be sent)`);
        continue;
      }
      if (entry.name.startsWith('.')) continue;
      if (entry.isDirectory()) walk(join(folder, entry.name), path);
      else if (entry.isFile()) files.add(path); // not symlinks, sockets, devices
    }
  };
  walk(dir, '');
  return files;
}

function decodedPath(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

export default async function uiRoutes(app: FastifyInstance) {
  const { uiDir, basePath } = app.services.config;
  if (!uiDir) return;
  const files = uiFiles(uiDir);
  const index = prepareIndex(readFileSync(join(uiDir, 'index.html'), 'utf8'), basePath);
  // Sending files only (no routes of its own): the route below decides what is served.
  await app.register(fastifyStatic, {
    root: uiDir,
    serve: false,
    preCompressed: true,
    index: false,
    dotfiles: 'ignore',
    cacheControl: false,
  });

  app.get('/*', { schema: { hide: true } }, async (request, reply) => {
    const raw = request.url.split('?')[0];
    const path = decodedPath(raw);
    if (path === undefined || isReservedPath(path) || (path.startsWith(ASSETS) && !files.has(path))) {
      return reply.callNotFound();
    }
    if (files.has(path) && path !== '/index.html') {
      reply.header('cache-control', path.startsWith(ASSETS) ? IMMUTABLE : 'no-cache');
      // The path checked is the path sent (@fastify/static encodes it for send, which decodes it once).
      return reply.sendFile(path);
    }
    return reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-cache')
      .header('content-security-policy', index.contentSecurityPolicy)
      .header('x-content-type-options', 'nosniff')
      .send(index.html);
  });
}
