// How many of something each key holds at once (a user's open kubectl consoles, a user's and a
// replica's Helm runs): `hold` counts one more and returns the function that gives it back
// (calling it again does nothing); keys at zero are removed, so the map holds only what is open.
export class HeldCounts {
  private readonly counts = new Map<string, number>();

  /** How many `key` holds now. */
  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /** Counts one more for `key`; the release function. */
  hold(key: string): () => void {
    this.counts.set(key, this.count(key) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.count(key) - 1;
      if (left > 0) this.counts.set(key, left);
      else this.counts.delete(key);
    };
  }
}
