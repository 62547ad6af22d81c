// The recording format, asciicast v2 (https://docs.asciinema.org/manual/asciicast/v2/): a header
// line, then one JSON array per event, `[seconds since start, code, data]`: `o` output, `i` input
// (what the user typed), `r` a resize ("COLSxROWS"), `m` a marker (kiteline's notes: output cut,
// bytes not recorded). Players (asciinema-player, `asciinema play`) replay output and resizes and
// skip input. Also here: the typed commands of a session rebuilt from its input, and output as
// plain text, which is what a search looks in.

export type CastCode = 'o' | 'i' | 'r' | 'm';

/** What the header says of a session. */
export interface CastHeaderFields {
  width: number;
  height: number;
  /** Start of the session (ISO 8601). */
  start: string;
  command: string;
  title: string;
}

/** The header line of a cast (asciicast v2), newline-terminated. */
export function castHeader(fields: CastHeaderFields): string {
  return (
    JSON.stringify({
      version: 2,
      width: fields.width,
      height: fields.height,
      timestamp: Math.floor(Date.parse(fields.start) / 1000),
      command: fields.command,
      title: fields.title,
      env: { TERM: 'xterm-256color' },
    }) + '\n'
  );
}

/** One event line, newline-terminated: time in seconds with microseconds. */
export function castEvent(seconds: number, code: CastCode, data: string): string {
  return `[${Math.max(0, seconds).toFixed(6)},${JSON.stringify(code)},${JSON.stringify(data)}]\n`;
}

/** The events of cast lines (a chunk's, or a whole file's after its header), in order; bad lines are skipped. */
export function parseCastEvents(text: string): Array<[number, CastCode, string]> {
  const events: Array<[number, CastCode, string]> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('[')) continue;
    try {
      const event = JSON.parse(line) as [number, CastCode, string];
      if (Array.isArray(event) && event.length === 3) events.push(event);
    } catch {
      // a line cut by a crash: skipped
    }
  }
  return events;
}

// CSI and OSC sequences, and the two-byte escapes; what is left of control characters goes after.
const ESCAPES = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
// Control characters other than tab and newline (carriage returns included: text, not a screen).
const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f]/g;

/** Terminal output as plain text: escape sequences and control characters removed. */
export function plainText(output: string): string {
  return output.replace(ESCAPES, '').replace(CONTROLS, '');
}

/** The longest line TypedLines keeps being typed; the rest of a longer one is not kept. */
export const MAX_TYPED_LINE = 4096;

/**
 * The lines a user typed, rebuilt from input as a line editor sees it: printable characters
 * appended, backspace and DEL take one back, ^U clears, ^C drops the line, Enter ends it, escape
 * sequences (arrows, function keys) ignored. What a shell's own editing made of the line (a
 * completion, a recalled command) is in the output, which a search reads too. Capped at `max`
 * characters, after which `truncated` is set and input is no longer read; a line being typed is
 * kept up to MAX_TYPED_LINE characters (input that is not typing, a `kubectl cp` upload, costs no
 * more than that).
 */
export class TypedLines {
  private line = '';
  private done = '';
  private escape = false;
  truncated = false;

  constructor(private readonly max: number) {}

  feed(input: string): void {
    if (this.truncated) return;
    for (const char of input) {
      if (this.escape) {
        // ESC [ ... final byte, or ESC and one character.
        if (char !== '[' && char !== 'O' && (char < '0' || char > '?')) this.escape = false;
        continue;
      }
      switch (char) {
        case '\x1b':
          this.escape = true;
          break;
        case '\r':
        case '\n':
          if (this.line.trim() !== '') this.append(this.line + '\n');
          this.line = '';
          break;
        case '\x7f':
        case '\b': {
          // One character back: two code units for a character outside the BMP.
          const last = this.line.charCodeAt(this.line.length - 1);
          this.line = this.line.slice(0, last >= 0xdc00 && last <= 0xdfff ? -2 : -1);
          break;
        }
        case '\x15':
        case '\x03':
          this.line = '';
          break;
        default:
          if ((char >= ' ' || char === '\t') && this.line.length < MAX_TYPED_LINE) this.line += char;
      }
    }
  }

  private append(text: string): void {
    if (this.truncated) return;
    const room = this.max - this.done.length;
    if (text.length > room) {
      this.done += text.slice(0, Math.max(0, room));
      this.truncated = true;
    } else this.done += text;
  }

  /** Every line typed so far, each ending in a newline (the one being typed not included). */
  get text(): string {
    return this.done;
  }
}
