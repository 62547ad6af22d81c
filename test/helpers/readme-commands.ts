// The shell commands of one README section, as a reader would type them, each with the output the
// README shows for it. A command is as many lines as bash needs to parse it complete (continued
// lines, multi-line quotes); what it shows is a comment at the end of its last line
// (`curl ... # [...]`), or the comment lines right below it (`#   {"message": ...}`, a table),
// except step headings (`# 3. Import ...`).
import { spawnSync } from 'node:child_process';

export interface DocCommand {
  /** The command's text, lines joined as written. */
  text: string;
  /** The output the README shows (comment text, one entry per line), if any. */
  shown: string[];
}

/** The fenced `sh` blocks between the heading `## <title>` and the next `## ` heading. */
export function sectionShellBlocks(markdown: string, title: string): string[] {
  const start = markdown.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`README has no section "## ${title}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
}

/** True when bash parses the text as complete commands (no open quote, no trailing backslash). */
function complete(text: string): boolean {
  if (/\\\s*$/.test(text)) return false;
  return spawnSync('bash', ['-n'], { input: text }).status === 0;
}

const STEP_HEADING = /^#\s*\d+\.\s/;
/** A comment at the end of a command's last line: whitespace, `#`, a space, the text. */
const TRAILING_COMMENT = /\s#\s+(.*)$/;

/** Splits a shell block into commands with what the README shows for each. */
export function commandsOf(block: string): DocCommand[] {
  const commands: DocCommand[] = [];
  let pending: string[] = [];
  /** The command whose shown output the next comment lines continue, until a blank line. */
  let showing: DocCommand | undefined;
  for (const line of block.split('\n')) {
    const trimmed = line.trim();
    if (pending.length === 0) {
      if (trimmed === '') {
        showing = undefined;
        continue;
      }
      if (trimmed.startsWith('#')) {
        if (showing && !STEP_HEADING.test(trimmed)) showing.shown.push(trimmed.replace(/^#\s*/, ''));
        else showing = undefined;
        continue;
      }
    }
    pending.push(line);
    const text = pending.join('\n');
    if (!complete(text)) continue;
    const trailing = TRAILING_COMMENT.exec(line);
    const command: DocCommand = { text, shown: trailing ? [trailing[1].trim()] : [] };
    commands.push(command);
    showing = trailing ? undefined : command;
    pending = [];
  }
  if (pending.length > 0) throw new Error(`an incomplete command at the end of a block: ${pending.join('\n')}`);
  return commands;
}
