// The one polling helper of the tests: ask again, every everyMs, until check() has an answer or
// timeoutMs have passed. Used wherever a test waits for something another writer causes (a
// watch-backed cache, the leader, kubectl, a control plane that comes and goes).
//
// An answer is any truthy value: undefined, null and false mean "not yet" (and so do 0, '' and
// NaN, which no caller returns as a result). Return `true` or the object you wait for.

/** Polls check() until it returns a truthy value and returns that; throws after timeoutMs. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
