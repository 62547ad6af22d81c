// Length-safe constant-time comparison of secrets and their SHA-256 digests. Part of src/credentials/:
// pure credential crypto (no I/O, no kiteline imports) shared by the host stores, which make
// credentials, and by auth/, which checks them.
import { hash, timingSafeEqual } from 'node:crypto';

/** One-shot SHA-256 (no Hash object: this runs for every request that carries an API key). */
export function sha256(value: string | Buffer): Buffer {
  return hash('sha256', value, 'buffer');
}

/** Compares two byte strings in time independent of where they differ (and of their lengths). */
export function constantTimeEqual(a: Buffer, b: Buffer): boolean {
  // Comparing digests makes the lengths equal; the length check after keeps the result exact.
  const equal = timingSafeEqual(sha256(a), sha256(b));
  return equal && a.length === b.length;
}
