#!/usr/bin/env node
// Top entries of a V8 CPU profile (node --cpu-prof): self time per function and per file or
// package, as Markdown tables. Usage: node scripts/profile-top.js <file.cpuprofile> [N]

import { readFileSync } from 'node:fs';

const [file, limitArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node scripts/profile-top.js <file.cpuprofile> [N]\n');
  process.exit(2);
}
const limit = Number(limitArg || 25);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const dt = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  dt.set(id, (dt.get(id) || 0) + (profile.timeDeltas[i] || 0));
}
const total = [...dt.values()].reduce((a, b) => a + b, 0);
const idle = new Set(['(idle)', '(program)']);

function where(frame) {
  const url = frame.url || '';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return url;
  const ours = /\/dist\/(.*)$/.exec(url);
  if (ours) return ours[1];
  return url || frame.functionName || '(native)';
}

const fn = new Map();
const place = new Map();
let busy = 0;
for (const [id, us] of dt) {
  const { callFrame } = byId.get(id);
  if (idle.has(callFrame.functionName)) continue;
  busy += us;
  const name = `${callFrame.functionName || '(anonymous)'} ${where(callFrame)}:${callFrame.lineNumber + 1}`;
  fn.set(name, (fn.get(name) || 0) + us);
  const p = where(callFrame);
  place.set(p, (place.get(p) || 0) + us);
}
function table(title, map) {
  const rows = [...map].sort((a, b) => b[1] - a[1]).slice(0, limit);
  const out = [`| ${title} | self ms | % of busy |`, '|---|---|---|'];
  for (const [k, us] of rows) out.push(`| ${k} | ${(us / 1000).toFixed(0)} | ${((100 * us) / busy).toFixed(1)} |`);
  return out.join('\n');
}
process.stdout.write(
  `profile ${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy\n\n` +
    `${table('function', fn)}\n\n${table('file or package', place)}\n`,
);
