// The pod file browser's ls parsing (src/workloads/pod-files.ts) for the three listings it runs:
// GNU coreutils' --full-time, busybox's -e, and the plain long form; names with spaces, symlinks,
// devices; and the path and file-name checks.
import t from 'tap';
import { BadRequestError } from '../../src/errors.js';
import { checkedFileName, checkedPath, parseListing } from '../../src/workloads/pod-files.js';

t.test('GNU ls -la --full-time', async (t) => {
  const out = [
    'total 16',
    'drwxr-xr-x 2 root root 4096 2026-11-24 08:01:02.123456789 +0000 .',
    'drwxr-xr-x 1 root root 4096 2026-11-24 08:01:02.123456789 +0000 ..',
    '-rw-r--r-- 1 app  app    12 2026-11-20 10:00:59.000000000 +0000 my  file.txt',
    'lrwxrwxrwx 1 root root    4 2026-11-24 08:01:02.000000000 +0000 link -> file',
    'drwxr-xr-x 2 root root 4096 2026-01-02 03:04:05.000000000 +0000 Zeta',
    'crw-rw-rw- 1 root root 1, 3 2026-11-24 08:01:02.000000000 +0000 null',
  ].join('\n');
  const files = parseListing(out, 3, true);
  t.same(
    files.map((f) => f.name),
    ['Zeta', 'link -> file', 'my file.txt', 'null'],
    'directories first, then by name; . and .. skipped',
  );
  t.same(files[0], {
    name: 'Zeta',
    isDir: true,
    size: '4096',
    modTime: '2026-01-02 03:04:05',
    mode: 'drwxr-xr-x',
    uid: 'root',
    gid: 'root',
  });
  t.match(files[2], { size: '12', uid: 'app', gid: 'app', modTime: '2026-11-20 10:00:59' });
  t.match(files[3], { size: '1, 3', mode: /^c/ }, 'a device: major, minor');
});

t.test('busybox ls -lae', async (t) => {
  const out =
    '-rw-r--r--    1 root     root        300256 Tue Nov  4 08:01:02 2026 data.bin\n' +
    'drwxr-xr-x    2 root     root            40 Tue Nov 24 08:01:02 2026 sub\n';
  t.same(parseListing(out, 5, true), [
    {
      name: 'sub',
      isDir: true,
      size: '40',
      modTime: '2026-11-24 08:01:02',
      mode: 'drwxr-xr-x',
      uid: 'root',
      gid: 'root',
    },
    {
      name: 'data.bin',
      isDir: false,
      size: '300256',
      modTime: '2026-11-04 08:01:02',
      mode: '-rw-r--r--',
      uid: 'root',
      gid: 'root',
    },
  ]);
});

t.test('plain ls -la keeps its own short time', async (t) => {
  t.match(parseListing('-rw-r--r-- 1 0 0 5 Nov 24 08:01 a\n', 3, false), [
    { name: 'a', modTime: 'Nov 24 08:01', uid: '0' },
  ]);
});

t.test('paths and file names', async (t) => {
  t.equal(checkedPath(undefined, '/'), '/');
  t.equal(checkedPath('/a b/$(x)'), '/a b/$(x)', 'any absolute path: it is one argv word');
  for (const bad of ['relative', '', 'x\0', '/a\0b', `/${'a'.repeat(5000)}`])
    t.throws(() => checkedPath(bad), BadRequestError, JSON.stringify(bad.slice(0, 20)));
  t.equal(checkedFileName('a $(b).txt'), 'a $(b).txt');
  for (const bad of [undefined, '', '.', '..', 'a/b', 'a\\b', 'a\0b'])
    t.throws(() => checkedFileName(bad), BadRequestError, String(bad));
});
