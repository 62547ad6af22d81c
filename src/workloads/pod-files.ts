// Kite's pod file browser, over exec in the chosen container (exec-channel.ts): list a directory
// (`ls -la`), preview or download a file (`cat`), download a directory (`tar cf -`), upload a
// file. Every path is one argv word after `--`: nothing the user chooses is ever read by a shell.
// Sizes are bounded: a listing at MAX_LISTING_BYTES, a preview at MAX_PREVIEW_BYTES (cut there),
// a download at MAX_DOWNLOAD_BYTES (the exec is ended there), an upload at MAX_UPLOAD_BYTES.
//
// Uploads: a v4 exec stream cannot half-close stdin, so a command reading to end of input (Kite's
// `tee`) never learns where the file ends. kiteline knows the size up front and runs a fixed
// script that reads exactly that many bytes into a temporary name, then renames it:
//   sh -c 'head -c "$1" > "$2" && mv -f -- "$2" "$3"' kiteline-upload <size> <temporary> <path>
// The script is a constant; size and paths are positional parameters, never parsed as code. The
// exec's exit status then says whether the file was written. A container without sh and head gets
// a 400 saying so.
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { BadRequestError, BadGatewayError, HttpError, PayloadTooLargeError } from '../errors.js';
import type { ToolContext } from '../cluster-access/calls.js';
import { endOf, openExec, runCommand, type ExecChannel, type ExecResult } from './exec-channel.js';

export const MAX_LISTING_BYTES = 4 * 1024 * 1024;
export const MAX_PREVIEW_BYTES = 8 * 1024 * 1024;
export const MAX_DOWNLOAD_BYTES = 1024 * 1024 * 1024;
export const MAX_UPLOAD_BYTES = 64 * 1024 * 1024;

/** One directory entry, Kite's FileInfo. */
export interface FileInfo {
  name: string;
  isDir: boolean;
  /** As ls prints it (bytes). */
  size: string;
  /** "YYYY-MM-DD HH:MM:SS" when ls gives a full time, else ls's own short form. */
  modTime: string;
  mode: string;
  uid: string;
  gid: string;
}

/** Where the files are: the pod and its container ('' for the pod's only or default one). */
export interface PodFileTarget {
  namespace: string;
  pod: string;
  container: string;
}

/** A path the user chose: absolute, without NUL, bounded. */
export function checkedPath(path: string | undefined, fallback?: string): string {
  const value = path === undefined || path === '' ? fallback : path;
  if (value === undefined) throw new BadRequestError('path is required');
  if (!value.startsWith('/') || value.includes('\0') || value.length > 4096) {
    throw new BadRequestError('path must be an absolute path in the container (at most 4096 characters)');
  }
  return value;
}

/** A file name for an upload: one path segment. */
export function checkedFileName(name: string | undefined): string {
  const base = name ?? '';
  if (
    base === '' ||
    base === '.' ||
    base === '..' ||
    base.includes('/') ||
    base.includes('\\') ||
    base.includes('\0') ||
    base.length > 255
  ) {
    throw new BadRequestError('the uploaded file needs a plain file name (one path segment)');
  }
  return base;
}

/** The ls invocations tried in turn: GNU's full time, busybox's (-e), then the plain long form. */
const LISTINGS: ReadonlyArray<{ flags: string[]; timeWords: number; full: boolean }> = [
  { flags: ['-la', '--full-time'], timeWords: 3, full: true },
  { flags: ['-lae'], timeWords: 5, full: true },
  { flags: ['-la'], timeWords: 3, full: false },
];

const UNKNOWN_OPTION = /unrecognized option|invalid option|illegal option|unknown option/i;

/** The entries of a directory, directories first, then by name (case-insensitive), as Kite sorts them. */
export async function listFiles(ctx: ToolContext, target: PodFileTarget, path: string): Promise<FileInfo[]> {
  for (const listing of LISTINGS) {
    const run = await runToEnd(ctx, target, ['ls', ...listing.flags, '--', path], MAX_LISTING_BYTES);
    if (run.result.exitCode === 0) return parseListing(run.stdout.toString('utf8'), listing.timeWords, listing.full);
    if (UNKNOWN_OPTION.test(run.stderr)) continue;
    throw execFailure(run.result, run.stderr, 'ls');
  }
  throw new BadRequestError("this container's ls prints no long listing");
}

