// The gateway's validation rules for what people type: usernames, passwords, role names and role patterns
// (docs/auth.md, "Users"). Each rule throws a BadRequestError whose message states the rule.
import { BadRequestError } from '../errors.js';
import { globMatches } from '../auth/patterns.js';
import type { Verb } from '../auth/principal.js';

/** The verbs a role can grant (docs/auth.md). */
export const VERBS: readonly Verb[] = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

export const USERNAME_PATTERN = /^[A-Za-z0-9._@-]{1,63}$/;
export const ROLE_NAME_PATTERN = /^[A-Za-z0-9._@-]{1,63}$/;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 128;
export const PATTERN_MAX = 253;

export function checkUsername(username: string): void {
  if (!USERNAME_PATTERN.test(username)) {
    throw new BadRequestError("username must be 1 to 63 characters of letters, digits, '.', '_', '@' and '-'");
  }
}

export function checkPassword(password: string): void {
  // Length in Unicode code points, so a password of 8 emoji is 8 characters.
  const length = [...password].length;
  if (length < PASSWORD_MIN || length > PASSWORD_MAX) {
    throw new BadRequestError(`password must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters long`);
  }
}

export function checkRoleName(name: string): void {
  if (!ROLE_NAME_PATTERN.test(name)) {
    throw new BadRequestError("role name must be 1 to 63 characters of letters, digits, '.', '_', '@' and '-'");
  }
}

/** A role pattern: a glob ("*", "prod-*") or an exclusion ("!kube-system"); no whitespace. */
export function checkPatterns(field: string, patterns: string[]): void {
  for (const pattern of patterns) {
    const body = pattern.startsWith('!') ? pattern.slice(1) : pattern;
    if (body === '' || body.length > PATTERN_MAX || /\s/.test(body) || body.startsWith('!')) {
      throw new BadRequestError(
        `${field}: invalid pattern "${pattern}" ` +
          `(a glob of 1 to ${PATTERN_MAX} non-space characters, optionally prefixed by one "!")`,
      );
    }
    // A verb pattern that matches no verb is a typo that would silently grant nothing.
    if (field === 'verbs' && !VERBS.some((verb) => globMatches(body, verb))) {
      throw new BadRequestError(
        `verbs: "${pattern}" matches no verb (verbs are ${VERBS.join(', ')}, or a glob such as *)`,
      );
    }
  }
}

/** Ids in routes are positive integers; anything else is 400 "invalid id". */
export function parseId(raw: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(raw)) throw new BadRequestError('invalid id');
  return Number(raw);
}
