// A bounded wait: what a promise settles with, or undefined once the time is up (the promise itself
// goes on). Used where an answer may wait for a cluster's first probe but must not hang on it.

/** Resolves with the promise's value, or undefined after `ms` milliseconds; rejects as it rejects. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeUp]);
  } finally {
    clearTimeout(timer);
  }
}
