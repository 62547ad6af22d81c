// The recording of one session, on the replica that carries it. The session hands it what passes
// (output, input, resizes) and never waits: events are serialized into memory at once, and written
// as one SessionChunk per flush (the service flushes every interval, and a recorder flushes as
// soon as it holds a chunk's worth), one write at a time, in order, then the recording's progress
// is patched. So a replica killed mid-session loses at most what came since the last flush.
//
// Bounds: a session records at most `maxSessionBytes` of event lines (then a marker, `truncated`,
// and nothing more); at most MAX_PENDING_BYTES wait in memory while the host is slow (more is
// dropped, counted, and marked in the cast where it happened). A write that fails is retried with
// the next flush; in `required` mode a failure ends the session instead (onFailure).
import { StringDecoder } from 'node:string_decoder';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { castEvent, TypedLines, type CastCode } from './asciicast.js';
import { apiStatus } from '../host/host-errors.js';
import { CHUNK_EVENT_BYTES, noProgress, type RecordingProgress, type RecordingStore } from './store.js';

const gzipAsync = promisify(gzip);

/** Event lines waiting for the host at most; beyond, events are dropped (counted). */
export const MAX_PENDING_BYTES = 4 * 1024 * 1024;
/** Characters of one event at most (longer data becomes several events). */
export const MAX_EVENT_CHARS = 16 * 1024;
/** A live session's progress is written at least this often, events or not (its `updated`: prune skips it). */
export const HEARTBEAT_MS = 60_000;
/** Typed commands kept per session, for the search. */
export const MAX_TYPED_CHARS = 64 * 1024;

/** What a recorder reports to its service: a failed write, bytes it could not keep. */
export interface RecorderEvents {
  failed(err: unknown, recording: string): void;
  dropped(bytes: number): void;
}

export class SessionRecorder {
  private readonly startedAt = Date.now();
  private pending: string[] = [];
  private pendingBytes = 0;
  private readonly typed = new TypedLines(MAX_TYPED_CHARS);
  private readonly decoders = new Map<string, StringDecoder>();
  private seq = 0;
  /** The chunk being written: a retry writes exactly it again (its name fixed by seq). */
  private inFlight: { lines: string[]; bytes: number; data: string } | undefined;
  /** The typed lines as last written (the progress carries them only when they changed). */
  private writtenInput = '';
  /** When the progress was last written. */
  lastWrite = Date.now();
  private writing: Promise<void> = Promise.resolve();
  private queued: Promise<void> | undefined;
  private dropping = 0;
  private closed = false;
  /** Set once a write failed in `required` mode: the session is to end. */
  private failureHandler: ((err: unknown) => void) | undefined;
  readonly progress: RecordingProgress;

  constructor(
    readonly name: string,
    /** The recording object's uid (owner of the chunks), once created. */
    private readonly created: Promise<string | undefined>,
    private readonly store: RecordingStore,
    private readonly maxSessionBytes: number,
    private readonly events: RecorderEvents,
  ) {
    this.progress = noProgress();
  }

  /** In `required` mode: called once when the recording cannot go on (the session is ended). */
  onFailure(handler: (err: unknown) => void): void {
    this.failureHandler = handler;
  }

  /** Output of the session (text, as the terminal shows it). */
  output(text: string): void {
    this.add('o', text);
  }

  /** What the user typed. */
  input(text: string): void {
    if (this.closed || this.progress.truncated) return;
    this.typed.feed(text);
    this.add('i', text);
  }

  /** Output bytes of a stream (stdout, stderr), decoded as UTF-8 without splitting a character. */
  outputBytes(stream: string, bytes: Buffer): void {
    this.output(this.decoder(stream).write(bytes));
  }

  /** Input bytes, decoded as UTF-8. */
  inputBytes(bytes: Buffer): void {
    this.input(this.decoder('stdin').write(bytes));
  }

  private decoder(stream: string): StringDecoder {
    let decoder = this.decoders.get(stream);
    if (!decoder) this.decoders.set(stream, (decoder = new StringDecoder('utf8')));
    return decoder;
  }

  resize(cols: number, rows: number): void {
    if (cols <= 0 || rows <= 0) return;
    // The first size is the cast header's.
    if (this.progress.width === undefined) Object.assign(this.progress, { width: cols, height: rows });
    this.add('r', `${cols}x${rows}`);
  }

  /** The stream protocol of a proxied session, once the cluster's answer named it. */
  protocol(protocol: string): void {
    this.progress.protocol = protocol;
  }

  /** A note in the cast (asciicast marker). */
  mark(text: string): void {
    this.add('m', text, true);
  }

  private add(code: CastCode, data: string, note = false): void {
    if (this.closed || data === '' || this.progress.truncated) return;
    // A long message (a paste, an upload, a burst of output) becomes events of at most
    // MAX_EVENT_CHARS, so that every event fits a chunk whatever its content compresses to.
    if (data.length > MAX_EVENT_CHARS) {
      let at = 0;
      while (at < data.length) {
        let end = Math.min(at + MAX_EVENT_CHARS, data.length);
        const last = data.charCodeAt(end - 1);
        if (last >= 0xd800 && last <= 0xdbff && end < data.length) end += 1; // never split a surrogate pair
        this.add(code, data.slice(at, end), note);
        at = end;
      }
      return;
    }
    const line = castEvent((Date.now() - this.startedAt) / 1000, code, data);
    const size = Buffer.byteLength(line);
    if (!note && this.progress.bytes + size > this.maxSessionBytes) {
      this.progress.truncated = true;
      this.pushLine(castEvent((Date.now() - this.startedAt) / 1000, 'm', 'kiteline: recording limit reached'));
      return;
    }
    if (this.pendingBytes + size > MAX_PENDING_BYTES) {
      this.dropping += size;
      this.fail(new Error('the host cluster is not taking the recording fast enough'));
      return;
    }
    if (this.dropping > 0) {
      this.noteDropped();
    }
    this.pushLine(line);
    if (this.pendingBytes >= CHUNK_EVENT_BYTES) void this.flush();
  }

