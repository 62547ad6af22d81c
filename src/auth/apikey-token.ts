// API key values: "kl_<id>_<secret>", where secret is 32 random bytes (256 bits) in base64url.
// The id lets the gateway find the key in its cache without a host round trip; only the SHA-256
// of the secret is stored (hex, Secret key "keyHash"), compared in constant time.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 } from './secrets-compare.js';

const KEY_PATTERN = /^kl_([1-9][0-9]{0,14})_([A-Za-z0-9_-]{43})$/;

export interface ApiKeyParts {
  id: number;
  secret: string;
}

export function generateApiKey(id: number): { key: string; keyHash: string } {
  const secret = randomBytes(32).toString('base64url');
  return { key: `kl_${id}_${secret}`, keyHash: sha256(secret).toString('hex') };
}

export function parseApiKey(value: string): ApiKeyParts | undefined {
  const match = KEY_PATTERN.exec(value);
  return match ? { id: Number(match[1]), secret: match[2]! } : undefined;
}

/** One SHA-256 per check: both sides are 32-byte digests, so timingSafeEqual needs no padding. */
export function apiKeySecretMatches(secret: string, storedHexHash: string): boolean {
  if (storedHexHash.length !== 64 || !/^[0-9a-f]{64}$/.test(storedHexHash)) return false;
  return timingSafeEqual(sha256(secret), Buffer.from(storedHexHash, 'hex'));
}
