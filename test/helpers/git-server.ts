// A Git repository served over smart HTTP on loopback, as a Git host serves one, for Flux's
// source-controller to clone: Debian's `git http-backend` (the CGI program Git ships for exactly
// this) behind a small Node HTTP server that runs it once per request, and a working clone the
// test commits and pushes to with the git command line.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { TEST_DIR } from './clusters.js';

export interface GitServer {
  /** The repository's clone URL, http://127.0.0.1:<port>/<name>.git. */
  url: string;
  /** The working clone commits are made in. */
  workdir: string;
  /**
   * Writes (a string) or deletes (null) files by path in the working clone, commits them with
   * `message` and pushes to the served repository; resolves to the new commit's id.
   */
  commit(files: Record<string, string | null>, message: string): string;
  /** Every file ever committed, at every commit: `git log -p` of the whole history. */
  history(): string;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

function git(cwd: string, args: string[]): string {
  const result = spawnSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_AUTHOR_NAME: 'kiteline test', GIT_AUTHOR_EMAIL: 'test@kiteline.invalid' },
  });
  if (result.status !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr || result.stdout}`);
  return result.stdout;
}

/** The CGI variables of one request (RFC 3875), with every header as HTTP_<NAME>. */
function cgiEnvironment(req: IncomingMessage, root: string): NodeJS.ProcessEnv {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  let pathInfo: string;
  try {
    pathInfo = decodeURIComponent(url.pathname);
  } catch {
    pathInfo = url.pathname; // a malformed escape: http-backend answers 404 for it
  }
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    REQUEST_METHOD: req.method ?? 'GET',
    PATH_INFO: pathInfo,
    QUERY_STRING: url.search.slice(1),
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    SERVER_PROTOCOL: 'HTTP/1.1',
    GATEWAY_INTERFACE: 'CGI/1.1',
  };
  if (req.headers['content-type']) env.CONTENT_TYPE = req.headers['content-type'];
  if (req.headers['content-length']) env.CONTENT_LENGTH = req.headers['content-length'];
  // Git's protocol version 2 asks through this header; http-backend reads it as GIT_PROTOCOL.
  if (typeof req.headers['git-protocol'] === 'string') env.GIT_PROTOCOL = req.headers['git-protocol'];
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string') env[`HTTP_${name.toUpperCase().replace(/-/g, '_')}`] = value;
  }
  return env;
}

/** Runs `git http-backend` for one request: the body in, the CGI headers and body out. */
function serveCgi(req: IncomingMessage, res: ServerResponse, root: string): void {
  const child = spawn('git', ['http-backend'], { env: cgiEnvironment(req, root), stdio: ['pipe', 'pipe', 'inherit'] });
  // http-backend may exit before reading the whole body (EPIPE), and a client that hangs up leaves
  // it waiting on its input: end it then.
  child.stdin.on('error', () => undefined);
  res.on('close', () => {
    if (child.exitCode === null && child.signalCode === null) child.kill();
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  // 'error' (git could not start) may come with or without 'close': answer once.
  const finish = () => {
    if (res.writableEnded) return;
    if (!headersDone && !res.headersSent) res.writeHead(502).end('git http-backend gave no answer\n');
    else res.end();
  };
  child.on('close', finish);
  child.on('error', finish);
}

/** A new empty repository `name`, served on a free loopback port; removed at teardown. */
export async function startGitServer(t: Teardown, name: string): Promise<GitServer> {
  const base = join(TEST_DIR, 'git');
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `${name}-`));
  const root = join(dir, 'served');
  const bare = join(root, `${name}.git`);
  mkdirSync(bare, { recursive: true });
  git(bare, ['init', '--quiet', '--bare', '--initial-branch=main']);
  // Pushes over HTTP are not needed: the test pushes to the bare repository's path.
  const server = createServer((req, res) => serveCgi(req, res, root));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });
  const workdir = join(dir, 'work');
  git(dir, ['clone', '--quiet', bare, workdir]);
  git(workdir, ['config', 'user.name', 'kiteline test']);
  git(workdir, ['config', 'user.email', 'test@kiteline.invalid']);
  git(workdir, ['checkout', '--quiet', '-B', 'main']);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/${name}.git`,
    workdir,
    commit(files, message) {
      for (const [path, content] of Object.entries(files)) {
        const file = join(workdir, path);
        if (content === null) rmSync(file, { force: true });
        else {
          mkdirSync(dirname(file), { recursive: true });
          writeFileSync(file, content);
        }
      }
      git(workdir, ['add', '--all']);
      git(workdir, ['commit', '--quiet', '--allow-empty', '-m', message]);
      git(workdir, ['push', '--quiet', 'origin', 'main']);
      return git(workdir, ['rev-parse', 'HEAD']).trim();
    },
    history() {
      return git(workdir, ['log', '-p', '--all', '--format=commit %H']);
    },
  };
}