  private noteDropped(): void {
    const dropped = this.dropping;
    this.dropping = 0;
    this.progress.droppedBytes = (this.progress.droppedBytes ?? 0) + dropped;
    this.events.dropped(dropped);
    this.pushLine(
      castEvent((Date.now() - this.startedAt) / 1000, 'm', `kiteline: ${dropped} bytes not recorded (host slow)`),
    );
  }

  private pushLine(line: string): void {
    const size = Buffer.byteLength(line);
    this.pending.push(line);
    this.pendingBytes += size;
    this.progress.events += 1;
    this.progress.bytes += size;
  }

  /** Whether there is anything to write. */
  get dirty(): boolean {
    return this.pending.length > 0 || this.dropping > 0;
  }

  /**
   * Writes what is pending as chunks, then the progress: one flush at a time, at most one more
   * waiting (it takes whatever is pending when its turn comes).
   */
  flush(): Promise<void> {
    if (this.queued) return this.queued;
    const run = this.writing.then(() => {
      this.queued = undefined;
      return this.write();
    });
    this.queued = run;
    this.writing = run;
    return run;
  }

  private async write(): Promise<void> {
    const uid = await this.created;
    if (uid === undefined) {
      // The recording never started (logged and counted by the service): nothing is kept.
      this.closed = true;
      this.pending = [];
      this.pendingBytes = 0;
      return;
    }
    if (this.dropping > 0) this.noteDropped();
    try {
      while (this.pending.length > 0) {
        const taken = this.inFlight ?? (this.inFlight = await this.takeChunk());
        try {
          await this.store.writeChunk(this.name, uid, this.seq, taken.lines.length, taken.bytes, taken.data);
          this.progress.chunks += 1;
          this.progress.storedBytes += taken.data.length;
        } catch (err) {
          // The host refused this chunk for what it is (4xx other than a conflict or throttling):
          // writing it again would fail again, so it is dropped, counted, and the rest goes on.
          if (!permanent(err)) throw err;
          this.events.failed(err, this.name);
          this.dropping += taken.bytes;
        }
        this.seq += 1;
        this.inFlight = undefined;
        this.pending.splice(0, taken.lines.length);
        this.pendingBytes -= taken.bytes;
        if (this.dropping > 0) this.noteDropped();
      }
      // The typed lines only when they changed (up to 64 KiB: not rewritten at every flush).
      const typed = this.typed.text;
      this.progress.updated = new Date().toISOString();
      await this.store.progress(
        this.name,
        typed === this.writtenInput ? this.progress : { ...this.progress, input: typed },
      );
      this.writtenInput = typed;
      this.lastWrite = Date.now();
    } catch (err) {
      this.events.failed(err, this.name);
      this.fail(err);
    }
  }

  /** Tells the session (in `required` mode, once) that its recording cannot go on. */
  private fail(err: unknown): void {
    const handler = this.failureHandler;
    this.failureHandler = undefined;
    handler?.(err);
  }

  /** The first lines pending, up to a chunk's bytes, compressed (they leave `pending` once written). */
  private async takeChunk(): Promise<{ lines: string[]; bytes: number; data: string }> {
    const lines: string[] = [];
    let bytes = 0;
    for (const line of this.pending) {
      const size = Buffer.byteLength(line);
      if (lines.length > 0 && bytes + size > CHUNK_EVENT_BYTES) break;
      lines.push(line);
      bytes += size;
    }
    return { lines, bytes, data: (await gzipAsync(lines.join(''))).toString('base64') };
  }

  /** Stops recording without writing anything more; resolves to the recording's uid, if it was created. */
  async discard(): Promise<string | undefined> {
    this.closed = true;
    this.pending = [];
    this.pendingBytes = 0;
    this.failureHandler = undefined;
    await this.writing;
    return this.created;
  }

  /** Ends the recording: the last events, then the end, exit code and result. Never throws. */
  async end(outcome: { exitCode?: number; result: 'success' | 'failure' }): Promise<void> {
    if (this.closed) return;
    for (const [stream, decoder] of this.decoders) {
      const rest = decoder.end();
      if (rest !== '') this.add(stream === 'stdin' ? 'i' : 'o', rest);
    }
    this.closed = true;
    this.progress.end = new Date().toISOString();
    this.progress.result = outcome.result;
    if (outcome.exitCode !== undefined) this.progress.exitCode = outcome.exitCode;
    this.failureHandler = undefined;
    this.writing = this.writing.then(() => this.write());
    await this.writing;
  }
}

/** A refusal that a retry would meet again: a 4xx other than 408 (timeout), 409 (conflict) and 429. */
function permanent(err: unknown): boolean {
  const status = apiStatus(err);
  return status !== undefined && status >= 400 && status < 500 && ![408, 409, 429].includes(status);
}
