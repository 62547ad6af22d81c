// Pure logic: read coalescing shares one upstream read among identical reads that wait at the same
// time, and never hands a request the answer of a read sent before it arrived.
import t from 'tap';
import { ReadCoalescer } from '../../src/clusters/read-coalescer.js';
import type { BufferedAnswer } from '../../src/clusters/types.js';

/** A fetcher whose reads the test settles by hand, in order. */
function manualFetcher() {
  const reads: Array<{ signal: AbortSignal; resolve: (a: BufferedAnswer) => void; reject: (e: unknown) => void }> = [];
  const fetch = (signal: AbortSignal) =>
    new Promise<BufferedAnswer>((resolve, reject) => reads.push({ signal, resolve, reject }));
  return { reads, fetch };
}

const answer = (text: string): BufferedAnswer => ({
  statusCode: 200,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(text),
});
const tick = () => new Promise((r) => setImmediate(r));

t.test('a read with nothing in flight is sent at once, alone', async (t) => {
  const c = new ReadCoalescer();
  const { reads, fetch } = manualFetcher();
  const a = c.read('k', fetch);
  t.equal(reads.length, 1, 'sent immediately');
  reads[0].resolve(answer('one'));
  t.equal((await a).body.toString(), 'one');
  t.equal(c.pending, 0, 'the key is forgotten once answered');
});

t.test('reads arriving while one is in flight wait for the next read, and share it', async (t) => {
  let shared = 0;
  const c = new ReadCoalescer((n) => (shared += n));
  const { reads, fetch } = manualFetcher();
  const first = c.read('k', fetch);
  const later = [c.read('k', fetch), c.read('k', fetch), c.read('k', fetch)];
  t.equal(reads.length, 1, 'no second read while the first is in flight');
  reads[0].resolve(answer('before'));
  t.equal((await first).body.toString(), 'before');
  await tick();
  t.equal(reads.length, 2, 'one read for all three waiters, sent after the first settled');
  reads[1].resolve(answer('after'));
  const bodies = (await Promise.all(later)).map((a) => a.body.toString());
  t.same(
    bodies,
    ['after', 'after', 'after'],
    'the later reads never get the answer of the read sent before they arrived',
  );
  t.equal(shared, 2, 'two answers came from a read another request also waited for');
  t.equal(c.pending, 0);
});

t.test('different keys never share', async (t) => {
  const c = new ReadCoalescer();
  const { reads, fetch } = manualFetcher();
  const a = c.read('a', fetch);
  const b = c.read('b', fetch);
  t.equal(reads.length, 2);
  reads[0].resolve(answer('A'));
  reads[1].resolve(answer('B'));
  t.equal((await a).body.toString(), 'A');
  t.equal((await b).body.toString(), 'B');
});

t.test('an error reaches the whole batch, and the next batch still reads', async (t) => {
  const c = new ReadCoalescer();
  const { reads, fetch } = manualFetcher();
  const first = c.read('k', fetch);
  const second = [c.read('k', fetch), c.read('k', fetch)];
  reads[0].reject(new Error('upstream down'));
  await t.rejects(first, /upstream down/);
  await tick();
  t.equal(reads.length, 2, 'the waiting batch sends its own read');
  reads[1].reject(new Error('still down'));
  for (const p of second) await t.rejects(p, /still down/);
  const third = c.read('k', fetch);
  reads[2].resolve(answer('back'));
  t.equal((await third).body.toString(), 'back');
});

t.test('a waiter that leaves is dropped; the others still get the answer', async (t) => {
  const c = new ReadCoalescer();
  const { reads, fetch } = manualFetcher();
  const leaving = new AbortController();
  const a = c.read('k', fetch, leaving.signal);
  const b = c.read('k', fetch);
  // a was sent alone; b waits for the next read.
  leaving.abort();
  await t.rejects(a, { name: 'AbortError' });
  t.equal(reads[0].signal.aborted, true, 'nobody waits for the first read any more: it is aborted');
  reads[0].reject(new Error('aborted'));
  await tick();
  t.equal(reads.length, 2, 'the waiting read is sent');
  t.equal(reads[1].signal.aborted, false);
  reads[1].resolve(answer('b'));
  t.equal((await b).body.toString(), 'b');
});

t.test('a batch everyone left before it was sent is never sent', async (t) => {
  const c = new ReadCoalescer();
  const { reads, fetch } = manualFetcher();
  const first = c.read('k', fetch);
  const gone = new AbortController();
  const waiting = c.read('k', fetch, gone.signal);
  gone.abort();
  await t.rejects(waiting, { name: 'AbortError' });
  reads[0].resolve(answer('first'));
  await first;
  await tick();
  t.equal(reads.length, 1, 'no read for a batch without waiters');
  t.equal(c.pending, 0);
});

t.test('a read whose signal is already aborted is refused without a read', async (t) => {
  const c = new ReadCoalescer();
  const { reads, fetch } = manualFetcher();
  await t.rejects(c.read('k', fetch, AbortSignal.abort()), { name: 'AbortError' });
  t.equal(reads.length, 0);
  t.equal(c.pending, 0);
});

t.test('a fetcher that throws at once fails its batch like a rejected read', async (t) => {
  const c = new ReadCoalescer();
  await t.rejects(
    c.read('k', () => {
      throw new Error('bad request');
    }),
    /bad request/,
  );
  t.equal(c.pending, 0);
});