/** Parses `ls -l` lines (the total line, `.` and `..` skipped). `timeWords`: how many words the time takes. */
export function parseListing(output: string, timeWords: number, fullTime: boolean): FileInfo[] {
  const files: FileInfo[] = [];
  for (const line of output.split('\n')) {
    if (line.startsWith('total') || line.trim() === '') continue;
    const words = line.trim().split(/\s+/);
    // mode, links, uid, gid, size (a device's "major, minor" takes one more), time, name.
    const device = words[4]?.endsWith(',') ? 1 : 0;
    const timeAt = 5 + device;
    const nameAt = timeAt + timeWords;
    if (words.length <= nameAt) continue;
    const name = words.slice(nameAt).join(' ');
    if (name === '.' || name === '..') continue;
    const mode = words[0];
    files.push({
      name,
      isDir: mode.startsWith('d'),
      size: device ? `${words[4]} ${words[5]}` : words[4],
      modTime: fullTime ? fullModTime(words.slice(timeAt, nameAt)) : words.slice(timeAt, nameAt).join(' '),
      mode,
      uid: words[2],
      gid: words[3],
    });
  }
  return files.sort((a, b) =>
    a.isDir !== b.isDir ? (a.isDir ? -1 : 1) : a.name.toLowerCase().localeCompare(b.name.toLowerCase()),
  );
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** GNU's "2026-11-24 08:01:02.123456789 +0000" or busybox's "Tue Nov 24 08:01:02 2026" as "2026-11-24 08:01:02". */
function fullModTime(words: string[]): string {
  if (words.length === 3) return `${words[0]} ${words[1].replace(/\.\d+$/, '')}`;
  const [, month, day, time, year] = words;
  const m = MONTHS.indexOf(month ?? '');
  if (m < 0) return words.join(' ');
  return `${year}-${String(m + 1).padStart(2, '0')}-${(day ?? '').padStart(2, '0')} ${time}`;
}

/** Whether the path is a directory (`test -d`). */
export async function isDirectory(ctx: ToolContext, target: PodFileTarget, path: string): Promise<boolean> {
  const run = await runToEnd(ctx, target, ['test', '-d', path], 0);
  if (run.result.exitCode === undefined) throw execFailure(run.result, run.stderr, 'test');
  return run.result.exitCode === 0;
}

/**
 * A file's bytes (`cat`) or a directory as a tar stream (`tar cf -`), ended after `maxBytes`
 * (then the stream ends with `truncated` set). The exec is open before this returns, so a missing
 * pod or container is an HTTP error, not a broken download; an error after the first byte (no
 * such file, no permission) ends the stream early. The exec ends when the stream is destroyed.
 */
export async function openFileStream(
  ctx: ToolContext,
  target: PodFileTarget,
  command: string[],
  maxBytes: number,
): Promise<{ stream: Readable; truncated: () => boolean }> {
  const exec = await open(ctx, target, command, false);
  const stream = new PassThrough();
  let sent = 0;
  let cut = false;
  exec.on('stdout', (chunk: Buffer) => {
    if (cut) return;
    const room = maxBytes - sent;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    sent += part.length;
    if (!stream.write(part)) {
      exec.pause();
      stream.once('drain', () => exec.resume());
    }
    if (sent >= maxBytes) {
      cut = true;
      exec.destroy();
      stream.end();
    }
  });
  exec.on('end', () => stream.end());
  stream.on('close', () => exec.destroy());
  ctx.signal.addEventListener('abort', () => exec.destroy(), { once: true });
  exec.start();
  return { stream, truncated: () => cut };
}

/** The fixed upload script (see the header): $1 size, $2 temporary name, $3 the file. */
const UPLOAD_SCRIPT = 'head -c "$1" > "$2" && mv -f -- "$2" "$3"';

/** Writes `data` as `<directory>/<fileName>` in the container; returns the file's path. */
export async function uploadFile(
  ctx: ToolContext,
  target: PodFileTarget,
  directory: string,
  fileName: string,
  data: Buffer,
): Promise<string> {
  if (data.length > MAX_UPLOAD_BYTES) throw new PayloadTooLargeError(`an upload is at most ${MAX_UPLOAD_BYTES} bytes`);
  const path = posix.join(directory, fileName);
  const temporary = posix.join(
    directory,
    `.${fileName.slice(0, 200)}.kiteline-upload-${randomBytes(4).toString('hex')}`,
  );
  const exec = await open(
    ctx,
    target,
    ['sh', '-c', UPLOAD_SCRIPT, 'kiteline-upload', String(data.length), temporary, path],
    true,
  );
  let stderr = '';
  exec.on('stderr', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4096)));
  const ended = endOf(exec);
  exec.start();
  for (let at = 0; at < data.length; at += 64 * 1024) {
    if (!exec.writeStdin(data.subarray(at, at + 64 * 1024)))
      await new Promise<void>((resolve) => exec.onDrain(resolve));
    if (exec.isEnded) break;
  }
  const result = await ended;
  exec.close();
  if (result.exitCode !== 0) throw execFailure(result, stderr, 'sh');
  return path;
}

async function open(ctx: ToolContext, target: PodFileTarget, command: string[], stdin: boolean): Promise<ExecChannel> {
  const exec = await openExec(
    ctx.conn,
    { namespace: target.namespace, pod: target.pod, container: target.container, command, stdin, tty: false },
    ctx.headers,
  );
  if (ctx.signal.aborted) {
    exec.destroy();
    throw new HttpError(499, 'ClientClosedRequest', 'the client went away');
  }
  return exec;
}

/** Runs a command without stdin to its end; stdout kept up to `maxBytes` (more is a 502), stderr's tail. */
async function runToEnd(
  ctx: ToolContext,
  target: PodFileTarget,
  command: string[],
  maxBytes: number,
): Promise<{ stdout: Buffer; stderr: string; result: ExecResult }> {
  const run = await runCommand(ctx.conn, { ...target, command }, ctx.headers, { maxBytes, signal: ctx.signal });
  if (run.cut) throw new BadGatewayError(`${command[0]} printed more than ${maxBytes} bytes`);
  return run;
}

/** What a failed command means for the caller: a missing tool or path is theirs to fix (400). */
function execFailure(result: ExecResult, stderr: string, tool: string): HttpError {
  const said = (stderr.trim().split('\n').pop() ?? '').slice(0, 500);
  if (result.exitCode === undefined) {
    const message = result.error ?? 'the exec failed';
    if (/not found|no such file|executable file/i.test(message)) {
      return new BadRequestError(`file browsing needs \`${tool}\` in the container: ${message}`);
    }
    return new BadGatewayError(message);
  }
  return new BadRequestError(said || `${tool} exited with status ${result.exitCode}`);
}
