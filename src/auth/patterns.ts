// Anchored glob patterns of roles: "*" matches any run of characters, "?" one character,
// everything else itself (case-sensitive). "!x" excludes what x matches.
// A pattern list matches a value when no exclusion matches it and an inclusion does; a list of
// only exclusions means "everything except those"; an empty list matches NOTHING (Kite's empty
// lists matched everything). The value "_all" (all namespaces, or a cluster-scoped object) is
// matched only by a list without exclusions: a role that hides some namespaces cannot read
// across all of them.
const compiled = new Map<string, RegExp>(); // cache of compiled globs, bounded below

const COMPILED_MAX = 10_000;

export function globToRegExp(glob: string): RegExp {
  let re = compiled.get(glob);
  if (!re) {
    const source = glob
      .split('')
      .map((ch) => (ch === '*' ? '.*' : ch === '?' ? '.' : ch.replace(/[.+^${}()|[\]\\/-]/g, '\\$&')))
      .join('');
    re = new RegExp(`^${source}$`, 's');
    if (compiled.size >= COMPILED_MAX) compiled.clear();
    compiled.set(glob, re);
  }
  return re;
}

export function globMatches(glob: string, value: string): boolean {
  if (glob === '*') return true;
  if (!glob.includes('*') && !glob.includes('?')) return glob === value;
  return globToRegExp(glob).test(value);
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
