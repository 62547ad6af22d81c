// A stand-in for a built Kite UI (its `static/` directory), made by the tests that serve one
// (test/ui.test.ts, test/in-cluster.test.ts): an index.html with Kite's `__KITE_BASE__`
// placeholder, a content-hashed module script with pre-compressed twins and a stylesheet, an
// unhashed file; and files that must never be served: at kiteline's own paths, a dotfile, and
// symlinks out of the directory. The script reports what a Kite build's start-up sees and does.
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, gzipSync } from 'node:zlib';

export const SCRIPT = '/assets/index-7d2e4b1a.js';
export const STYLE = '/assets/index-3f9a1c2b.css';
/** The stand-in's module script: it reports what a Kite build's start-up would see and do. */
export const APP_JS = `
const base = window.__dynamic_base__;
const report = { base };
const answer = await fetch(base + '/api/v1/init_check');
report.initCheck = { status: answer.status, body: await answer.json() };
const injected = document.createElement('script');
injected.textContent = 'window.injected = true;';
document.head.appendChild(injected);
report.injected = window.injected === true;
window.report = report;
document.getElementById('root').textContent = 'stand-in ready';
`;
export const INDEX = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="UTF-8" />
    <title>stand-in Kite</title>
    <script type="module" crossorigin src="__KITE_BASE__${SCRIPT}"></script>
    <link rel="stylesheet" crossorigin href="__KITE_BASE__${STYLE}">
  </head>
  <body><div id="root"></div></body>
</html>
`;

/** A directory laid out like Kite's `static/` build, plus files that must never be served. */
export function standInUi(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-ui-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), INDEX);
  writeFileSync(join(dir, SCRIPT), APP_JS);
  writeFileSync(join(dir, `${SCRIPT}.br`), brotliCompressSync(APP_JS));
  writeFileSync(join(dir, `${SCRIPT}.gz`), gzipSync(APP_JS));
  writeFileSync(join(dir, STYLE), 'body { font-family: sans-serif; }\n');
  writeFileSync(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  // Files at kiteline's own paths, a secret dotfile and a link out of the directory.
  writeFileSync(join(dir, 'healthz'), 'shadowed-healthz');
  mkdirSync(join(dir, 'api', 'v1'), { recursive: true });
  writeFileSync(join(dir, 'api', 'v1', 'clusters'), 'shadowed-clusters');
  mkdirSync(join(dir, 'docs'));
  writeFileSync(join(dir, 'docs', 'index.html'), 'shadowed-docs');
  writeFileSync(join(dir, '.env'), 'SECRET=dotfile-secret');
  symlinkSync('/etc/passwd', join(dir, 'passwd'));
  symlinkSync('/etc/passwd', join(dir, 'assets', 'passwd.js'));
  // Names that need encoding in a URL; a link whose name is another file's name encoded once more.
  writeFileSync(join(dir, 'notes 100%.txt'), 'a file name to encode');
  writeFileSync(join(dir, 'x%41'), 'the file named x%41');
  symlinkSync('/etc/passwd', join(dir, 'x%2541'));
  return dir;
}
