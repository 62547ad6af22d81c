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
  '*.key',
  '*.keyHash',
  '*.config',
  '*.kubeconfig',
  '*.stringData',
  'password',
  'token',
  'config',
  'kubeconfig',
];

export function createLogger(level: string, options: Partial<LoggerOptions> = {}, destination?: DestinationStream): Logger {
  const opts: LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    ...options,
  };
  return destination ? pino(opts, destination) : pino(opts);
}

export type { Logger };
