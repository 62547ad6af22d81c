// `kiteline terminal` (src/terminal-client.ts) as a user runs it: `node bin/kiteline.js terminal`
// in its own process, input piped in, against a gateway and a real busybox pod on the target-a
// node. Its output is the pod's TTY's, its exit status the shell's (`exit 3` is 3, the end of the
// input ends the shell with 0); the key works from --key and from KITELINE_API_KEY; a refused
// handshake (a bad key, a missing pod) is exit 1 with the status and the gateway's message; usage
// errors are exit 2; and the key appears in no output.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { PACKAGE_ROOT } from '../src/config.js';
import { testControlPlane, uniqueName } from './helpers/clusters.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { startGateway } from './helpers/gateway.js';
import { busyboxPod, namespacedKubectl } from './helpers/workload-streams.js';

const target = await testControlPlane('target-a');
const gw = await startGateway(t, { logName: uniqueName('terminal-cli') });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a') });

const ns = uniqueName('term-cli');
const k = namespacedKubectl(target.kubeconfigPath, ns);
await k(['create', 'namespace', ns]);
t.teardown(() => namespacedKubectl(target.kubeconfigPath, 'default')(['delete', 'namespace', ns, '--wait=false']));
await k(
  ['apply', '-f', '-'],
  JSON.stringify(
    busyboxPod('shell', { app: 'shell' }, ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done']),
  ),
);
await k(['wait', '--for=condition=Ready', 'pod/shell', '--timeout=120s']);

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `node bin/kiteline.js terminal ...` with the input piped in, in the background: the gateway
 * runs in this process and must keep serving meanwhile.
 */
function terminal(args: string[], input: string, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'kiteline.js'), 'terminal', ...args], {
      env: { ...process.env, KITELINE_API_KEY: '', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

const common = ['--server', gw.url, '--cluster', 'a', '--container', 'main', '--shell', 'sh'];
/** Output lines without the TTY's carriage returns. */
const lines = (text: string) => text.replace(/\r/g, '').split('\n');

t.test("piped commands run in the pod; the exit status is the shell's; the key from KITELINE_API_KEY", async (t) => {
  const run = await terminal([...common, `${ns}/shell`], 'echo "mark-$((6*7))"\nexit 3\n', {
    KITELINE_API_KEY: admin.key,
  });
  t.equal(run.status, 3, `exit 3 is exit status 3 (stderr: ${run.stderr})`);
  t.ok(
    lines(run.stdout).includes('mark-42'),
    `the command's output, on a line of its own: ${JSON.stringify(run.stdout)}`,
  );
  t.equal(run.stderr, '', "nothing on stderr (a TTY merges the shell's stderr into stdout)");
  t.notOk((run.stdout + run.stderr).includes(admin.key), 'the key appears in no output');
});

t.test('the end of the input ends the shell (exit status 0); the key from --key', async (t) => {
  const run = await terminal([...common, '--key', admin.key, `${ns}/shell`], 'echo "in $(hostname)"\n');
  t.equal(run.status, 0, `the shell's exit status (stderr: ${run.stderr})`);
  t.ok(lines(run.stdout).includes('in shell'), `the command's output: ${JSON.stringify(run.stdout)}`);
  t.notOk((run.stdout + run.stderr).includes(admin.key), 'the key appears in no output');
});

t.test('the default container and the default shell', async (t) => {
  const run = await terminal(['--server', gw.url, '--cluster', 'a', `${ns}/shell`], 'echo "zero=[$0]"\nexit 5\n', {
    KITELINE_API_KEY: admin.key,
  });
  t.equal(run.status, 5, `stderr: ${run.stderr}`);
  t.ok(lines(run.stdout).includes('zero=[sh]'), `sh, as busybox has no bash: ${JSON.stringify(run.stdout)}`);
});

t.test("a refused handshake: exit 1 with the status and the gateway's message, and no key in the output", async (t) => {
  const badKey = `kl_${uniqueName('not-a-key')}`;
  const refused = await terminal([...common, '--key', badKey, `${ns}/shell`], 'exit 0\n');
  t.equal(refused.status, 1, 'exit 1');
  t.match(
    refused.stderr,
    /^kiteline: the gateway refused the terminal: 401 Unauthorized: [^{\s]/,
    `the status and the message: ${refused.stderr}`,
  );
  t.equal(refused.stdout, '');
  t.notOk(refused.stderr.includes(badKey), 'the refused key is not printed');

  const missing = await terminal([...common, `${ns}/no-such-pod`], 'exit 0\n', { KITELINE_API_KEY: admin.key });
  t.equal(missing.status, 1, 'exit 1');
  t.match(
    missing.stderr,
    /^kiteline: the gateway refused the terminal: 404 Not Found: .*no-such-pod/,
    `the cluster's 404: ${missing.stderr}`,
  );
  t.notOk(missing.stderr.includes(admin.key), 'the key is not printed');

  const badShell = await terminal([...common.slice(0, -1), '/bin/sh', `${ns}/shell`], 'exit 0\n', {
    KITELINE_API_KEY: admin.key,
  });
  t.equal(badShell.status, 1, 'exit 1');
  t.match(
    badShell.stderr,
    /^kiteline: the gateway refused the terminal: 400 Bad Request: /,
    `a 400: ${badShell.stderr}`,
  );
});

t.test('usage errors: exit 2', async (t) => {
  const noKey = await terminal(['--server', gw.url, `${ns}/shell`], '');
  t.equal(noKey.status, 2);
  t.match(noKey.stderr, /an API key is required: --key or KITELINE_API_KEY/);
  const noPod = await terminal(['--server', gw.url, '--key', admin.key, ns], '');
  t.equal(noPod.status, 2);
  t.match(noPod.stderr, /terminal takes one NAMESPACE\/POD/);
  t.notOk(noPod.stderr.includes(admin.key), 'the key is not printed');
});
