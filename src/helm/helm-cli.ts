// The real `helm`, run for release writes (install, upgrade, rollback, uninstall) and for reading a
// chart (`helm show`), docs/helm.md. Each run gets a private folder (mode 0700, removed after): the
// kubeconfig the route wrote (kiteline's own Kubernetes API for one cluster, with a token of the
// user's), the values file, the registry credentials, and Helm's cache, config and data homes, so
// nothing of one run or user reaches another and nothing is left on disk. The environment is
// PATH and those folders only: no credential of kiteline's process reaches Helm. A run that
// outlives its deadline is killed. Helm's failure is mapped to a clear HTTP error from its own
// message (the last `Error:` line): a name in use or an operation in progress is a 409, a refusal
// by the cluster a 403, a missing release a 404, a failed hook or any other failure of the release
// a 422, a timeout a 504, a Helm that cannot start a 503. Secrets never appear in arguments.
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BadGatewayError,
  BadRequestError,
  ConflictError,
  ForbiddenError,
  GatewayTimeoutError,
  HttpError,
  NotFoundError,
  ServiceUnavailableError,
} from '../errors.js';

/** Helm's output kept at most (stdout of `helm show` included). */
const MAX_OUTPUT_BYTES = 8 * 1024 * 1024;
/** Helm's message shown at most. */
const MAX_MESSAGE_CHARS = 2000;

/** A failure of the release Helm reports (a failed hook, a rejected manifest): 422. */
export class ReleaseFailedError extends HttpError {
  constructor(message: string) {
    super(422, 'ReleaseFailed', message);
  }
}

/** A private folder for one run of Helm; `remove` when done. */
export class HelmWorkspace {
  readonly dir = mkdtempSync(join(tmpdir(), 'kiteline-helm-'));

  constructor() {
    chmodSync(this.dir, 0o700);
  }

  /** Writes a file only this process's user can read; returns its path. */
  file(name: string, content: string | Buffer): string {
    const path = join(this.dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  }

  /** The environment of a run: PATH and Helm's homes in this folder, nothing else. */
  env(): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: this.dir,
      HELM_CACHE_HOME: join(this.dir, 'cache'),
      HELM_CONFIG_HOME: join(this.dir, 'config'),
      HELM_DATA_HOME: join(this.dir, 'data'),
      HELM_PLUGINS: join(this.dir, 'plugins'),
      KUBECONFIG: join(this.dir, 'kubeconfig'),
    };
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The message of Helm's failure: its last `Error:` line (Helm prints warnings before it), trimmed. */
export function helmMessage(stderr: string): string {
  const lines = stderr.split('\n').map((line) => line.trim());
  const error = lines.filter((line) => line.startsWith('Error:')).at(-1);
  const message = (error ?? lines.filter(Boolean).at(-1) ?? 'helm failed').replace(/^Error:\s*/, '');
  return message.length > MAX_MESSAGE_CHARS ? `${message.slice(0, MAX_MESSAGE_CHARS)}…` : message;
}

/** The HTTP error for Helm's failure message. */
export function helmFailure(message: string, timedOut = false): HttpError {
  const text = `helm: ${message}`;
  if (timedOut || /context deadline exceeded|timed out waiting/i.test(message)) return new GatewayTimeoutError(text);
  // The registry or repository refused or failed the pull, or kiteline's own API could not be reached.
  if (/failed to (authorize|fetch|do request)|unexpected status|cluster unreachable/i.test(message))
    return new BadGatewayError(text);
  if (/could not locate a version matching|: not found$|^release: not found/i.test(message))
    return new NotFoundError(text);
  if (
    /cannot re-?use a name that is still in use|another operation \(install\/upgrade\/rollback\) is in progress/i.test(
      message,
    )
  )
    return new ConflictError(text);
  if (/\bforbidden\b|\bUnauthorized\b|\bmay not (get|list|watch|create|update|patch|delete)\b/i.test(message))
    return new ForbiddenError(text);
  if (/release: not found|has no deployed releases|release .* not found/i.test(message)) return new NotFoundError(text);
  if (/YAML parse error|error converting YAML|values don't meet the specifications|invalid chart/i.test(message))
    return new BadRequestError(text);
  return new ReleaseFailedError(text);
}

export interface HelmRunOptions {
  binary: string;
  workspace: HelmWorkspace;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** After its deadline Helm gets SIGTERM (it then marks the release failed), and this long before SIGKILL. */
const KILL_GRACE_MS = 15_000;

/**
 * Runs helm with these arguments; its stdout, or the mapped error of its failure. At the deadline
 * (or when `signal` aborts) it is asked to stop with SIGTERM, which Helm's install and upgrade
 * catch to mark the release failed rather than leave it pending; SIGKILL follows if it does not.
 */
export function runHelm(args: string[], options: HelmRunOptions): Promise<string> {
  const { binary, workspace, timeoutMs, signal } = options;
  return new Promise((resolve, reject) => {
    let stopped: 'deadline' | 'aborted' | undefined;
    const child = execFile(
      binary,
      args,
      { env: workspace.env(), cwd: workspace.dir, maxBuffer: MAX_OUTPUT_BYTES },
      (err, stdout, stderr) => {
        clearTimeout(deadline);
        clearTimeout(kill);
        signal?.removeEventListener('abort', abort);
        if (!err) return resolve(stdout);
        const { code } = err as NodeJS.ErrnoException;
        if (code === 'ENOENT' || code === 'EACCES')
          return reject(new ServiceUnavailableError(`helm is not installed here (${binary}): see docs/helm.md`));
        if (code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER')
          return reject(new BadGatewayError('helm: its output passed the limit; the release may have changed'));
        if (stopped === 'deadline')
          return reject(helmFailure(`no answer within ${Math.round(timeoutMs / 1000)} s`, true));
        reject(helmFailure(helmMessage(stderr)));
      },
    );
    let kill: NodeJS.Timeout | undefined;
    const stop = (why: 'deadline' | 'aborted') => {
      stopped ??= why;
      child.kill('SIGTERM');
      kill ??= setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
    };
    const deadline = setTimeout(() => stop('deadline'), timeoutMs);
    const abort = () => stop('aborted');
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
  });
}
