// Runs compiled test files, two at a time, each as a plain `node <file>` (a tap test file prints
// its own TAP when run directly), and prints one TAP document in the shape `tap --reporter=tap`
// prints: each file as a subtest with its time, then "# { total: N, pass: N, fail: N }" summed
// from the files' own final counts. scripts/tap-summary.js reads it.
//
// Why not tap's runner: it starts every test file with two module hooks (its process-info tracker,
// which it also injects into every node process a test starts, such as the gateways, and its mock
// loader) and with source maps on. On this two-core machine that cost about 9 s of CPU per file,
// about 15 minutes of CPU over the suite, and the suite is CPU bound. `tap <file>` still works for
// one file by hand. Set NODE_OPTIONS=--enable-source-maps to have stack traces in TypeScript lines.
//
// Usage: node scripts/run-test-files.js [--jobs N] [--timeout SECONDS] file...
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { clearTimeout, setTimeout } from 'node:timers';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i === -1) return fallback;
  const [, value] = args.splice(i, 2);
  return Number(value);
};
const jobs = option('--jobs', 2);
const timeoutSeconds = option('--timeout', 600);
const files = args;
if (files.length === 0 || !(jobs >= 1) || !(timeoutSeconds > 0)) {
  process.stderr.write('usage: run-test-files.js [--jobs N] [--timeout SECONDS] file...\n');
  process.exit(2);
}

const started = Date.now();
const totals = { total: 0, pass: 0, fail: 0, skip: 0, todo: 0 };
const running = new Set();
let reported = 0;
let failedFiles = 0;

process.stdout.write(`TAP version 14\n1..${files.length}\n`);

/** Runs one file and resolves with its exit, its stdout and its time; stderr passes straight through. */
function runFile(file) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [file], {
      // TAP_TIMEOUT is what a tap test file takes as each test's timeout (tap's runner sets it too).
      env: { ...process.env, TAP_TIMEOUT: String(timeoutSeconds) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    running.add(child);
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    }, timeoutSeconds * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, timedOut, output: Buffer.concat(chunks).toString('utf8'), ms: Date.now() - t0 });
    });
  });
}

/** Prints a finished file as one subtest of the document and adds its counts to the totals. */
function report(file, { code, signal, timedOut, output, ms }) {
  const lines = output.split('\n').filter((l, i) => !(i === 0 && l.startsWith('TAP version')));
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  // The file's own count is its last "# { total: … }" line; a file that died before printing one
  // counts as one failure.
  const count = lines.findLast((l) => /^# \{ total: \d+/.test(l));
  const ok = code === 0 && count !== undefined;
  if (count) {
    for (const key of Object.keys(totals)) {
      const m = new RegExp(`\\b${key}: (\\d+)`).exec(count);
      if (m) totals[key] += Number(m[1]);
    }
  }
  // A file that failed without a failed test in its count (it crashed, or timed out) adds one.
  if (!ok && !(count && /\bfail: [1-9]/.test(count))) {
    totals.fail += 1;
    totals.total += 1;
  }
  if (!ok) failedFiles += 1;
  const time = `# time=${ms}ms`;
  let text = `# Subtest: ${file}\n`;
  text += lines.map((l) => (l === '' ? '' : `    ${l}`)).join('\n') + '\n';
  reported += 1;
  text += `${ok ? 'ok' : 'not ok'} ${reported} - ${file} ${time}\n`;
  if (!ok) {
    const why = timedOut ? `timed out after ${timeoutSeconds} s` : signal ? `killed by ${signal}` : `exit code ${code}`;
    text += `  ---\n  reason: ${why}${count ? '' : ', and it printed no final count'}\n  ...\n`;
  }
  process.stdout.write(text + '\n');
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const child of running) child.kill('SIGTERM');
    process.exit(130);
  });
}

const queue = [...files];
await Promise.all(
  Array.from({ length: Math.min(jobs, files.length) }, async () => {
    while (queue.length > 0) {
      const file = queue.shift();
      report(file, await runFile(file));
    }
  }),
);

const summary = Object.entries(totals)
  .filter(([key, n]) => key === 'total' || key === 'pass' || n > 0)
  .map(([key, n]) => `${key}: ${n}`)
  .join(', ');
process.stdout.write(`# { ${summary} }\n# time=${Date.now() - started}ms\n`);
process.exit(failedFiles > 0 ? 1 : 0);
