// pino logging with redaction: tokens, passwords, cookies and kubeconfigs never reach a log line.
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/** Paths pino replaces with "[redacted]" wherever they appear in a logged object. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  '*.password',
  '*.passwordHash',
  '*.token',
  '*.clientSecret',
  '*.client_secret',
  '*.key',
  '*.keyHash',
  '*.config',
  '*.kubeconfig',
  '*.stringData',
  'password',
  'token',
  'config',
  'kubeconfig',
  // Audit lines never carry bodies; should one ever slip in, these parts stay out of the log.
  'audit.body',
  'audit.object',
  'audit.data',
  'audit.stringData',
  'audit.annotations',
  '*.annotations["kubectl.kubernetes.io/last-applied-configuration"]',
];

/** Standard output's batching: a write once this much is waiting, or after this long. */
const LOG_BATCH_BYTES = 4096;
const LOG_FLUSH_MS = 200;

const LINE_FORMAT: LoggerOptions = {
  timestamp: pino.stdTimeFunctions.isoTime,
  formatters: { level: (label) => ({ level: label }) },
};

export function createLogger(
  level: string,
  options: Partial<LoggerOptions> = {},
  destination?: DestinationStream,
): Logger {
  const opts: LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    ...LINE_FORMAT,
    ...options,
  };
  // Standard output is written asynchronously and in batches: lines gather until 4 KiB are there
  // or 200 ms have passed, so a busy gateway makes one write per few dozen request lines instead
  // of one each (a write costs a system call and a thread-pool round trip). pino flushes on exit.
  return pino(
    opts,
    destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS }),
  );
}

const fixedFieldLoggers = new WeakMap<Logger, Logger>();

/**
 * A logger beside `log` (same destination, level, bindings and line format) without the redaction
 * pass, for lines whose fields are all fixed by the caller and none of which can hold a secret: the
 * one line per request (method, route, path, status, duration, user, cluster). Redaction walks
 * every logged object for the wildcard paths above, which is the larger part of what writing that
 * line costs; every other line keeps it.
 */
export function fixedFieldLogger(log: Logger): Logger {
  let sibling = fixedFieldLoggers.get(log);
  if (!sibling) {
    const stream = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
    sibling = pino({ level: log.level, ...LINE_FORMAT }, stream).child(log.bindings());
    fixedFieldLoggers.set(log, sibling);
  }
  return sibling;
}

export type { Logger };

/** A client's X-Request-Id is kept when it is short and plain (it goes into every log line). */
const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** The id of a request: the client's X-Request-Id when it is acceptable, else a fresh UUID. */
export function requestIdOf(headers: IncomingHttpHeaders): string {
  const given = headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
