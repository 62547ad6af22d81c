// The one translation of host API failures (src/host/host-errors.ts) and the one conflict-retry
// helper (src/host/retry.ts): every host status maps to one error of ours, never a 500 unless it
// is a bug, and a lost compare-and-swap is retried, then a 409.
import t from 'tap';
import * as k8s from '@kubernetes/client-node';
import {
  BadRequestError,
  ConflictError,
  HttpError,
  NotFoundError,
  ServiceUnavailableError,
  TooManyRequestsError,
} from '../../src/errors.js';
import { toHttpError } from '../../src/gateway/plugins/errors.js';
import {
  HostPermissionError,
  isAlreadyExists,
  isNotFound,
  isStale,
  translateHostError,
  translatingClient,
} from '../../src/host/host-errors.js';
import { retryOnConflict } from '../../src/host/retry.js';
import { createLogger } from '../../src/log.js';

const fetchError = (code: string) =>
  Object.assign(new Error(`request failed, reason: connect ${code}`), {
    name: 'FetchError',
    type: 'system',
    code,
    errno: code,
  });
const apiException = (code: number, reason = '', message = 'the host said no', headers: Record<string, string> = {}) =>
  new k8s.ApiException(code, 'failed', JSON.stringify({ kind: 'Status', code, reason, message }), headers);

t.test('every host status maps to one error of ours', async (t) => {
  const cases: [number, string, new (...args: never[]) => HttpError, number][] = [
    [400, 'BadRequest', BadRequestError, 400],
    [401, 'Unauthorized', HostPermissionError, 503],
    [403, 'Forbidden', HostPermissionError, 503],
    [404, 'NotFound', NotFoundError, 404],
    [409, 'AlreadyExists', ConflictError, 409],
    [409, 'Conflict', ConflictError, 409],
    [410, 'Expired', ConflictError, 409],
    [422, 'Invalid', HttpError, 422],
    [429, 'TooManyRequests', TooManyRequestsError, 429],
    [500, 'InternalError', ServiceUnavailableError, 503],
    [503, 'ServiceUnavailable', ServiceUnavailableError, 503],
  ];
  for (const [code, reason, type, status] of cases) {
    const err = translateHostError(apiException(code, reason), 'create users kiteline/user-a');
    t.ok(err instanceof type, `${code} ${reason} -> ${type.name}`);
    t.equal((err as HttpError).status, status, `${code} ${reason} answers ${status}`);
    t.same(
      toHttpError(apiException(code, reason))?.status,
      status,
      `the central error handler maps an untranslated ${code} the same way`,
    );
  }
  t.ok(
    isAlreadyExists(translateHostError(apiException(409, 'AlreadyExists'), 'x')),
    'a collided create is AlreadyExists',
  );
  t.ok(isStale(translateHostError(apiException(409, 'Conflict'), 'x')), 'a lost compare-and-swap is stale');
  t.notOk(isStale(translateHostError(apiException(409, 'AlreadyExists'), 'x')), 'a collided create is not stale');
  t.ok(isNotFound(translateHostError(apiException(404, 'NotFound'), 'x')));
  t.match(
    (translateHostError(apiException(422, 'Invalid', 'spec.name: Too long'), 'create roles') as HttpError).toBody(),
    {
      reason: 'Invalid',
      error: /create roles: spec.name: Too long/,
    },
  );
  const busy = translateHostError(
    apiException(429, 'TooManyRequests', 'slow down', { 'retry-after': '7' }),
    'x',
  ) as TooManyRequestsError;
  t.equal(busy.retryAfterSeconds, 7, "the host's Retry-After is passed on");
  t.equal(
    (translateHostError(apiException(429), 'x') as TooManyRequestsError).retryAfterSeconds,
    1,
    'no Retry-After: 1 second',
  );
});

t.test('an unreachable host is a 503 without its address; a bug stays a bug', async (t) => {
  for (const err of [
    fetchError('ECONNREFUSED'),
    fetchError('ECONNRESET'),
    Object.assign(new Error('x'), { code: 'ETIMEDOUT' }),
  ]) {
    const mapped = translateHostError(err, 'x');
    t.ok(mapped instanceof ServiceUnavailableError, `${err.message} -> 503`);
    t.notMatch((mapped as Error).message, /127\.0\.0\.1/, 'the host address is not shown');
  }
  const bug = new TypeError('bug');
  t.equal(translateHostError(bug, 'x'), bug, 'anything else is left as is');
  t.equal(toHttpError(bug), undefined, 'and answers 500');
  const ours = new NotFoundError('user not found: a');
  t.equal(translateHostError(ours, 'x'), ours, 'errors already ours pass through');
});

t.test('a 403 from the host is logged once per call with what was refused, and answered 503', async (t) => {
  const lines: string[] = [];
  const log = createLogger('info', {}, { write: (line: string) => lines.push(line) });
  const client = translatingClient(
    {
      createNamespacedSecret: async (_req: { namespace: string }) => {
        throw apiException(
          403,
          'Forbidden',
          'secrets is forbidden: User "system:serviceaccount:k:k" cannot create resource "secrets"',
        );
      },
      plain: () => 42,
    },
    log,
  );
  t.equal(client.plain(), 42, 'synchronous members are untouched');
  const err = await client.createNamespacedSecret({ namespace: 'kiteline' }).catch((e: unknown) => e);
  t.ok(err instanceof HostPermissionError);
  t.match((err as HttpError).message, /not allowed to create secret kiteline on the host cluster/);
  t.equal(lines.length, 1, 'one log line');
  t.match(JSON.parse(lines[0]), {
    level: 'error',
    call: 'create secret kiteline',
    status: 403,
    hostMessage: /cannot create resource "secrets"/,
  });
});

t.test('retryOnConflict runs the step again after a lost compare-and-swap, then gives a 409', async (t) => {
  let runs = 0;
  const value = await retryOnConflict('user a', async () => {
    runs++;
    if (runs < 3) throw new ConflictError('stale');
    return 'done';
  });
  t.equal(value, 'done');
  t.equal(runs, 3);

  runs = 0;
  const out = await retryOnConflict(
    'user a',
    async () => {
      runs++;
      throw new ConflictError('stale');
    },
    { attempts: 4, backoffMs: 1 },
  ).catch((e: unknown) => e);
  t.equal(runs, 4, 'the configured number of attempts');
  t.ok(out instanceof ConflictError);
  t.match((out as Error).message, /user a is being changed concurrently; try again/);

  runs = 0;
  const other = await retryOnConflict('x', async () => {
    runs++;
    throw new ConflictError('exists', 'AlreadyExists');
  }).catch((e: unknown) => e);
  t.equal(runs, 1, 'a collided create is not retried unless asked');
  t.ok(isAlreadyExists(other));

  runs = 0;
  await retryOnConflict(
    'x',
    async () => {
      runs++;
      if (runs === 1) throw new ConflictError('exists', 'AlreadyExists');
    },
    { retryOn: isAlreadyExists },
  );
  t.equal(runs, 2, 'retryOn widens what is retried');
});
