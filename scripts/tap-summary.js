// Echoes tap's raw TAP output and ends with one plain closing line, "tests: N passed, N failed",
// taken from tap's own final count ("# { total: N, pass: N, fail: N, skip: N }").
import { createInterface } from 'node:readline';

let summary;
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  process.stdout.write(line + '\n');
  const m = /^# \{ total: (\d+)(.*)\}$/.exec(line);
  if (m) summary = { total: Number(m[1]), rest: m[2] };
});
lines.on('close', () => {
  if (!summary) {
    process.stdout.write('\ntests: 0 passed, 1 failed (tap printed no summary)\n');
    return;
  }
  const count = (name) => Number(new RegExp(`${name}: (\\d+)`).exec(summary.rest)?.[1] ?? 0);
  const skipped = count('skip') + count('todo');
  process.stdout.write(`\ntests: ${count('pass')} passed, ${count('fail')} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
});
