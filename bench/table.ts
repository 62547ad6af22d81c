// The benchmark's output: one comparison table (each row against the direct path) and one table of
// single figures (scale, resources), as Markdown so docs/benchmarks.md can take it as is.
import type { LoadResult } from './load.js';

export interface ComparisonRow {
  row: string;
  path: string;
  result: LoadResult;
  /** requests (or events) per second of the direct path in the same row. */
  directPerSecond: number;
  /** The kubectl proxy path's result in the same row, when the row has one. */
  kubectlProxy?: LoadResult;
  /** The unit of the per-second column: "req/s" or "events/s". */
  unit: string;
}

export interface Figure {
  what: string;
  value: string;
}

function fixed(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

function mib(bytes: number): string {
  return bytes > 0 ? `${fixed(bytes / 1024 / 1024)} MiB/s` : '';
}

function markdown(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export function comparisonTable(rows: ComparisonRow[]): string {
  return markdown(
    [
      'row',
      'path',
      'per second',
      'p50 ms',
      'p99 ms',
      'ratio to direct',
      'ratio to kubectl proxy',
      'proxy CPU µs/req',
      'CPU ratio to kubectl proxy',
      'bytes/s',
      'failures',
    ],
    rows.map((r) => {
      const cpu = r.result.cpuMicrosPerRequest;
      const proxyCpu = r.kubectlProxy?.cpuMicrosPerRequest;
      return [
        r.row,
        r.path,
        `${fixed(r.result.requestsPerSecond, 0)} ${r.unit}`,
        fixed(r.result.p50Ms),
        fixed(r.result.p99Ms),
        fixed(r.result.requestsPerSecond / r.directPerSecond, 2),
        r.kubectlProxy ? fixed(r.result.requestsPerSecond / r.kubectlProxy.requestsPerSecond, 2) : '',
        cpu !== undefined ? `${fixed(cpu, 0)} (sys ${fixed(r.result.systemCpuMicrosPerRequest ?? 0, 0)})` : '',
        cpu !== undefined && proxyCpu ? fixed(cpu / proxyCpu, 2) : '',
        mib(r.result.bytesPerSecond),
        String(r.result.failures),
      ];
    }),
  );
}

export function figureTable(figures: Figure[]): string {
  return markdown(
    ['figure', 'value'],
    figures.map((f) => [f.what, f.value]),
  );
}
