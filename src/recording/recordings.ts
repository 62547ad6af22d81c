// Session recording on one replica (docs/sessions.md): opens a recorder per session, flushes the
// live ones every interval, and closes them at shutdown; the leader prunes recordings past the
// retention (age, and total stored bytes, oldest first); every replica answers the list, search
// and replay from the watched SessionRecordings and, for the output, the chunks.
//
// Modes: `off` records nothing; `on` (the default) records what it can: a recording that cannot
// start or write is logged and counted, and the session goes on; `required` refuses a session
// whose recording cannot start (503) and ends a session whose recording fails.
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type * as k8s from '@kubernetes/client-node';
import { NotFoundError, ServiceUnavailableError } from '../errors.js';
import type { RecordingConfig } from '../config.js';
import type { Logger } from '../log.js';
import { describeApiError } from '../host/host-errors.js';
import { within } from '../within.js';
import { castHeader, parseCastEvents, plainText } from './asciicast.js';
import { HEARTBEAT_MS, SessionRecorder, type RecorderEvents } from './recorder.js';
import { noProgress, RecordingStore, type RecordingMeta, type RecordingResource, type RecordingSpec } from './store.js';

const gunzipAsync = promisify(gunzip);

/** What a SessionRecording object costs in the retention's total, beside its chunks and typed lines. */
export const RECORDING_OBJECT_BYTES = 2048;
/** What each SessionChunk object costs beside its data. */
export const CHUNK_OBJECT_BYTES = 1024;

/** A search of the output reads the chunks of this many sessions at most, newest first. */
export const OUTPUT_SEARCH_SESSIONS = 50;
/** ... and this many decompressed bytes at most. */
export const OUTPUT_SEARCH_BYTES = 64 * 1024 * 1024;

export interface RecordingQuery {
  user?: string;
  cluster?: string;
  /** The pod's name, or `namespace/name`. */
  pod?: string;
  /** Sessions that were open at some time in [from, to] (ISO 8601). */
  from?: string;
  to?: string;
  /** Case-insensitive text in the typed commands or the output. */
  q?: string;
  page: number;
  size: number;
}

/** Which recordings a caller may list, and read (their content: typed lines, output, cast). */
export interface RecordingAccess {
  list(spec: RecordingSpec): boolean;
  get(spec: RecordingSpec): boolean;
}

export interface RecordingPage {
  data: Array<Omit<RecordingSpec, 'input'> & { id: string; input?: string }>;
  total: number;
  page: number;
  size: number;
  /** False when a search of the output stopped at its bounds before reading every candidate. */
  outputSearchComplete: boolean;
}

export class Recordings {
  readonly store: RecordingStore;
  private readonly live = new Set<SessionRecorder>();
  /** Last writes of ended sessions, awaited at shutdown. */
  private readonly ending = new Set<Promise<void>>();
  private flushTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private readonly log: Logger;
  private readonly events: RecorderEvents;
  private loading: Promise<void> | undefined;
  /** The output search running now (they take turns). */
  private outputSearch: Promise<void> = Promise.resolve();

  constructor(
    kc: k8s.KubeConfig,
    namespace: string,
    private readonly replica: string,
    readonly config: RecordingConfig,
    private readonly isLeader: () => boolean,
    log: Logger,
    counters: { failed(): void; dropped(bytes: number): void },
  ) {
    this.log = log.child({ component: 'session-recording' });
    this.store = new RecordingStore(kc, namespace, log);
    this.events = {
      failed: (err, recording) => {
        counters.failed();
        this.log.warn({ recording, err: describeApiError(err) }, 'could not write a session recording');
      },
      dropped: (bytes) => counters.dropped(bytes),
    };
  }

  get enabled(): boolean {
    return this.config.mode !== 'off';
  }

  /**
   * Starts recording a session (undefined when recording is off). In `required` mode the recording
   * object is created first, and a failure refuses the session (503); otherwise it is created in
   * the background and a failure only loses this recording.
   */
  async open(meta: RecordingMeta): Promise<SessionRecorder | undefined> {
    if (!this.enabled) return undefined;
    const name = RecordingStore.newName();
    const spec: RecordingSpec = {
      ...meta,
      replica: this.replica,
      start: new Date().toISOString(),
      ...noProgress(),
      input: '',
    };
    const created = this.store.create(name, spec).then(
      (uid) => uid,
      (err: unknown) => {
        this.events.failed(err, name);
        return undefined;
      },
    );
    if (this.config.mode === 'required' && (await created) === undefined)
      throw new ServiceUnavailableError(
        'session recording is required and could not start (the host cluster did not take it); try again',
      );
    const recorder = new SessionRecorder(name, created, this.store, this.config.maxSessionBytes, this.events);
    if (meta.width > 0 && meta.height > 0) recorder.resize(meta.width, meta.height);
    this.live.add(recorder);
    return recorder;
  }

