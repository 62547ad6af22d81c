// Per-principal slots on one cluster (issue 13 point 5): a caller's watches and requests are
// counted apart, per caller; beyond the limit 429 with Retry-After; a slot given back (once) frees
// it, and giving it back twice frees nothing more.
import t from 'tap';
import { CallerLimits } from '../../src/clusters/caller-limits.js';
import { TooManyRequestsError } from '../../src/errors.js';

t.test('slots per caller and kind; 429 with Retry-After beyond them', async (t) => {
  const limits = new CallerLimits({ watches: 2, requests: 1 }, () => 'prod');
  const watch1 = limits.admit('user:1', true);
  limits.admit('user:1', true);
  const refused = (() => {
    try {
      limits.admit('user:1', true);
    } catch (err) {
      return err;
    }
  })();
  t.ok(refused instanceof TooManyRequestsError, 'a third watch: 429');
  t.match(refused, { status: 429, retryAfterSeconds: 5, message: /watches .* on cluster prod: at most 2 per caller/ });
  t.doesNotThrow(() => limits.admit('user:1', false), 'requests are counted apart from watches');
  t.throws(
    () => limits.admit('user:1', false),
    new TooManyRequestsError('too many requests in flight on cluster prod: at most 1 per caller at once', 1),
    'a second request in flight: 429',
  );
  t.doesNotThrow(() => limits.admit('apikey:1', true), 'another caller has slots of its own');

  watch1();
  watch1();
  t.doesNotThrow(() => limits.admit('user:1', true), 'a watch given back frees its slot');
  t.throws(() => limits.admit('user:1', true), TooManyRequestsError, 'giving it back twice freed only one');
});
