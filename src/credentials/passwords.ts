// Password hashing with scrypt (node:crypto): pure credential crypto, used by the user store
// (host/users.ts hashes what it stores) and by authentication (auth/auth-service.ts verifies).
// The stored form is self-describing:
//   scrypt$<N>$<r>$<p>$<salt base64url>$<hash base64url>
// so parameters can be raised later without breaking stored hashes. Verification is constant-time
// and refuses parameters outside sane bounds (a crafted Secret cannot make us burn memory).
// Each scrypt holds a libuv thread (4 by default, shared with file system, DNS and zlib work):
// hashes run at most `limitPasswordHashing(n)` at a time in the process, the rest wait their turn,
// so a burst of anonymous logins cannot take every thread.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

const N = 16384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

/** Hashes running now, the most allowed at once, and the callers waiting for a slot (FIFO). */
const hashing = { running: 0, limit: 2, waiting: [] as Array<() => void> };

/** Sets how many password hashes may run at once in this process (config passwordHashConcurrency). */
export function limitPasswordHashing(concurrency: number): void {
  hashing.limit = Math.max(1, concurrency);
  while (hashing.running < hashing.limit && hashing.waiting.length > 0) {
    hashing.running++;
    hashing.waiting.shift()!();
  }
}

async function hashSlot(): Promise<void> {
  if (hashing.running < hashing.limit) {
    hashing.running++;
    return;
  }
  await new Promise<void>((resolve) => hashing.waiting.push(resolve)); // handed over by releaseHashSlot
}

function releaseHashSlot(): void {
  const next = hashing.running <= hashing.limit ? hashing.waiting.shift() : undefined;
  if (next) next();
  else hashing.running--;
}

async function scryptAsync(
  password: string,
  salt: Buffer,
  n: number,
  r: number,
  p: number,
  keylen: number,
): Promise<Buffer> {
  await hashSlot();
  try {
    return await new Promise((resolve, reject) => {
      scrypt(password.normalize('NFC'), salt, keylen, { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 }, (err, key) =>
        err ? reject(err) : resolve(key),
      );
    });
  } finally {
    releaseHashSlot();
  }
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const hash = await scryptAsync(password, salt, N, R, P, KEY_LENGTH);
  return ['scrypt', N, R, P, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** True when password matches the stored hash; false for a wrong password or an unreadable hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [n, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  const validParams =
    Number.isInteger(n) &&
    n >= 1024 &&
    n <= 1 << 20 &&
    (n & (n - 1)) === 0 &&
    Number.isInteger(r) &&
    r >= 1 &&
    r <= 32 &&
    Number.isInteger(p) &&
    p >= 1 &&
    p <= 16;
  if (!validParams) return false;
  const salt = Buffer.from(parts[4], 'base64url');
  const expected = Buffer.from(parts[5], 'base64url');
  if (salt.length < 8 || expected.length < 16 || expected.length > 64) return false;
  const actual = await scryptAsync(password, salt, n, r, p, expected.length);
  return timingSafeEqual(actual, expected);
}

/** A fixed hash to verify against when the user does not exist, so both cases cost the same. */
let dummyHash: Promise<string> | undefined; // cache: computed once per process
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword(randomBytes(16).toString('hex'));
  return dummyHash;
}
