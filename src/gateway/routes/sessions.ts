// Recorded sessions (docs/sessions.md): GET /api/v1/admin/sessions (search: user, cluster, pod,
// from, to, q over the typed commands and the output), GET /api/v1/admin/sessions/:id (the
// recording's metadata), /:id/cast (the asciicast v2 file) and /:id/replay (a page that plays it
// with asciinema-player, the player's own maintained package, served from node_modules).
//
// Who may: an admin, or a caller with a role that names `sessions` itself (a wildcard does not
// count, so the viewer's `*` never opens them) with get or list, matching the recording's cluster
// and namespace (a node terminal or console, which have none, needs a role of every namespace).
// These routes are under /api/v1/admin but declare `guard: 'user'` (plugins/authenticate.ts), and
// decide here: 403 without such a role; a recording of a cluster or namespace the caller's roles do
// not reach answers 404, as one that does not exist.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { Type } from 'typebox';
import type { Principal } from '../../auth/principal.js';
import { ALL_NAMESPACES } from '../../cluster-access/segments.js';
import { BadRequestError, ForbiddenError, NotFoundError } from '../../errors.js';
import type { RecordingSpec } from '../../recording/store.js';
import { objectOf, schemaOf, streamed, stringEnum, type App } from '../schemas.js';

const PREFIX = '/api/v1/admin/sessions';
/** The role resource that opens recordings to a non-admin. */
export const SESSIONS_RESOURCE = 'sessions';
const MAX_PAGE_SIZE = 200;

const require = createRequire(import.meta.url);
/** The player's files, read once (asciinema-player's browser bundle and its stylesheet). */
const PLAYER = {
  js: readFileSync(require.resolve('asciinema-player/dist/bundle/asciinema-player.min.js')),
  css: readFileSync(require.resolve('asciinema-player/dist/bundle/asciinema-player.css')),
};
/** The replay page's own script: starts the player on the cast named by the page. */
const REPLAY_JS = `const el = document.getElementById('player');
AsciinemaPlayer.create(el.dataset.cast, el, {
  autoPlay: true,
  speed: Number(el.dataset.speed) || 1,
  idleTimeLimit: 2,
  fit: 'width',
});
`;
/** The page loads only its own scripts and styles (the player styles its elements inline). */
const REPLAY_CSP =
  "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
  "connect-src 'self'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; base-uri 'none'; " +
  "form-action 'none'; frame-ancestors 'none'";

const filter = (description: string) => Type.Optional(Type.String({ maxLength: 253, description }));
const SessionsQuery = Type.Object({
  user: filter('the username, exactly'),
  cluster: filter('the cluster, exactly'),
  pod: filter('the pod: its name, or namespace/name'),
  from: filter('sessions open at or after this time (ISO 8601)'),
  to: filter('sessions started at or before this time (ISO 8601)'),
  q: Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, description: 'text in the typed commands or the output, any case' }),
  ),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, default: 1 })),
  size: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 20 })),
});
const IdParams = Type.Object({ id: Type.String({ maxLength: 63, pattern: '^s-[0-9a-z]+-[0-9a-f]+$' }) });
const ReplayQuery = Type.Object({
  speed: Type.Optional(Type.Number({ minimum: 0.25, maximum: 100, description: 'playback speed (default 1)' })),
});

const str = Type.String();
const int = Type.Integer();
const SessionView = objectOf(
  {
    id: str,
    user: str,
    userKind: str,
    cluster: str,
    kind: stringEnum(['pod-terminal', 'node-terminal', 'kubectl-console', 'exec', 'attach']),
    namespace: str,
    pod: str,
    container: str,
    node: str,
    command: str,
    protocol: str,
    requestId: Type.String({ description: "the session's audit record has the same request id" }),
    clientAddress: str,
    replica: Type.String({ description: 'the replica that carried (and wrote) the session' }),
    width: int,
    height: int,
    start: str,
    updated: Type.String({ description: 'the last flush: a session without `end` whose replica died ends here' }),
    end: str,
    exitCode: int,
    result: stringEnum(['success', 'failure']),
    events: int,
    bytes: Type.Integer({ description: "bytes of the cast's events before compression" }),
    storedBytes: int,
    chunks: int,
    input: Type.String({ description: 'the lines typed, as a line editor sees them (capped at 64 KiB)' }),
    truncated: Type.Boolean({ description: 'the session went past the per-session limit; the rest is not recorded' }),
    droppedBytes: Type.Integer({ description: 'event bytes not recorded while the host cluster lagged' }),
  },
  'one recorded session',
);
const SessionPage = objectOf({
  data: Type.Array(SessionView),
  total: int,
  page: int,
  size: int,
  outputSearchComplete: Type.Boolean({
    description: 'false when the search of the output stopped at its bounds (50 sessions, 64 MiB) before the end',
  }),
});

