// Issue 13 point 5, the server's timeouts: a client that sends its headers a byte at a time
// (slowloris) on a public route is cut off, so is one that trickles its body, and a connection on
// which nothing moves is closed; a watch, silent by nature, is not. The gateway here runs with
// short timeouts: headers 1 s, whole request 3 s, idle 2 s (checked every second).
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import t from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { addReadyCluster, bootstrapAdmin, testKubeconfig } from './helpers/fixtures.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';

const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 3000;
const IDLE_TIMEOUT_MS = 2000;
/** The server looks for overdue requests once a second; this covers that and a loaded machine. */
const SLACK_MS = 2500;
/** How long a test waits for the server to cut a connection before calling it a failure. */
const GIVE_UP_MS = 15_000;

let gw: TestGateway;

t.before(async () => {
  gw = await startGateway(t, {
    env: {
      KITELINE_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      KITELINE_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      KITELINE_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
    },
  });
});

/**
 * Connects to the gateway, writes `first`, then `drip()` every 200 ms until the server closes the
 * connection; resolves with how long that took and what the server sent (-1: never closed).
 */
function slowClient(first: string, drip: () => string): Promise<{ ms: number; answer: string }> {
  const { port } = new URL(gw.url);
  return new Promise((resolve) => {
    const started = Date.now();
    const socket: Socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    const timer = setInterval(() => {
      if (!socket.destroyed && first !== '') socket.write(drip());
    }, 200);
    const done = (ms: number) => {
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ ms, answer });
    };
    const giveUp = setTimeout(() => done(-1), GIVE_UP_MS);
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('connect', () => socket.write(first));
    socket.on('close', () => done(Date.now() - started));
    socket.on('error', () => undefined);
  });
}

t.test('slowloris: headers sent a byte at a time to a public route are cut off', async (t) => {
  const headerLine = 'X-Slow: a\r\n';
  let sent = 0;
  const { ms, answer } = await slowClient(
    'GET /healthz HTTP/1.1\r\nHost: kiteline\r\n',
    () => headerLine[sent++ % headerLine.length],
  );
  t.ok(ms >= 0, `the server closed the connection (after ${ms} ms)`);
  t.ok(
    ms < HEADERS_TIMEOUT_MS + SLACK_MS,
    `within the headers timeout (${HEADERS_TIMEOUT_MS} ms + ${SLACK_MS} ms slack)`,
  );
  t.match(answer, /^(HTTP\/1\.1 408|)/, 'answered 408 Request Timeout, or just closed');
});

t.test('a body trickled to a public route is cut off at the request timeout', async (t) => {
  const head =
    'POST /api/auth/login/password HTTP/1.1\r\nHost: kiteline\r\n' +
    'content-type: application/json\r\ncontent-length: 4096\r\n\r\n{';
  const { ms } = await slowClient(head, () => ' ');
  t.ok(ms >= 0, `the server closed the connection (after ${ms} ms)`);
  t.ok(
    ms < REQUEST_TIMEOUT_MS + SLACK_MS,
    `within the request timeout (${REQUEST_TIMEOUT_MS} ms + ${SLACK_MS} ms slack)`,
  );
});

t.test('a connection that sends nothing is closed', async (t) => {
  const { ms } = await slowClient('', () => '');
  t.ok(ms >= 0, `the server closed the connection (after ${ms} ms)`);
  t.ok(ms < IDLE_TIMEOUT_MS + SLACK_MS, `within the idle timeout (${IDLE_TIMEOUT_MS} ms + ${SLACK_MS} ms slack)`);
});

t.test('a silent watch outlives the idle timeout and still gets its event', async (t) => {
  const admin = await bootstrapAdmin(gw);
  await testControlPlane('target-a');
  await addReadyCluster(gw, admin, { name: 'quiet', config: testKubeconfig('target-a') });
  const name = uniqueName('late-event');
  const events = await new Promise<string>((resolve, reject) => {
    const req = request(
      new URL(`/api/v1/configmaps/default?watch=true&fieldSelector=metadata.name%3D${name}`, gw.url),
      {
        headers: { ...admin.headers, 'x-cluster-name': 'quiet' },
        agent: false,
      },
    );
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`watch answered ${res.statusCode}`));
      let text = '';
      res.on('data', (chunk) => {
        text += chunk;
        if (text.includes('"ADDED"')) {
          req.destroy();
          resolve(text);
        }
      });
      res.on('end', () => reject(new Error(`the watch ended before its event: ${text}`)));
      // Silent for twice the idle timeout, then an object appears.
      const createLater = async () => {
        const target = await testControlPlane('target-a');
        kubectl(target.kubeconfigPath, ['-n', 'default', 'create', 'configmap', name]);
        t.teardown(() =>
          kubectl(target.kubeconfigPath, ['-n', 'default', 'delete', 'configmap', name, '--wait=false']),
        );
      };
      setTimeout(() => void createLater(), IDLE_TIMEOUT_MS * 2);
    });
    req.on('error', reject);
    req.end();
  });
  t.match(events, new RegExp(`"ADDED".*"name":"${name}"`), 'the event arrived after the silence');
});
