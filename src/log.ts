// pino logging with redaction: tokens, passwords, cookies and kubeconfigs never reach a log line.
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

export function createLogger(
  level: string,
  options: Partial<LoggerOptions> = {},
  destination?: DestinationStream,
): Logger {
  const opts: LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    ...options,
  };
  // Standard output is written asynchronously: under load the lines written while one write is in
  // flight go out together (one write per batch, not per request line); pino flushes on exit.
  return pino(opts, destination ?? pino.destination({ dest: 1, sync: false }));
}

export type { Logger };
