// Echoes the suite's TAP output (scripts/run-test-files.js, or tap's runner) and ends with one
// plain closing line, "tests: N passed, N failed", taken from the final count ("# { total: N,
// pass: N, fail: N, skip: N }"). Above that line it repeats every failure (its path of subtests
// and the first lines of its diagnostics), so the tail of a long CI log says what failed without
// scrolling through thousands of lines. It also lists the ten slowest test files with their
// times, so a suite that starts starving (a plane falling behind the tests' load) shows in a
// green run's tail before it fails one.
import { createInterface } from 'node:readline';

const MAX_DIAGNOSTIC_LINES = 14;
const MAX_FAILURES = 12;
const SLOWEST_FILES = 10;

let summary;
const subtests = []; // the open "# Subtest: name" titles, by indentation depth
const failures = []; // { path, diagnostics: string[] }
const files = []; // { name, ms }: each test file's result line at the top level
let diagnosticsOf; // the failure whose YAML block is being read, and its indentation
let diagnosticsIndent = 0;

const depthOf = (line) => (/^ */.exec(line)[0].length / 4) | 0;

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  process.stdout.write(line + '\n');
  const m = /^# \{ total: (\d+)(.*)\}$/.exec(line);
  if (m) summary = { total: Number(m[1]), rest: m[2] };

  if (diagnosticsOf) {
    const text = line.slice(diagnosticsIndent);
    if (/^\s*\.\.\.$/.test(line) || !line.startsWith(' '.repeat(diagnosticsIndent))) diagnosticsOf = undefined;
    else if (text !== '---' && diagnosticsOf.diagnostics.length < MAX_DIAGNOSTIC_LINES)
      diagnosticsOf.diagnostics.push(text);
    if (diagnosticsOf) return;
  }
  const file = /^(?:not )?ok \d+ - (.*?) # time=([\d.]+)(ms|s)$/.exec(line);
  if (file) files.push({ name: file[1], ms: Number(file[2]) * (file[3] === 's' ? 1000 : 1) });
  const subtest = /^( *)# Subtest: (.*)$/.exec(line);
  if (subtest) {
    subtests.length = depthOf(line);
    subtests.push(subtest[2]);
    return;
  }
  const notOk = /^( *)not ok \d+ - (.*?)(?: # time=.*)?$/.exec(line);
  if (notOk) {
    const depth = depthOf(line);
    const path = [...subtests.slice(0, depth), notOk[2]];
    // A failed subtest reports "not ok" again at each enclosing level: keep only the innermost.
    const enclosing = failures.findIndex((f) => f.path.length > path.length && path.every((p, i) => f.path[i] === p));
    if (enclosing === -1) {
      const failure = { path, diagnostics: [] };
      failures.push(failure);
      diagnosticsOf = failure;
      diagnosticsIndent = notOk[1].length + 2;
    }
  }
});
lines.on('close', () => {
  if (files.length > 0) {
    process.stdout.write(`\nslowest test files (of ${files.length}):\n`);
    for (const f of [...files].sort((a, b) => b.ms - a.ms).slice(0, SLOWEST_FILES))
      process.stdout.write(`  ${(f.ms / 1000).toFixed(1).padStart(7)} s  ${f.name}\n`);
  }
  if (failures.length > 0) {
    process.stdout.write(`\nfailures (${failures.length}):\n`);
    for (const f of failures.slice(0, MAX_FAILURES)) {
      process.stdout.write(`- ${f.path.join(' > ')}\n`);
      for (const d of f.diagnostics) process.stdout.write(`    ${d}\n`);
    }
  }
  if (!summary) {
    process.stdout.write('\ntests: 0 passed, 1 failed (tap printed no summary)\n');
    return;
  }
  const count = (name) => Number(new RegExp(`${name}: (\\d+)`).exec(summary.rest)?.[1] ?? 0);
  const skipped = count('skip') + count('todo');
  process.stdout.write(
    `\ntests: ${count('pass')} passed, ${count('fail')} failed${skipped ? `, ${skipped} skipped` : ''}\n`,
  );
});
