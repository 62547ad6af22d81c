// The logger: redaction on every line but the fixed-field one (the request line), which shares the
// destination, level and bindings.
import t from 'tap';
import { createLogger, fixedFieldLogger } from '../../src/log.js';

t.test('fixedFieldLogger writes beside the redacting logger, without the redaction pass', async (t) => {
  const lines: string[] = [];
  const log = createLogger('info', {}, { write: (line: string) => void lines.push(line) }).child({ replica: 'r1' });
  log.info({ token: 'secret-token', headers: { authorization: 'Bearer x' } }, 'redacted');
  const lines2 = fixedFieldLogger(log);
  t.equal(fixedFieldLogger(log), lines2, 'one sibling per logger');
  lines2.info({ reqId: 'abc', method: 'GET', status: 200 }, 'request');
  lines2.debug({ reqId: 'abc' }, 'below the level');
  t.equal(lines.length, 2, 'both lines reached the one destination; the debug line did not');
  const [first, second] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.equal(first.token, '[redacted]', 'the ordinary logger still redacts');
  t.same(first.headers, { authorization: '[redacted]' });
  t.match(second, { reqId: 'abc', method: 'GET', status: 200, replica: 'r1', level: 'info', msg: 'request' });
  t.match(second.time, /^\d{4}-\d{2}-\d{2}T/, 'the same ISO time format');
});
