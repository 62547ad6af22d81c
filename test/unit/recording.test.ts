// Pure logic of session recording (src/recording/): asciicast v2 lines, the typed commands rebuilt
// from keystrokes, output as plain text, the exit code of an error-channel Status, and the tap that
// reads Kubernetes' WebSocket channel protocol from bytes as they pass (frames made by ws's own
// Sender, masked from the client, split anywhere).
import { createRequire } from 'node:module';
import t from 'tap';
import {
  castEvent,
  castHeader,
  MAX_TYPED_LINE,
  parseCastEvents,
  plainText,
  TypedLines,
} from '../../src/recording/asciicast.js';
import { RECORDING_OBJECT_BYTES, recordingsToPrune } from '../../src/recording/recordings.js';
import type { RecordingResource } from '../../src/recording/store.js';
import { ChannelStreamTap, exitCodeOf, tappable } from '../../src/recording/stream-tap.js';

const { Sender } = createRequire(import.meta.url)('ws') as {
  Sender: { frame(data: Buffer, options: object): Buffer[] };
};

/** One binary WebSocket frame (masked as a client sends it, or not as a server does). */
function frame(payload: Buffer, masked: boolean): Buffer {
  return Buffer.concat(
    Sender.frame(payload, { fin: true, opcode: 2, mask: masked, readOnly: false, rsv1: false }).map((b) =>
      Buffer.from(b),
    ),
  );
}
const channel = (n: number, data: string | Buffer) =>
  Buffer.concat([Buffer.from([n]), typeof data === 'string' ? Buffer.from(data) : data]);

t.test('asciicast v2: a header and events that parse back in order', async (t) => {
  const header = JSON.parse(
    castHeader({ width: 120, height: 40, start: '2026-11-27T10:00:00Z', command: 'sh', title: 'x' }),
  );
  t.match(header, { version: 2, width: 120, height: 40, timestamp: 1795773600, command: 'sh' });
  const text = castEvent(0.5, 'o', 'hé\u001b[1m"\n') + castEvent(1.25, 'i', 'ls\r') + castEvent(2, 'r', '80x24');
  t.same(parseCastEvents(text + '[3.0,"o","cut by a cra'), [
    [0.5, 'o', 'hé\u001b[1m"\n'],
    [1.25, 'i', 'ls\r'],
    [2, 'r', '80x24'],
  ]);
});

t.test('typed lines: editing keys applied, escapes ignored, capped', async (t) => {
  const typed = new TypedLines(1000);
  typed.feed('lx\x7fs -l\r');
  typed.feed('rm -rf /tmp/x\x1b[D\x1b[C\r');
  typed.feed('oops\x15echo ok\n');
  typed.feed('sleep 100\x03');
  typed.feed('half');
  t.equal(typed.text, 'ls -l\nrm -rf /tmp/x\necho ok\n', 'the line being typed is not in yet');
  const long = new TypedLines(100_000);
  long.feed('x'.repeat(1_000_000) + '\x7f'.repeat(10) + '\r');
  t.equal(long.text.length, MAX_TYPED_LINE - 10 + 1, 'a line being typed is kept up to its limit');
  const emoji = new TypedLines(100);
  emoji.feed('a😀\x7f\r');
  t.equal(emoji.text, 'a\n', 'backspace takes a whole character');
  const small = new TypedLines(10);
  small.feed('echo 1234567890\r');
  t.equal(small.text.length, 10);
  t.ok(small.truncated);
});

t.test('plain text: colours, cursor moves, titles and control characters removed', async (t) => {
  t.equal(plainText('\x1b[1;31mred\x1b[0m \x1b]0;title\x07done\r\n\x1b[2K'), 'red done\n');
});

t.test('exit codes from the error channel', async (t) => {
  t.equal(exitCodeOf('{"metadata":{},"status":"Success"}'), 0);
  t.equal(
    exitCodeOf(
      '{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}',
    ),
    3,
  );
  t.equal(exitCodeOf('{"status":"Failure","message":"container not found"}'), undefined);
  t.equal(exitCodeOf('not json'), undefined);
  t.equal(exitCodeOf('{"status":"Failure","details":{"causes":[{"reason":"ExitCode","message":""}]}}'), undefined);
});

