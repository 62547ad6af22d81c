// Host-cluster failures become a clean 503 (never a 500): network errors of client-node's fetch
// and 5xx/429 answers of the host API server; its 4xx answers and anything else are left alone.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import { ServiceUnavailableError } from '../../src/errors.js';
import { hostUnavailable } from '../../src/host/kube.js';
import { toHttpError } from '../../src/gateway/plugins/errors.js';

const fetchError = (code: string) => Object.assign(new Error(`request failed, reason: connect ${code}`), { name: 'FetchError', type: 'system', code, errno: code });
const apiException = (code: number) => new k8s.ApiException(code, 'failed', '{}', {});

t.test('unreachable host and host 5xx/429 answers are 503', async (t) => {
  for (const err of [fetchError('ECONNREFUSED'), fetchError('ECONNRESET'), Object.assign(new Error('x'), { code: 'ETIMEDOUT' }), apiException(500), apiException(503), apiException(429)]) {
    const mapped = hostUnavailable(err);
    t.ok(mapped instanceof ServiceUnavailableError, `${err.message} -> 503`);
    t.same(toHttpError(err)?.toBody(), mapped?.toBody(), 'the central handler maps it');
  }
  t.match(hostUnavailable(fetchError('ECONNREFUSED'))?.toBody(), { reason: 'ServiceUnavailable', code: 503, error: /host cluster is unavailable \(ECONNREFUSED\)/ });
  t.notMatch(hostUnavailable(fetchError('ECONNREFUSED'))?.message, /127\.0\.0\.1/, 'the host address is not shown');
});

t.test('other errors are not host outages', async (t) => {
  t.equal(hostUnavailable(apiException(404)), undefined);
  t.equal(hostUnavailable(apiException(409)), undefined);
  t.equal(hostUnavailable(new TypeError('bug')), undefined);
  t.equal(hostUnavailable(undefined), undefined);
  t.equal(toHttpError(new TypeError('bug')), undefined, 'a bug stays a 500');
});
