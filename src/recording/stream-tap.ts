// Reads, without touching it, the stream of a `kubectl exec`, `attach` or `debug` that the proxy
// splices through (proxy/session.ts): WebSocket frames of Kubernetes' channel protocol
// (`v5.channel.k8s.io` and the older `v4`, `channel.k8s.io` and their `base64.` forms), the one
// kubectl speaks since 1.30. The frames are parsed by ws's own Receiver (a maintained parser,
// masked frames from the client, unmasked from the cluster), fed copies of the bytes as they pass;
// each message's first byte names its channel: 0 stdin, 1 stdout, 2 stderr, 3 the error channel
// (a Status with the exit code when the command ends), 4 resize (`{"Width","Height"}`), 255 close.
// The tap never holds the session up: parsing is synchronous on bytes already passed on, and a
// stream it cannot parse (SPDY, compression, a broken frame) stops the tap, not the session.
import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';

interface ReceiverOptions {
  isServer: boolean;
  maxPayload: number;
  skipUTF8Validation: boolean;
}
type ReceiverClass = new (options: ReceiverOptions) => Writable;
// ws exports its frame parser, Receiver, without a type (@types/ws leaves it out).
const { Receiver } = createRequire(import.meta.url)('ws') as { Receiver: ReceiverClass };

/**
 * The largest message the tap parses: the API server's own limit (32 MiB, its WebSocket library's
 * default); kubectl's messages are at most 32 KiB. A larger one stops the tap.
 */
const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

/** What the tap hands to a recorder (recorder.ts). */
export interface ChannelSink {
  inputBytes(bytes: Buffer): void;
  outputBytes(stream: string, bytes: Buffer): void;
  resize(cols: number, rows: number): void;
  /** The command ended: its exit code (from the error channel's Status). */
  exited(code: number): void;
  /** The tap gave up (why): the rest of the session is not recorded. */
  unreadable(why: string): void;
}

/**
 * Whether a 101 answer's protocol is one the tap reads: `websocket` and `v5.channel.k8s.io`,
 * `v4.channel.k8s.io`, `channel.k8s.io`, or the base64 forms (`v4.base64.channel.k8s.io`,
 * `base64.channel.k8s.io`).
 */
export function tappable(protocol: string): boolean {
  return /^websocket (v[1-5]\.)?(base64\.)?channel\.k8s\.io$/i.test(protocol);
}

/** The exit code in an error-channel Status: 0 for Success, the ExitCode cause for a failure. */
export function exitCodeOf(status: string): number | undefined {
  try {
    const parsed = JSON.parse(status) as {
      status?: string;
      details?: { causes?: Array<{ reason?: string; message?: string }> };
    };
    if (parsed.status === 'Success') return 0;
    const cause = parsed.details?.causes?.find((c) => c.reason === 'ExitCode');
    const code = /^\d+$/.test(cause?.message ?? '') ? Number(cause!.message) : NaN;
    return Number.isInteger(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

export class ChannelStreamTap {
  private readonly fromClient: Writable;
  private readonly fromCluster: Writable;
  private stopped = false;
  /** The parsers that read a close frame: what follows it on that side is not read. */
  private readonly concluded = new Set<Writable>();
  private readonly base64: boolean;

  constructor(
    protocol: string,
    private readonly sink: ChannelSink,
  ) {
    this.base64 = /base64\./i.test(protocol);
    const parser = (isServer: boolean, onMessage: (payload: Buffer) => void): Writable => {
      const receiver = new Receiver({ isServer, maxPayload: MAX_MESSAGE_BYTES, skipUTF8Validation: true });
      receiver.on('message', (data: Buffer) => {
        if (this.stopped) return;
        // Nothing the recorder does may throw into the socket's data handler (the session's path).
        try {
          onMessage(data);
        } catch (err) {
          this.stop(`the recorder failed: ${(err as Error).message}`);
        }
      });
      receiver.on('error', (err: Error) => this.stop(`unreadable frames: ${err.message}`));
      // A close frame ends that side: whatever follows it is not read (and is no failure).
      receiver.on('conclude', () => this.concluded.add(receiver));
      return receiver;
    };
    this.fromClient = parser(true, (payload) => this.clientMessage(payload));
    this.fromCluster = parser(false, (payload) => this.clusterMessage(payload));
  }

  /**
   * Bytes the client sent (after the upgrade). A copy is parsed: the Receiver unmasks the
   * client's frames in place, and the bytes themselves go on to the cluster as they are.
   */
  client(bytes: Buffer): void {
    if (!this.stopped && !this.concluded.has(this.fromClient)) this.fromClient.write(Buffer.from(bytes));
  }

  /** Bytes the cluster sent (after its 101 head); a copy is parsed, as for the client's. */
  cluster(bytes: Buffer): void {
    if (!this.stopped && !this.concluded.has(this.fromCluster)) this.fromCluster.write(Buffer.from(bytes));
  }

  private stop(why: string): void {
    if (this.stopped) return;
    this.stopped = true;
    this.sink.unreadable(why);
  }

  /** A message's channel and payload (binary: first byte; base64: first character, then base64). */
  private split(message: Buffer): { channel: number; data: Buffer } | undefined {
    if (message.length === 0) return undefined;
    if (!this.base64) return { channel: message[0], data: message.subarray(1) };
    const channel = message[0] - 0x30;
    return { channel, data: Buffer.from(message.subarray(1).toString('latin1'), 'base64') };
  }

  private clientMessage(message: Buffer): void {
    const frame = this.split(message);
    if (!frame) return;
    if (frame.channel === 0 && frame.data.length > 0) this.sink.inputBytes(frame.data);
    else if (frame.channel === 4) {
      try {
        const size = JSON.parse(frame.data.toString('utf8')) as { Width?: unknown; Height?: unknown };
        if (Number.isInteger(size.Width) && Number.isInteger(size.Height))
          this.sink.resize(size.Width as number, size.Height as number);
      } catch {
        // not a size: ignored
      }
    }
  }

  private clusterMessage(message: Buffer): void {
    const frame = this.split(message);
    if (!frame || frame.data.length === 0) return;
    if (frame.channel === 1) this.sink.outputBytes('stdout', frame.data);
    else if (frame.channel === 2) this.sink.outputBytes('stderr', frame.data);
    else if (frame.channel === 3) {
      const code = exitCodeOf(frame.data.toString('utf8'));
      if (code !== undefined) this.sink.exited(code);
    }
  }
}