function html(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

function isoTime(name: string, value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const time = Date.parse(value);
  if (Number.isNaN(time)) throw new BadRequestError(`${name} must be an ISO 8601 time, e.g. 2026-11-27T09:00:00Z`);
  return new Date(time).toISOString();
}

const PAGE_STYLE =
  'body{font-family:sans-serif;margin:1.5em}' +
  'dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}';

/** The replay page of a recording: its metadata, and the player on its cast. */
function replayPage(id: string, spec: RecordingSpec, speed: number): string {
  const where = spec.kind === 'node-terminal' ? `node ${spec.node ?? ''}` : `pod ${spec.namespace}/${spec.pod}`;
  const rows: Array<[string, string]> = [
    ['User', spec.user],
    ['Cluster', spec.cluster],
    ['Where', `${where}${spec.container ? `, container ${spec.container}` : ''}`],
    ['Command', spec.command],
    ['Kind', spec.kind],
    ['Start', spec.start],
    ['End', spec.end ?? `(no end recorded; last written ${spec.updated})`],
    ['Exit code', spec.exitCode === undefined ? '' : String(spec.exitCode)],
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Session ${html(id)}</title>
<link rel="stylesheet" href="../player.css">
<style>${PAGE_STYLE}</style>
</head><body>
<h1>Session ${html(id)}</h1>
<dl id="meta">${rows.map(([k, v]) => `<dt>${html(k)}</dt><dd data-field="${html(k)}">${html(v)}</dd>`).join('')}</dl>
<div id="player" data-cast="cast" data-speed="${speed}"></div>
<script src="../player.js"></script>
<script src="../replay.js"></script>
</body></html>
`;
}

export default async function sessionRoutes(app: App) {
  const { auth, recordings } = app.services;
  const schema = schemaOf('sessions');
  /** Recordings are shown to admins, or through a role that names `sessions` (the module comment). */
  const mayView = (principal: Principal, spec: RecordingSpec, verb: 'get' | 'list') =>
    auth.isAdmin(principal) ||
    auth.authorizeNamed(principal, {
      cluster: spec.cluster,
      // A node terminal or kubectl console runs in a pod of kiteline's, not in the user's
      // namespace: only a role of every namespace sees it.
      namespace: spec.kind === 'node-terminal' || spec.kind === 'kubectl-console' ? ALL_NAMESPACES : spec.namespace,
      resource: SESSIONS_RESOURCE,
      verb,
    });
  /** 403 unless the caller is an admin or holds a role naming `sessions` (which clusters: mayView). */
  const requireSessionsRole = (principal: Principal) => {
    if (!auth.isAdmin(principal) && !auth.namesResource(principal, SESSIONS_RESOURCE))
      throw new ForbiddenError('recorded sessions need the admin role or a role that grants sessions');
  };
  const recordingFor = async (principal: Principal, id: string) => {
    requireSessionsRole(principal);
    await recordings.loaded();
    const recording = recordings.get(id);
    if (!mayView(principal, recording.spec, 'get')) throw new NotFoundError(`session recording ${id} not found`);
    return recording;
  };
  const config = { guard: 'user' as const };

  app.get(
    PREFIX,
    {
      config,
      schema: schema('Recorded sessions, newest first (admins, or a role naming `sessions`)', {
        description:
          'Terminal, exec, attach and debug sessions recorded by every replica. `q` looks in the typed commands ' +
          'and the output (any case).',
        querystring: SessionsQuery,
        response: { 200: SessionPage },
      }),
    },
    async (request) => {
      const principal = request.principal!;
      requireSessionsRole(principal);
      const { query } = request;
      const from = isoTime('from', query.from);
      const to = isoTime('to', query.to);
      await recordings.loaded();
      return recordings.query(
        {
          ...query,
          ...(from ? { from } : {}),
          ...(to ? { to } : {}),
          page: query.page ?? 1,
          size: query.size ?? 20,
        },
        {
          list: (spec) => mayView(principal, spec, 'list'),
          get: (spec) => mayView(principal, spec, 'get'),
        },
      );
    },
  );

  for (const [file, type, body] of [
    ['player.js', 'text/javascript; charset=utf-8', PLAYER.js],
    ['player.css', 'text/css; charset=utf-8', PLAYER.css],
    ['replay.js', 'text/javascript; charset=utf-8', REPLAY_JS],
  ] as const) {
    app.get(
      `${PREFIX}/${file}`,
      {
        config,
        schema: schema(`The replay page's ${file}`, {
          response: { 200: streamed({ description: file, type: 'string' }) },
        }),
      },
      async (_request, reply) =>
        reply
          .type(type)
          .header('cache-control', 'private, max-age=3600')
          .header('x-content-type-options', 'nosniff')
          .send(body),
    );
  }

  app.get(
    `${PREFIX}/:id`,
    {
      config,
      schema: schema("A recorded session's metadata", { params: IdParams, response: { 200: SessionView } }),
    },
    async (request) => {
      const recording = await recordingFor(request.principal!, request.params.id);
      return { id: recording.metadata.name, ...recording.spec };
    },
  );

  app.get(
    `${PREFIX}/:id/cast`,
    {
      config,
      schema: schema('A recorded session as an asciicast v2 file', {
        params: IdParams,
        response: {
          200: streamed({ description: 'asciicast v2: a header line, then one event per line', type: 'string' }),
        },
      }),
    },
    async (request, reply) => {
      const recording = await recordingFor(request.principal!, request.params.id);
      return reply
        .type('application/x-asciicast')
        .header('content-disposition', `attachment; filename="${recording.metadata.name}.cast"`)
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff')
        .send(Readable.from(recordings.cast(recording)));
    },
  );

  app.get(
    `${PREFIX}/:id/replay`,
    {
      config,
      schema: schema('A page that replays a recorded session in the browser (asciinema-player)', {
        params: IdParams,
        querystring: ReplayQuery,
        response: { 200: streamed({ description: 'an HTML page', type: 'string' }) },
      }),
    },
    async (request, reply) => {
      const recording = await recordingFor(request.principal!, request.params.id);
      return reply
        .type('text/html; charset=utf-8')
        .header('content-security-policy', REPLAY_CSP)
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff')
        .send(replayPage(recording.metadata.name, recording.spec, request.query.speed ?? 1));
    },
  );
}
