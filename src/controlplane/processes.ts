// Liveness checks and termination of detached processes, guarded against pid reuse.
import { readFileSync } from 'node:fs';

/** True when pid runs and (if given) its command line mentions marker, e.g. the data directory. */
export function isAlive(pid: number, marker?: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false; // kill(0) would signal our own group
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/\) Z /.test(stat)) return false; // a zombie is dead, only not yet reaped
    if (marker) return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
  } catch {
    return false;
  }
  return true;
}

/** SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
export async function terminate(pid: number, marker?: string, graceMs = 10_000): Promise<void> {
  if (!isAlive(pid, marker)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (isAlive(pid, marker)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return;
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
