// Pure logic of the UI at kiteline's address (src/gateway/routes/ui.ts): the page's base path as
// each generation of Kite's build expects it, the policy naming exactly its inline scripts, the
// paths that stay kiteline's; and a sub-path install's rewrite of request URLs (base-path.ts).
import t from 'tap';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripBasePath } from '../../src/gateway/base-path.js';
import { isReservedPath, prepareIndex, uiFiles } from '../../src/gateway/routes/ui.js';

// Kite's newer build (Vite 8): asset paths carry the server's placeholder.
const NEWER = `<!doctype html><html lang="en"><head>
<script type="module" crossorigin src="__KITE_BASE__/assets/index-AbC123.js"></script>
<link rel="stylesheet" crossorigin href="__KITE_BASE__/assets/index-DeF456.css">
</head><body><div id="root"></div></body></html>`;
// Kite's older build (vite-plugin-dynamic-base): a loader script of its own builds the tags.
const LOADER = `(function(){var preloads=[{tagName:'script',attrs:{src:'/assets/index-x.js'}}];})();`;
const OLDER = `<!doctype html><html><head><meta charset="UTF-8"><script>${LOADER}</script></head><body></body></html>`;

t.test("the newer build: placeholders filled, the base script as Kite's server writes it", async (t) => {
  const root = prepareIndex(NEWER, '');
  t.match(root.html, 'src="/assets/index-AbC123.js"');
  t.match(root.html, 'href="/assets/index-DeF456.css"');
  t.match(
    root.html,
    /^<!doctype html><html lang="en"><head>\n {4}<script>window\.__dynamic_base__="";<\/script>\n<script/,
  );
  // The hash of Kite's own `window.__dynamic_base__="";` script (computed independently).
  t.match(root.contentSecurityPolicy, "script-src 'self' 'sha256-nOE54A+5idw7rwLt7rl8jflPNXiBOlzrMLU4TRVKhxI=';");
  const kite = prepareIndex(NEWER, '/kite');
  t.match(kite.html, 'src="/kite/assets/index-AbC123.js"');
  t.match(kite.contentSecurityPolicy, "'sha256-m+rQFkrATCJaEJ3KqD1NcHixAYqU6Bx2LEWkXH3Vc4Q='");
  t.notMatch(kite.contentSecurityPolicy, /script-src[^;]*unsafe/, 'no inline script beyond the hashed ones');
});

t.test('the older build: its loader script named in the policy too', async (t) => {
  const page = prepareIndex(OLDER, '/kite');
  const scripts = /script-src 'self' ([^;]*);/.exec(page.contentSecurityPolicy)?.[1].split(' ') ?? [];
  t.equal(scripts.length, 2, 'the base script and the loader');
  t.ok(
    page.html.indexOf('__dynamic_base__="/kite"') < page.html.indexOf(LOADER),
    'the base is set before the loader runs',
  );
});

t.test("kiteline's own paths", async (t) => {
  for (const path of [
    '/api',
    '/api/v1/clusters',
    '/k8s/clusters/a/api',
    '/mcp',
    '/metrics',
    '/healthz',
    '/readyz',
    '/docs',
    '/docs/json',
  ])
    t.ok(isReservedPath(path), path);
  for (const path of ['/', '/apis-page', '/pods/default/x', '/docsearch', '/assets/index.js', '/mcpx'])
    t.notOk(isReservedPath(path), path);
});

t.test('a base path leaves the URL once, and only a whole segment of it', async (t) => {
  const rewrite = (url: string, base = '/kite') => {
    const req = { url } as IncomingMessage;
    stripBasePath(req, base);
    return stripBasePath(req, base); // a second call (an upgrade routed after its listener) changes nothing
  };
  t.equal(rewrite('/kite/api/v1/clusters'), '/api/v1/clusters');
  t.equal(rewrite('/kite'), '/');
  t.equal(rewrite('/kite/'), '/');
  t.equal(rewrite('/kite?x=1'), '/?x=1');
  t.equal(rewrite('/kite/kite/page'), '/kite/page', 'once');
  t.equal(rewrite('/kiteX/api'), '/kiteX/api', 'not a prefix of a segment');
  t.equal(rewrite('/api/v1/clusters'), '/api/v1/clusters', 'without it: as it came (a front end that strips it)');
  t.equal(rewrite('/kite/x', ''), '/kite/x', 'no base path');
});

t.test("the build's files: regular ones only, and no compressed twin that is not one", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kl-ui-files-'));
  mkdirSync(join(dir, 'assets'));
  mkdirSync(join(dir, '.git'));
  for (const file of ['index.html', 'assets/a.js', 'assets/a.js.br', '.git/config', '.env'])
    writeFileSync(join(dir, file), file);
  symlinkSync('/etc/passwd', join(dir, 'assets', 'b.js'));
  t.same([...uiFiles(dir)].sort(), ['/assets/a.js', '/index.html']);
  symlinkSync('/etc/passwd', join(dir, 'assets', 'a.css.gz'));
  t.throws(() => uiFiles(dir), /a\.css\.gz must be a regular file/, 'a linked twin would be sent: refused');
});
