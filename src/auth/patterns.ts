// Anchored glob patterns of roles: "*" matches any run of characters, "?" one character,
// everything else itself (case-sensitive). "!x" excludes what x matches.
// A pattern list matches a value when no exclusion matches it and an inclusion does; a list of
// only exclusions means "everything except those"; an empty list matches NOTHING (Kite's empty
// lists matched everything). The value "_all" (all namespaces, or a cluster-scoped object) is
// matched only by a list without exclusions: a role that hides some namespaces cannot read
// across all of them.

/**
 * Anchored glob match without regular expressions (a backtracking RegExp needs about
 * |value|^stars steps for `*a*a*a*a*a*a*b` against a run of "a"s). Two pointers walk pattern and
 * value; on a mismatch only the LAST "*" seen takes one more character, an earlier one never does
 * (whatever an earlier star could absorb, the last one can absorb too). Each step moves the value
 * pointer forward or restarts the part after the last star, so the work is at most
 * |glob| x |value| character comparisons, whatever the number of stars.
 */
export function globMatches(glob: string, value: string): boolean {
  let g = 0;
  let v = 0;
  let star = -1; // position of the last "*" in glob, or -1
  let resume = 0; // where in value that star's run ends
  while (v < value.length) {
    const ch = glob[g];
    if (ch === '*') {
      star = g++;
      resume = v;
    } else if (ch !== undefined && (ch === '?' || ch === value[v])) {
      g++;
      v++;
    } else if (star >= 0) {
      g = star + 1;
      v = ++resume;
    } else {
      return false;
    }
  }
  while (glob[g] === '*') g++;
  return g === glob.length;
}

export const ALL_NAMESPACES = '_all';

export function patternsMatch(patterns: readonly string[] | undefined, value: string): boolean {
  if (!patterns || patterns.length === 0) return false;
  let included = false;
  let hasInclusion = false;
  let hasExclusion = false;
  for (const pattern of patterns) {
    if (pattern.startsWith('!')) {
      hasExclusion = true;
      if (globMatches(pattern.slice(1), value)) return false;
    } else {
      hasInclusion = true;
      if (!included && globMatches(pattern, value)) included = true;
    }
  }
  if (value === ALL_NAMESPACES && hasExclusion) return false;
  return hasInclusion ? included : true;
}
