// The node's container images. No registry is reachable, so every image a node runs is built on
// this machine by scripts/build-images.sh (cached in ~/.cache/kiteline/images, like the binaries)
// and imported into the node's containerd when the node starts.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../config.js';
import { cacheDir } from './binaries.js';

/** The local references pods use: `image: kiteline.local/busybox:1`. */
export interface NodeImages {
  /** The sandbox image every pod starts with (containerd's sandbox_image). */
  pause: string;
  /** busybox-static: sh, sleep, nc, httpd, wget and the other applets. */
  busybox: string;
}

export interface ImageArchive {
  ref: string;
  archive: string;
}

const NAMES: (keyof NodeImages)[] = ['pause', 'busybox'];

export function imageCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), 'images');
}

function read(dir: string): ImageArchive[] | undefined {
  const archives = NAMES.map((name) => ({
    name,
    archive: join(dir, `${name}.tar`),
    refFile: join(dir, `${name}.ref`),
  }));
  if (!archives.every((a) => existsSync(a.archive) && existsSync(a.refFile))) return undefined;
  return archives.map((a) => ({ ref: readFileSync(a.refFile, 'utf8').trim(), archive: a.archive }));
}

/** The image archives, built once into the cache when missing (or of an older recipe). */
export function ensureImages(env: NodeJS.ProcessEnv = process.env): { images: NodeImages; archives: ImageArchive[] } {
  const dir = imageCacheDir(env);
  const script = join(PACKAGE_ROOT, 'scripts', 'build-images.sh');
  // The script returns at once when its recipe's archives are cached.
  const built = spawnSync('bash', [script, dir], { stdio: ['ignore', 'inherit', 'inherit'], env });
  const archives = read(dir);
  if (built.status !== 0 || !archives) {
    throw new Error(
      `building the node's images failed (exit ${built.status}); run ${script} by hand as root to see why`,
    );
  }
  const [pause, busybox] = archives.map((a) => a.ref) as [string, string];
  return { images: { pause, busybox }, archives };
}

/** Imports the archives into containerd's k8s.io namespace (where the CRI plugin looks). */
export function importImages(ctr: string, socket: string, archives: ImageArchive[]): void {
  for (const { ref, archive } of archives) {
    const res = spawnSync(ctr, ['--address', socket, '--namespace', 'k8s.io', 'images', 'import', archive], {
      encoding: 'utf8',
    });
    if (res.status !== 0) throw new Error(`importing ${ref} into the node's containerd failed: ${res.stderr.trim()}`);
  }
}
