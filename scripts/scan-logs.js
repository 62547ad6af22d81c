#!/usr/bin/env node
// Scans the test gateways' logs (.kiteline/test/logs/*.log, written by test/helpers/gateway.ts)
// for secrets that must never be logged: kiteline API keys, session tokens and auth_token cookie
// values, password hashes, API-key hashes, PEM blocks, kubeconfig credential fields, Bearer
// values, the test control planes' admin tokens, and the passwords the tests use. Prints what it
// scanned and each finding as file:line and the kind of secret (never the secret itself); exits 1
// when it finds anything. Run by scripts/run-tests.sh after the suite; `node scripts/scan-logs.js
// [dir]` runs it alone. scanText() is exported for test/unit/scan-logs.test.ts.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TEST_DIR = join(ROOT, '.kiteline', 'test');
const CONTROL_PLANES = ['host', 'target-a', 'target-b'];

/** A real hash or key is random: many distinct characters (a run like "aaaa..." is a test name). */
const random = (match) => new Set(match).size >= 8;

/** Secret shapes, each with the name a finding is reported under (and an optional check of the match). */
export const PATTERNS = [
  ['kiteline API key', /kl_[1-9][0-9]{0,14}_[A-Za-z0-9_-]{43}/],
  ['session token', /v1\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{43}/],
  ['auth_token cookie value', /auth_token=(?!\[redacted\])[^;"\s\\]+/],
  ['password hash', /scrypt\$\d+\$\d+\$\d+\$/],
  ['API key hash (sha256 hex)', /(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])/g, random],
  ['PEM block', /-----BEGIN [A-Z0-9 ]+-----/],
  [
    'kubeconfig credential data',
    /(client-key-data|client-certificate-data|certificate-authority-data)\\?"?\s*:\s*\\?"?[A-Za-z0-9+/=]{16,}/,
  ],
  ['token field', /\btoken\\?"?\s*[:=]\s*\\?"?(?!\[redacted\])[A-Za-z0-9._~+/-]{16,}/i],
  ['Bearer value', /\bBearer\s+(?!\[redacted\])[A-Za-z0-9._~+/-]{8,}/],
];

/**
 * Findings in one text: [{line, kind}] for every line that matches a secret shape or contains
 * one of the known secret values ([[kind, value], ...]).
 */
export function scanText(text, knownSecrets = []) {
  const findings = [];
  const known = knownSecrets.filter(([, value]) => typeof value === 'string' && value.length >= 6);
  text.split('\n').forEach((line, index) => {
    for (const [kind, pattern, accept] of PATTERNS) {
      const matches = pattern.global
        ? [...line.matchAll(pattern)].map((m) => m[0])
        : [line.match(pattern)?.[0]].filter(Boolean);
      if (matches.some((m) => !accept || accept(m))) findings.push({ line: index + 1, kind });
    }
    for (const [kind, value] of known) if (line.includes(value)) findings.push({ line: index + 1, kind });
  });
  return findings;
}

/** The admin tokens of the shared test control planes (first column of tokens.csv). */
export function controlPlaneTokens(testDir = TEST_DIR) {
  const tokens = [];
  for (const name of CONTROL_PLANES) {
    const file = join(testDir, name, 'tokens.csv');
    if (!existsSync(file)) continue;
    const token = readFileSync(file, 'utf8').split(',')[0].trim();
    if (token) tokens.push([`admin token of control plane ${name}`, token]);
  }
  return tokens;
}

function sourceFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Password literals of the test sources: `password: '...'` members and *_PASSWORD / *Password constants. */
export function testPasswords(testSources = join(ROOT, 'test')) {
  const passwords = [];
  const literal = /(?:password|Password|PASSWORD)['"]?\s*[:=]\s*'([^'\n]{8,128})'/g;
  for (const file of sourceFiles(testSources)) {
    for (const match of readFileSync(file, 'utf8').matchAll(literal)) {
      passwords.push([`a test password of ${relative(ROOT, file)}`, match[1]]);
    }
  }
  return passwords;
}

function main() {
  const logDir = resolve(process.argv[2] ?? join(TEST_DIR, 'logs'));
  const files = existsSync(logDir)
    ? readdirSync(logDir)
        .filter((f) => f.endsWith('.log'))
        .sort()
    : [];
  const known = [...controlPlaneTokens(), ...testPasswords()];
  let lines = 0;
  let found = 0;
  for (const file of files) {
    const text = readFileSync(join(logDir, file), 'utf8');
    lines += text.split('\n').length;
    for (const { line, kind } of scanText(text, known)) {
      found++;
      if (found <= 200) console.log(`scan-logs: ${relative(ROOT, join(logDir, file))}:${line}: ${kind}`);
    }
  }
  const where = relative(ROOT, logDir) || '.';
  const outcome = found === 0 ? 'nothing found' : `${found} findings`;
  console.log(
    `scan-logs: scanned ${files.length} log files (${lines} lines) in ${where} for ${PATTERNS.length} secret shapes ` +
      `and ${known.length} known secret values: ${outcome}`,
  );
  if (files.length === 0) {
    console.log('scan-logs: no log files: nothing was scanned');
    return 1;
  }
  return found === 0 ? 0 : 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exit(main());
