// Lines of a byte stream as they arrive: a container's log, a watch's newline-delimited JSON
// events. Each chunk is split the moment it comes in, so a line goes out as soon as its newline
// does (nothing waits for a buffer to fill). A line longer than `maxLineBytes` is cut into pieces
// of that size: a container printing megabytes without a newline cannot make the gateway hold
// them. "\r\n" counts as one line end.
import { StringDecoder } from 'node:string_decoder';

/** Yields the stream's lines (without their "\n"), the last one even without a final newline. */
export async function* streamLines(
  stream: AsyncIterable<Buffer | string>,
  maxLineBytes: number,
): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  for await (const chunk of stream) {
    pending += typeof chunk === 'string' ? chunk : decoder.write(chunk);
    let newline = pending.indexOf('\n');
    while (newline >= 0) {
      yield withoutCarriageReturn(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
      newline = pending.indexOf('\n');
    }
    // UTF-16 units, not bytes: each is at most 3 bytes of UTF-8, so memory stays bounded too.
    while (pending.length > maxLineBytes) {
      yield pending.slice(0, maxLineBytes);
      pending = pending.slice(maxLineBytes);
    }
  }
  pending += decoder.end();
  if (pending !== '') yield withoutCarriageReturn(pending);
}

function withoutCarriageReturn(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}
