// The one polling helper of the tests: ask again, every everyMs, until check() has an answer or
// timeoutMs have passed. Used wherever a test waits for something another writer causes (a
// watch-backed cache, the leader, kubectl, a control plane that comes and goes).
//
// An answer is any truthy value: undefined, null and false mean "not yet" (and so do 0, '' and
// NaN, which no caller returns as a result). Return `true` or the object you wait for.
//
// Every 200 ms by default: the suite runs two files at a time on a machine whose CPU it saturates,
// and a check is often a request through a gateway to an API server; a tighter loop only takes
// CPU from the other file. A wait that measures how fast something happens passes its own interval.

/** Polls check() until it returns a truthy value and returns that; throws after timeoutMs. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs = 30_000,
  everyMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
