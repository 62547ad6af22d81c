// The README's five-minute tour runs as written (issue 23). Its shell blocks are read from
// README.md ("A five-minute tour") and split into commands; the test does what `make run` does (the
// control plane start line of the Makefile's `run` recipe, in a fresh directory, then
// `kiteline serve` on a free port) and runs every command in order in one bash session, in a work
// directory where `.kiteline/host` is that control plane, with the tour's address swapped for the
// gateway's. Each command must succeed (exit 0, no error body unless the tour shows one) and its
// output must match what the tour shows for it, by structure (compareShown: ids, times, ages,
// ports and generated name suffixes only need to be there). Prose the comparison cannot check is
// printed as a comment. Whatever the tour shows — other steps, a workload on a real node — is what
// runs and is compared; nothing here knows the individual steps.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { PACKAGE_ROOT } from '../src/config.js';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { stopControlPlane } from '../src/controlplane/controlplane.js';
import { freePort } from '../src/controlplane/ports.js';
import { TEST_DIR } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { commandsOf, sectionShellBlocks, type DocCommand } from './helpers/readme-commands.js';
import { compareShown } from './helpers/shown-output.js';

const TOUR = 'A five-minute tour';
/** The address the tour's commands use, as `make run` serves it. */
const TOUR_ADDRESS = 'http://127.0.0.1:8080';
const WORK = join(TEST_DIR, 'readme-tour');
const HOST_DIR = join(WORK, '.kiteline', 'host');
const MAKE_HOST_DIR = '$(HOST_DIR)';

/** The arguments `make run` gives `kiteline controlplane start`, with its HOST_DIR. */
function makeRunControlPlaneArgs(): string[] {
  const makefile = readFileSync(join(PACKAGE_ROOT, 'Makefile'), 'utf8');
  const recipe = /^run:.*\n((?:\t.*\n?)+)/m.exec(makefile)?.[1] ?? '';
  const start = /kiteline\.js (controlplane start[^&;\n]*)/.exec(recipe)?.[1];
  if (!start) throw new Error("the Makefile's run recipe starts no control plane");
  return start
    .trim()
    .split(/\s+/)
    .map((arg) => (arg === MAKE_HOST_DIR ? '.kiteline/host' : arg));
}

/**
 * A fresh work directory: the repository's folders and tracked files linked in (so `bin/`,
 * `deploy/`, ... resolve as in a checkout), its own `.kiteline/host`; what the tour writes
 * (cookies.txt) stays in it.
 */
function freshWorkDir(): void {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(dirname(HOST_DIR), { recursive: true });
  const tracked = new Set(spawnSync('git', ['ls-files'], { cwd: PACKAGE_ROOT, encoding: 'utf8' }).stdout.split('\n'));
  for (const entry of readdirSync(PACKAGE_ROOT, { withFileTypes: true })) {
    if (entry.name === '.kiteline' || entry.name === '.git' || (!entry.isDirectory() && !tracked.has(entry.name)))
      continue;
    symlinkSync(join(PACKAGE_ROOT, entry.name), join(WORK, entry.name));
  }
}

/** `node bin/kiteline.js serve` against the work directory's control plane, on a free port. */
async function serve(t: Test): Promise<string> {
  const port = await freePort();
  const logDir = join(TEST_DIR, 'logs');
  mkdirSync(logDir, { recursive: true });
  const log = openSync(join(logDir, 'readme-tour.log'), 'a');
  const child = spawn(process.execPath, ['bin/kiteline.js', 'serve'], {
    cwd: WORK,
    // As `make run`: an https listener beside the http one (its port is the kubeconfig's business).
    env: {
      ...process.env,
      KUBECONFIG: join(HOST_DIR, 'kubeconfig'),
      PORT: String(port),
      HOST: '127.0.0.1',
      KITELINE_NAMESPACE: '',
      KITELINE_TLS_PORT: String(await freePort()),
    },
    stdio: ['ignore', log, log],
  });
  t.teardown(() => child.kill('SIGTERM'));
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    'the gateway to be ready',
    async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.ok,
    120_000,
    200,
  );
  return url;
}

interface Ran {
  output: string;
  status: number;
}

/** Runs the commands in one bash session (variables carry over); each one's output and status. */
function runInOneShell(commands: DocCommand[], url: string): { ran: Ran[]; stderr: string } {
  const mark = `@@tour-${process.pid}@@`;
  const script = commands
    .map(
      (c, i) =>
        `printf '\\n${mark} start ${i}\\n'\n${c.text.split(TOUR_ADDRESS).join(url)}\n` +
        `printf '\\n${mark} end ${i} %d\\n' $?`,
    )
    .join('\n');
  const kubectlDir = dirname(ensureBinaries().kubectl);
  const res = spawnSync('bash', ['-c', script], {
    cwd: WORK,
    encoding: 'utf8',
    // HOME is the work directory: a reader's kubectl has no discovery cache of an earlier control
    // plane that had the same port (it would not know the kiteline CRDs' category).
    env: { ...process.env, PATH: `${kubectlDir}:${process.env.PATH}`, KUBECONFIG: '', HOME: WORK },
    timeout: 600_000,
  });
  const ran = commands.map((_, i) => {
    const found = new RegExp(`${mark} start ${i}\\n([\\s\\S]*?)\\n${mark} end ${i} (\\d+)`).exec(res.stdout ?? '');
    return { output: found?.[1]?.trim() ?? '', status: found ? Number(found[2]) : -1 };
  });
  return { ran, stderr: res.stderr ?? '' };
}

/** An error body of the gateway ({error, reason, code}) in the output. */
function errorBody(output: string): boolean {
  try {
    const parsed = JSON.parse(output);
    return typeof parsed?.error === 'string' && typeof parsed?.code === 'number' && parsed.code >= 400;
  } catch {
    return false;
  }
}

t.test("the README's five-minute tour runs as written and shows what the README shows", async (t) => {
  const commands = sectionShellBlocks(readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8'), TOUR).flatMap(commandsOf);
  t.ok(commands.length >= 5, `${commands.length} commands in the tour`);
  t.ok(
    commands.some((c) => c.shown.length > 0),
    'the tour shows outputs to compare',
  );

  await stopControlPlane(HOST_DIR).catch(() => undefined);
  freshWorkDir();
  const args = makeRunControlPlaneArgs();
  const started = spawnSync(process.execPath, ['bin/kiteline.js', ...args], {
    cwd: WORK,
    encoding: 'utf8',
    timeout: 600_000,
  });
  t.equal(started.status, 0, `make run's control plane start (${args.join(' ')}): ${started.stderr.slice(-500)}`);
  t.teardown(() => stopControlPlane(HOST_DIR));
  const url = await serve(t);

  const { ran, stderr } = runInOneShell(commands, url);
  commands.forEach((command, i) => {
    const { output, status } = ran[i];
    const what = command.text.split('\n')[0].slice(0, 100);
    t.equal(status, 0, `exits 0: ${what}${status === 0 ? '' : `\n${stderr.slice(-1000)}`}`);
    const comparison = command.shown.length > 0 ? compareShown(command.shown, output) : undefined;
    if (comparison?.kind === 'compared') {
      t.same(comparison.actual, comparison.expected, `shows what the README shows: ${what}`);
    } else {
      if (comparison) t.comment(`not compared (prose): ${comparison.text}`);
      t.notOk(errorBody(output), `answers no error: ${what} -> ${output.slice(0, 300)}`);
    }
  });
});