  /** Ends a recorder's session and forgets it. */
  async end(recorder: SessionRecorder, outcome: { exitCode?: number; result: 'success' | 'failure' }): Promise<void> {
    this.live.delete(recorder);
    const ended = recorder.end(outcome);
    this.ending.add(ended);
    try {
      await ended;
    } finally {
      this.ending.delete(ended);
    }
  }

  /** Drops the recording of a session that never started (refused before it ran): nothing to keep. */
  async discard(recorder: SessionRecorder): Promise<void> {
    this.live.delete(recorder);
    const discarded = recorder.discard().then(async (uid) => {
      if (uid !== undefined) await this.store.delete(recorder.name);
    });
    this.ending.add(discarded);
    try {
      await discarded;
    } catch (err) {
      this.log.warn({ recording: recorder.name, err: describeApiError(err) }, 'could not delete an unused recording');
    } finally {
      this.ending.delete(discarded);
    }
  }

  /** Whether a failed recording ends its session (`required` mode). */
  get required(): boolean {
    return this.config.mode === 'required';
  }

  start(): Promise<void> {
    if (!this.enabled) return Promise.resolve();
    this.flushTimer = setInterval(() => {
      const now = Date.now();
      for (const recorder of this.live)
        if (recorder.dirty || now - recorder.lastWrite >= HEARTBEAT_MS) void recorder.flush();
    }, this.config.flushIntervalMs);
    this.flushTimer.unref();
    this.pruneTimer = setInterval(() => void this.prune(), this.config.pruneIntervalMs);
    this.pruneTimer.unref();
    this.loading = this.store.start();
    return Promise.resolve();
  }

  /**
   * Waits (10 s at most) for every recording to be in the watched cache, so that a replica that
   * just started does not answer 404 for a recording it has not read yet: 503 when it still has not.
   */
  async loaded(timeoutMs = 10_000): Promise<void> {
    if (!this.enabled && !this.loading)
      throw new NotFoundError('session recording is off (KITELINE_SESSION_RECORDING=off)');
    if (
      !(await within(
        this.loading!.then(() => true),
        timeoutMs,
      ))
    )
      throw new ServiceUnavailableError(
        'the session recordings are still loading (the gateway started a moment ago); retry',
      );
  }

  /** Writes what every live session has pending (their sessions are ended by their own routes first). */
  async close(): Promise<void> {
    clearInterval(this.flushTimer);
    clearInterval(this.pruneTimer);
    await Promise.all([...[...this.live].map((r) => r.flush()), ...this.ending]);
    if (this.enabled) await this.store.stop();
  }

  /** The leader deletes recordings past the age, then the oldest beyond the total size. */
  async prune(now = Date.now()): Promise<string[]> {
    if (!this.isLeader() || !this.store.cache.isSynced) return [];
    const live = new Set([...this.live].map((r) => r.name));
    const doomed = recordingsToPrune(this.store.cache.list(), this.config, now).filter((name) => !live.has(name));
    for (const name of doomed) {
      try {
        await this.store.delete(name);
      } catch (err) {
        this.log.warn({ recording: name, err: describeApiError(err) }, 'could not delete an expired recording');
        break;
      }
    }
    if (doomed.length > 0) this.log.info({ recordings: doomed.length }, 'pruned session recordings');
    return doomed;
  }

  /** A recording, or 404. */
  get(id: string): RecordingResource {
    const recording = this.store.cache.get(id);
    if (!recording) throw new NotFoundError(`session recording ${id} not found`);
    return recording;
  }

  /**
   * The recordings the caller may list that match the query, newest first, one page. `q` looks
   * only in recordings the caller may also read (`get`): the typed lines and the output are the
   * recording's content, which a list-only role does not see (its answers leave `input` out).
   */
  async query(query: RecordingQuery, may: RecordingAccess): Promise<RecordingPage> {
    const matching = this.store.cache
      .list()
      .filter((r) => may.list(r.spec) && matchesFields(r.spec, query))
      .sort((a, b) => (a.spec.start !== b.spec.start ? (a.spec.start < b.spec.start ? 1 : -1) : 0));
    let found = matching;
    let outputSearchComplete = true;
    if (query.q) {
      const q = query.q.toLowerCase();
      const readable = matching.filter((r) => may.get(r.spec));
      const byInput = new Set(readable.filter((r) => (r.spec.input ?? '').toLowerCase().includes(q)));
      // One search of the output at a time per replica: each may read up to OUTPUT_SEARCH_BYTES.
      const search = this.outputSearch.then(() =>
        this.searchOutput(
          readable.filter((r) => !byInput.has(r)),
          q,
        ),
      );
      this.outputSearch = search.then(
        () => undefined,
        () => undefined,
      );
      const byOutput = await search;
      outputSearchComplete = byOutput.complete;
      found = matching.filter((r) => byInput.has(r) || byOutput.found.has(r));
    }
    const first = (query.page - 1) * query.size;
    return {
      data: found.slice(first, first + query.size).map((r) => {
        const { input, ...spec } = r.spec;
        return { id: r.metadata.name, ...spec, ...(may.get(r.spec) ? { input } : {}) };
      }),
      total: found.length,
      page: query.page,
      size: query.size,
      outputSearchComplete,
    };
  }