t.test('the channel tap reads stdin, output, resizes and the exit code, in any split', async (t) => {
  t.ok(tappable('websocket v5.channel.k8s.io'));
  t.ok(tappable('websocket base64.channel.k8s.io'));
  t.ok(tappable('websocket v4.base64.channel.k8s.io'), "the kubelet's spelling of the base64 form");
  t.notOk(tappable('SPDY/3.1 v4.channel.k8s.io'), 'SPDY is not read');
  t.notOk(tappable('websocket portforward.k8s.io'));
  const seen: string[] = [];
  const tap = new ChannelStreamTap('websocket v5.channel.k8s.io', {
    inputBytes: (b) => seen.push(`in:${b.toString()}`),
    outputBytes: (s, b) => seen.push(`${s}:${b.toString()}`),
    resize: (c, r) => seen.push(`size:${c}x${r}`),
    exited: (code) => seen.push(`exit:${code}`),
    unreadable: (why) => seen.push(`unreadable:${why}`),
  });
  const fromClient = Buffer.concat([
    frame(channel(4, '{"Width":100,"Height":30}'), true),
    frame(channel(0, 'ls\r'), true),
  ]);
  const sent = Buffer.from(fromClient);
  // Split mid-frame, one byte at a time for the first part.
  for (const byte of fromClient.subarray(0, 10)) tap.client(Buffer.from([byte]));
  tap.client(fromClient.subarray(10));
  t.same(fromClient, sent, 'the bytes passing on are untouched (the parser unmasks a copy)');
  const big = Buffer.alloc(70_000, 'x');
  const fromCluster = Buffer.concat([
    frame(channel(1, 'file\r\n'), false),
    frame(channel(2, 'warning'), false),
    frame(channel(1, big), false),
    frame(channel(3, '{"status":"Failure","details":{"causes":[{"reason":"ExitCode","message":"2"}]}}'), false),
  ]);
  tap.cluster(fromCluster.subarray(0, 7));
  tap.cluster(fromCluster.subarray(7));
  t.same(seen.slice(0, 4), ['size:100x30', 'in:ls\r', 'stdout:file\r\n', 'stderr:warning']);
  t.equal(seen[4], `stdout:${big.toString()}`, 'a frame with a 64-bit length');
  t.equal(seen[5], 'exit:2');
  tap.client(Buffer.from([0xff, 0xff, 0xff]));
  await new Promise((resolve) => setImmediate(resolve)); // a Writable reports its error on the next tick
  t.match(seen[6], /^unreadable:/, 'garbage stops the tap');
  tap.cluster(frame(channel(1, 'after'), false));
  t.equal(seen.length, 7, 'nothing read after it stopped');
});

t.test('retention: past the age, then the oldest beyond the total size', async (t) => {
  const recording = (name: string, start: string, storedBytes: number, end?: string) =>
    ({
      metadata: { name },
      spec: { start, updated: start, storedBytes, ...(end ? { end } : {}) },
    }) as RecordingResource;
  const now = Date.parse('2026-11-27T12:00:00Z');
  const all = [
    recording('old', '2026-11-01T00:00:00Z', 10, '2026-11-01T01:00:00Z'),
    recording('a', '2026-11-27T09:00:00Z', 600),
    recording('b', '2026-11-27T10:00:00Z', 300, '2026-11-27T10:30:00Z'),
    recording('c', '2026-11-27T11:00:00Z', 300),
  ];
  const object = RECORDING_OBJECT_BYTES;
  t.same(recordingsToPrune(all, { maxAgeSeconds: 7 * 24 * 3600, maxTotalBytes: 100_000 }, now), ['old']);
  t.same(
    recordingsToPrune(all, { maxAgeSeconds: 7 * 24 * 3600, maxTotalBytes: 600 + 2 * object }, now),
    ['a', 'old'],
    'c and b fit (their chunks and objects); a passes the total, and everything older goes with it',
  );
  t.same(recordingsToPrune(all, { maxAgeSeconds: 3600 + 1, maxTotalBytes: 100_000 }, now), ['b', 'a', 'old']);
  const running = {
    metadata: { name: 'live' },
    spec: { start: '2026-11-01T00:00:00Z', updated: '2026-11-27T11:59:00Z', storedBytes: 10 ** 9 },
  } as RecordingResource;
  t.same(
    recordingsToPrune([running, ...all], { maxAgeSeconds: 7 * 24 * 3600, maxTotalBytes: 1000 }, now),
    ['c', 'b', 'a', 'old'],
    'a session still running (written a minute ago) stays, though it counts toward the total',
  );
});
