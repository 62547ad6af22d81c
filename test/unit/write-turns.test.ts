// Pure logic: writes to one object take turns in arrival order, one at a time; other objects do
// not wait; a writer that leaves stops waiting; a turn held too long lets the next go ahead.
import t from 'tap';
import { WriteTurns } from '../../src/clusters/write-turns.js';

const tick = () => new Promise((r) => setImmediate(r));

t.test('one write at a time per object, in arrival order', async (t) => {
  const turns = new WriteTurns(60_000);
  const order: string[] = [];
  const ends: Record<string, () => void> = {};
  const writer = (name: string) =>
    turns.take('/api/v1/namespaces/a/configmaps/x').then((end) => {
      order.push(name);
      ends[name] = end;
    });
  const all = [writer('first'), writer('second'), writer('third')];
  await tick();
  t.same(order, ['first'], 'only the first runs');
  ends.first();
  await tick();
  t.same(order, ['first', 'second'], 'the next one runs once the first ended');
  ends.first(); // ending twice changes nothing
  await tick();
  t.same(order, ['first', 'second'], 'a second end of the same turn grants nothing');
  ends.second();
  await tick();
  t.same(order, ['first', 'second', 'third']);
  ends.third();
  await Promise.all(all);
  t.equal(turns.pending, 0, 'the key is forgotten when idle');
});

t.test('a newcomer never slips in between an end and the next waiter', async (t) => {
  const turns = new WriteTurns(60_000);
  const endFirst = await turns.take('k');
  let secondRunning = false;
  const second = turns.take('k').then((end) => {
    secondRunning = true;
    return end;
  });
  endFirst();
  let thirdRunning = false;
  const third = turns.take('k').then((end) => {
    thirdRunning = true;
    return end;
  });
  await tick();
  t.ok(secondRunning, 'the waiter got the turn');
  t.notOk(thirdRunning, 'the newcomer waits behind it');
  (await second)();
  await tick();
  t.ok(thirdRunning);
  (await third)();
  t.equal(turns.pending, 0);
});

t.test('other objects do not wait', async (t) => {
  const turns = new WriteTurns(60_000);
  const endA = await turns.take('a');
  const endB = await turns.take('b');
  t.pass('b got its turn while a holds its own');
  endA();
  endB();
  t.equal(turns.pending, 0);
});

t.test('a writer whose client leaves stops waiting and holds no turn', async (t) => {
  const turns = new WriteTurns(60_000);
  const endFirst = await turns.take('k');
  const leaving = new AbortController();
  const gone = turns.take('k', leaving.signal);
  let lastRunning = false;
  const last = turns.take('k').then((end) => {
    lastRunning = true;
    return end;
  });
  leaving.abort();
  await t.rejects(gone, { name: 'AbortError' });
  endFirst();
  await tick();
  t.ok(lastRunning, 'the one behind the leaver gets the turn');
  (await last)();
  t.equal(turns.pending, 0);
  await t.rejects(
    turns.take('k', AbortSignal.abort()).then(async () => turns.take('k', AbortSignal.abort())),
    { name: 'AbortError' },
    'an aborted signal is refused while someone holds the turn',
  );
});

t.test('a turn held too long lets the next writer go ahead', async (t) => {
  const turns = new WriteTurns(30);
  const endStuck = await turns.take('k');
  const started = Date.now();
  const endNext = await turns.take('k');
  t.ok(Date.now() - started >= 25, 'it waited about the maximum');
  endNext();
  endStuck();
  t.equal(turns.pending, 0);
});