  /** The recordings whose output holds `q` (lower case), newest first, within the search's bounds. */
  private async searchOutput(
    candidates: RecordingResource[],
    q: string,
  ): Promise<{ found: Set<RecordingResource>; complete: boolean }> {
    const found = new Set<RecordingResource>();
    let budget = OUTPUT_SEARCH_BYTES;
    for (const [i, recording] of candidates.entries()) {
      if (i >= OUTPUT_SEARCH_SESSIONS || budget <= 0) return { found, complete: false };
      // Chunk by chunk: a match ends the read; the budget is checked before each chunk.
      let tail = '';
      for await (const lines of this.chunkTexts(recording.metadata.name)) {
        if (budget <= 0) return { found, complete: false };
        budget -= lines.length;
        const output = parseCastEvents(lines)
          .filter((e) => e[1] === 'o')
          .map((e) => e[2])
          .join('');
        // The text of two chunks meets where a match may span them: the end of the last is kept.
        const text = tail + plainText(output).toLowerCase();
        if (text.includes(q)) {
          found.add(recording);
          break;
        }
        tail = text.slice(-q.length);
      }
    }
    return { found, complete: true };
  }

  /** A recording's chunks in order, each decompressed (event lines), read a page at a time. */
  private async *chunkTexts(name: string): AsyncGenerator<string> {
    for await (const chunk of this.store.chunks(name))
      yield (await gunzipAsync(Buffer.from(chunk.spec.data, 'base64'))).toString('utf8');
  }

  /** The cast file (asciicast v2) of a recording, a piece at a time: its header, then each chunk's events. */
  async *cast(recording: RecordingResource): AsyncGenerator<string> {
    const { spec } = recording;
    const where = spec.kind === 'node-terminal' ? `node ${spec.node ?? ''}` : `${spec.namespace}/${spec.pod}`;
    yield castHeader({
      width: spec.width > 0 ? spec.width : 80,
      height: spec.height > 0 ? spec.height : 24,
      start: spec.start,
      command: spec.command,
      title: `${spec.user} on ${spec.cluster}: ${where}${spec.container ? ` (${spec.container})` : ''}`,
    });
    yield* this.chunkTexts(recording.metadata.name);
  }
}

/**
 * The recordings the retention lets go: those whose last write is older than the maximum age, and,
 * counting stored bytes from the newest, every one from where the total passes maxTotalBytes.
 */
export function recordingsToPrune(
  recordings: readonly RecordingResource[],
  retention: Pick<RecordingConfig, 'maxAgeSeconds' | 'maxTotalBytes'>,
  now = Date.now(),
): string[] {
  const notBefore = new Date(now - retention.maxAgeSeconds * 1000).toISOString();
  const newestFirst = [...recordings].sort((a, b) => (a.spec.start < b.spec.start ? 1 : -1));
  const doomed: string[] = [];
  let total = 0;
  // A session still running on some replica writes its progress at least every HEARTBEAT_MS.
  const running = new Date(now - 3 * HEARTBEAT_MS).toISOString();
  for (const { metadata, spec } of newestFirst) {
    // The objects count too: a flood of short sessions, or of small chunks, is bounded like long ones.
    total +=
      (spec.storedBytes ?? 0) +
      (spec.chunks ?? 0) * CHUNK_OBJECT_BYTES +
      RECORDING_OBJECT_BYTES +
      (spec.input?.length ?? 0);
    const last = spec.end ?? spec.updated ?? spec.start;
    if (spec.end === undefined && last >= running) continue;
    if (last < notBefore || total > retention.maxTotalBytes) doomed.push(metadata.name);
  }
  return doomed;
}

function matchesFields(spec: RecordingSpec, query: RecordingQuery): boolean {
  if (query.user && spec.user !== query.user) return false;
  if (query.cluster && spec.cluster !== query.cluster) return false;
  if (query.pod && spec.pod !== query.pod && `${spec.namespace}/${spec.pod}` !== query.pod) return false;
  const end = spec.end ?? spec.updated ?? spec.start;
  if (query.from && end < query.from) return false;
  if (query.to && spec.start > query.to) return false;
  return true;
}
