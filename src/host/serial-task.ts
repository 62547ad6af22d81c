// Runs an async job on demand, never two at once: a request while it runs schedules one more run.
// Used by the background reconcilers that react to cache events.
export class SerialTask {
  private running = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly job: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
    private readonly debounceMs = 20,
  ) {}

  request(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), this.debounceMs);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      await this.job();
    } catch (err) {
      this.onError(err);
    } finally {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.request();
      }
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
