// The text writer of the describers: what kubectl's describe package writes with its PrefixWriter
// over a text/tabwriter (minwidth 0, tabwidth 8, padding 2, pad with spaces, no flags), so that
// kiteline's text matches `kubectl describe` byte for byte.
//
// Rules kept from kubectl: write(level, text) puts two spaces per level in front of the text (of the
// first line only: later lines of one write carry their own spaces, as kubectl's format strings do);
// ESC and CR are escaped as kubectl's terminal escaper does; a tab ends a cell, and cells of the same
// column in consecutive lines that all have that column are padded to the widest plus two (Go's
// tabwriter); flush() formats what was written so far on its own (kubectl flushes before the events).

/** Two spaces per level, as kubectl's LEVEL_0 .. LEVEL_4. */
const LEVEL_SPACE = '  ';
/** Go's tabwriter padding (kubectl: tabwriter.Init(buf, 0, 8, 2, ' ', 0)). */
const PADDING = 2;

/** kubectl's terminal escaper (CVE-2021-25743): ESC as "^[", CR as "\r". */
export function escapeTerminal(text: string): string {
  return text.replace(/\x1b/g, '^[').replace(/\r/g, '\\r');
}

export class DescribeWriter {
  private readonly done: string[] = [];
  private pending = '';

  /** Text at an indentation level (kubectl's PrefixWriter.Write). */
  write(level: number, text: string): void {
    this.pending += escapeTerminal(LEVEL_SPACE.repeat(level) + text);
  }

  /** Text and a newline (kubectl's WriteLine). */
  line(text: string): void {
    this.pending += escapeTerminal(`${text}\n`);
  }

  /** Formats what was written so far as one table block (Go's tabwriter Flush). */
  flush(): void {
    if (this.pending) this.done.push(formatColumns(this.pending));
    this.pending = '';
  }

  toString(): string {
    this.flush();
    return this.done.join('');
  }
}

/** A writer whose levels start deeper (kubectl's NewNestedPrefixWriter). */
export class NestedWriter extends DescribeWriter {
  constructor(
    private readonly inner: DescribeWriter,
    private readonly indent: number,
  ) {
    super();
  }

  override write(level: number, text: string): void {
    this.inner.write(level + this.indent, text);
  }

  override line(text: string): void {
    this.inner.write(this.indent, `${text}\n`);
  }

  override flush(): void {
    this.inner.flush();
  }
}

/** Builds a text with a writer and returns it formatted (kubectl's tabbedString). */
export function tabbed(build: (w: DescribeWriter) => void): string {
  const w = new DescribeWriter();
  build(w);
  return w.toString();
}

/** Cell width as Go's tabwriter counts it: in runes (code points). */
function width(cell: string): number {
  let n = 0;
  for (const _ of cell) n++;
  return n;
}

/**
 * Go's text/tabwriter over a complete text: lines are split into tab-terminated cells (the text
 * after a line's last tab is not a cell of any column); a column block is a run of consecutive
 * lines that have a cell in that column, and every cell of the block is padded to the block's
 * widest cell plus PADDING. Blocks nest: columns to the right are formatted within the block.
 */
export function formatColumns(text: string): string {
  const lines = text.split('\n').map((line) => line.split('\t'));
  const out: string[] = [];
  const widths: number[] = [];

  const writeLines = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const cells = lines[i];
      cells.forEach((cell, j) => {
        out.push(cell);
        if (j < widths.length) out.push(' '.repeat(Math.max(0, widths[j] - width(cell))));
      });
      if (i + 1 < lines.length) out.push('\n');
    }
  };

  const format = (line0: number, line1: number) => {
    const column = widths.length;
    for (let i = line0; i < line1; i++) {
      if (column >= lines[i].length - 1) continue;
      writeLines(line0, i);
      line0 = i;
      let blockWidth = 0;
      for (; i < line1; i++) {
        const cells = lines[i];
        if (column >= cells.length - 1) break;
        blockWidth = Math.max(blockWidth, width(cells[column]) + PADDING);
      }
      widths.push(blockWidth);
      format(line0, i);
      widths.pop();
      line0 = i;
    }
    writeLines(line0, line1);
  };

  format(0, lines.length);
  return out.join('');
}
