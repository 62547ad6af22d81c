// Pure logic: the log scanner of scripts/scan-logs.js catches every kind of secret (planted lines)
// and passes clean and redacted lines, so the suite-wide scan in run-tests.sh can fail.
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { generateApiKey } from '../../src/credentials/apikey-token.js';
import { hashPassword } from '../../src/credentials/passwords.js';
import { signSession } from '../../src/auth/session-token.js';
import { PACKAGE_ROOT } from '../../src/config.js';

type Finding = { line: number; kind: string };
interface Scanner {
  scanText(text: string, known?: Array<[string, string]>): Finding[];
  controlPlaneTokens(testDir: string): Array<[string, string]>;
  testPasswords(testSources: string): Array<[string, string]>;
}
const scanner = (await import(pathToFileURL(join(PACKAGE_ROOT, 'scripts', 'scan-logs.js')).href)) as Scanner;

const line = (fields: Record<string, unknown>) =>
  JSON.stringify({ level: 'info', time: '2030-01-01T00:00:00.000Z', ...fields });
const kinds = (text: string, known: Array<[string, string]> = []) => scanner.scanText(text, known).map((f) => f.kind);

t.test('each secret shape is caught', async (t) => {
  const { key, keyHash } = generateApiKey(42);
  const session = signSession(Buffer.alloc(32, 7), { uid: 1, st: 'stamp', iat: 1, exp: 2 });
  const planted: Array<[string, string]> = [
    ['kiteline API key', line({ msg: 'request', headers: { authorization: key } })],
    ['session token', line({ msg: 'request', token2: session })],
    ['auth_token cookie value', line({ msg: 'request', setCookie: 'auth_token=abc123def; Path=/' })],
    ['password hash', line({ msg: 'user', stored: await hashPassword('planted-password') })],
    ['API key hash (sha256 hex)', line({ msg: 'apikey', stored: keyHash })],
    ['PEM block', line({ msg: 'cluster', ca: '-----BEGIN CERTIFICATE-----\nMIIB...' })],
    [
      'kubeconfig credential data',
      'users:\n- user:\n    client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t'.split('\n')[2],
    ],
    ['kubeconfig credential data', line({ msg: 'x', text: 'client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t' })],
    ['token field', line({ msg: 'kubeconfig', detail: 'token: 8e4f258d73bb625ccdd9d42f0681fd5f' })],
    ['token field', '{"token":"8e4f258d73bb625ccdd9d42f0681fd5f"}'],
    ['Bearer value', line({ msg: 'upstream', header: 'Bearer abcdefgh12345678' })],
  ];
  for (const [kind, text] of planted) {
    t.ok(kinds(text).includes(kind), `caught: ${kind}`);
  }
  const findings = scanner.scanText(planted.map(([, text]) => text).join('\n'));
  t.same(
    [...new Set(findings.map((f) => f.line))].sort((a, b) => a - b),
    planted.map((_, i) => i + 1),
    'every planted line is reported by its line number',
  );
});

t.test('known values: control plane tokens and test passwords', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'scan-logs-'));
  mkdirSync(join(dir, 'host'));
  writeFileSync(join(dir, 'host', 'tokens.csv'), 'abcdef0123456789abcdef,admin,admin,"system:masters"\n');
  const tokens = scanner.controlPlaneTokens(dir);
  t.same(tokens, [['admin token of control plane host', 'abcdef0123456789abcdef']]);
  mkdirSync(join(dir, 'tests'));
  writeFileSync(
    join(dir, 'tests', 'x.test.ts'),
    "const USER = { username: 'u', password: 'hunter2-hunter2' };\nexport const ADMIN_PASSWORD = 'another-secret-1';\n",
  );
  const passwords = scanner.testPasswords(join(dir, 'tests'));
  t.same(passwords.map(([, value]) => value).sort(), ['another-secret-1', 'hunter2-hunter2']);
  const known = [...tokens, ...passwords];
  t.same(
    kinds(line({ msg: 'login', body: { password: 'hunter2-hunter2' } }), known),
    [passwords.find(([, v]) => v === 'hunter2-hunter2')![0]],
    'a test password',
  );
  t.same(
    kinds(line({ msg: 'upstream', detail: 'abcdef0123456789abcdef' }), known),
    ['admin token of control plane host'],
    'a control plane token',
  );
  t.ok(scanner.testPasswords(join(PACKAGE_ROOT, 'test')).length > 5, 'the real test sources yield their passwords');
});

t.test('clean and redacted lines pass', async (t) => {
  const clean = [
    line({
      reqId: '886dde80-8440-4643-9e54-05e08a5dd6bd',
      method: 'GET',
      route: '/api/v1/clusters',
      status: 200,
      user: 'apikey:admin-key',
      msg: 'request',
    }),
    line({
      msg: 'request',
      req: { headers: { authorization: '[redacted]', cookie: '[redacted]' } },
      token: '[redacted]',
      password: '[redacted]',
      config: '[redacted]',
    }),
    line({ msg: 'logout', setCookie: 'auth_token=; Path=/; Max-Age=0' }),
    line({ msg: 'request', path: `/api/v1/configmaps/${'a'.repeat(64)}`, status: 400 }),
    line({
      msg: 'invalid kubeconfig: user "u": tokenFile is a file path on the gateway; put the token inline (token)',
    }),
    line({
      msg: 'audit',
      audit: { who: 'admin', verb: 'create', resource: 'secrets', name: 'db-password', result: 'success' },
    }),
  ];
  for (const text of clean) t.same(kinds(text, [['a test password', 'hunter2-hunter2']]), [], text.slice(0, 90));
});
