#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (run `npm run build` or `make build` first).
import('../dist/src/cli.js')
  .then((cli) => cli.main(process.argv.slice(2)))
  .catch((err) => {
    process.stderr.write(`kiteline: ${err?.message ?? err}\n`);
    process.exit(1);
  });
