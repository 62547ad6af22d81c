// One log WebSocket (GET /api/v1/logs/<ns>/<pod>/ws), speaking Kite's JSON messages
// `{type, data}`: `log` (a line), `info`, `error`, `close` (a stream ended:
// data {"status":"closed","pod":...}), and `pong` for the client's `ping`. Every log message also
// names its `pod` (and `container` when known), so a client can tell the lines of several pods
// apart; in a label-selector session the data itself carries the tag as well, `[pod/container]: `,
// for Kite's UI, which shows only `data`.
//
// Either one pod's log (the session ends when that stream does), or every running pod of a label
// selector (pod `_all`): each container of each pod is followed, the selector's pods are watched,
// new or restarted containers join as they start, and streams of deleted pods stop. At most
// MAX_STREAMS_PER_SESSION streams at once, each one of the caller's long-running slots on the
// cluster. Lines go out as the cluster sends them; a client that reads slowly slows the streams
// (the next line waits until the socket took the last ones), and when the client leaves (or stops
// answering pings) every upstream request is aborted.
import WebSocket from 'ws';
import type { ClusterConnection, UpstreamResponse } from '../clusters/types.js';
import { TooManyRequestsError } from '../errors.js';
import type { UpstreamHeaders } from '../cluster-access/impersonation.js';
import { MAX_LOG_LINE_BYTES, openLog, type LogOptions } from './logs.js';
import { streamLines } from '../cluster-access/stream-lines.js';
import {
  listPods,
  openWatch,
  podsPath,
  watchEvents,
  type PodList,
  type PodObject,
  type WatchEventType,
} from '../cluster-access/watch-events.js';

/** Streams one label-selector session follows at once (pods x containers). */
export const MAX_STREAMS_PER_SESSION = 20;
/** Above this much unsent data a send waits until the socket took it. */
const HIGH_WATER_BYTES = 1024 * 1024;
/** Pause before watching again after the cluster ended a watch. */
const REWATCH_DELAY_MS = 1000;

/** Kite's log message, plus the pod and container a line came from. */
export interface LogMessage {
  type: 'log' | 'info' | 'error' | 'close' | 'pong';
  data: string;
  pod?: string;
  container?: string;
}

export interface LogSessionContext {
  conn: ClusterConnection;
  /** The caller's impersonation headers. */
  headers: UpstreamHeaders;
  /** The caller's key for the cluster's per-caller slots (conn.admit). */
  caller: string;
  namespace: string;
  options: LogOptions;
  /** The request's logger (only the session's end is logged, never a line of the log). */
  log: { debug(fields: object, message: string): void };
  /** Aborts every upstream request of the session; the route aborts it when it fails before the WebSocket opens. */
  controller: AbortController;
}

interface FollowedStream {
  controller: AbortController;
}

export class LogSession {
  private readonly controller: AbortController;
  private readonly streams = new Map<string, FollowedStream>();
  /** The container instance (containerID) each ended stream followed: not followed again. */
  private readonly ended = new Map<string, string | undefined>();
  /** Streams already reported as not followed (the limit), so the report is made once. */
  private readonly refused = new Set<string>();

  /** `releaseSlot` gives back the session's own slot (its single stream, or its pod watch). */
  constructor(
    private readonly ws: WebSocket,
    private readonly ctx: LogSessionContext,
    private readonly releaseSlot: () => void,
  ) {
    this.controller = ctx.controller;
    // A Buffer: binaryType is ws's default, 'nodebuffer'.
    ws.on('message', (data) => this.onClientMessage((data as Buffer).toString()));
    // A client that stops answering pings is terminated by acceptWebSocket's heartbeat: 'close'.
    ws.once('close', () => this.stop());
    ws.on('error', () => this.stop());
  }

  private get closed(): boolean {
    return this.controller.signal.aborted;
  }

  /** Relays one pod's log (opened already, with the session's signal); the WebSocket closes when that log ends. */
  async followPod(pod: string, opened: UpstreamResponse): Promise<void> {
    await this.follow(pod, this.ctx.options.container, undefined, false, () => undefined, opened);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000, 'the log ended');
  }

  /** Follows every running pod of the selector (listed already), and the pods that come later. */
  async followSelector(labelSelector: string, list: PodList): Promise<void> {
    for (const pod of list.items) this.podChanged('ADDED', pod);
    let resourceVersion = list.metadata?.resourceVersion;
    while (!this.closed) {
      try {
        if (resourceVersion === undefined) {
          const fresh = await listPods(
            this.ctx.conn,
            this.ctx.headers,
            podsPath(this.ctx.namespace, new URLSearchParams({ labelSelector })),
            this.controller.signal,
          );
          for (const pod of fresh.items) this.podChanged('ADDED', pod);
          resourceVersion = fresh.metadata?.resourceVersion;
        }
        resourceVersion = await this.watchPods(labelSelector, resourceVersion);
      } catch (err) {
        if (!this.closed)
          await this.send({ type: 'error', data: `stopped watching for new pods: ${(err as Error).message}` });
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, REWATCH_DELAY_MS));
    }
  }

  /**
   * Watches the selector's pods until the cluster ends the watch; the resourceVersion to go on from (undefined: list
   * again).
   */
  private async watchPods(labelSelector: string, from: string | undefined): Promise<string | undefined> {
    const query = new URLSearchParams({ watch: 'true', labelSelector, allowWatchBookmarks: 'true' });
    if (from) query.set('resourceVersion', from);
    const res = await openWatch(
      this.ctx.conn,
      this.ctx.headers,
      podsPath(this.ctx.namespace, query),
      this.controller.signal,
    );
    let resourceVersion = from;
    try {
      for await (const event of watchEvents<PodObject>(res)) {
        // An ERROR is usually "too old resource version": list again.
        if (event.type === 'ERROR') return undefined;
        resourceVersion = event.object?.metadata?.resourceVersion ?? resourceVersion;
        if (event.type !== 'BOOKMARK') this.podChanged(event.type, event.object);
      }
    } finally {
      res.once('error', () => undefined);
      res.destroy();
    }
    return resourceVersion;
  }

  /** Starts streams for a running pod's containers; stops them when the pod is deleted. */
  private podChanged(type: WatchEventType, pod: PodObject): void {
    const name = pod?.metadata?.name;
    if (this.closed || typeof name !== 'string') return;
    if (type === 'DELETED') {
      const ofPod = (key: string) => key.startsWith(`${name}/`);
      for (const [key, stream] of this.streams) if (ofPod(key)) stream.controller.abort();
      for (const key of [...this.ended.keys()].filter(ofPod)) this.ended.delete(key);
      for (const key of [...this.refused].filter(ofPod)) this.refused.delete(key);
      return;
    }
    if (pod.status?.phase !== 'Running') return;
    const wanted = this.ctx.options.container;
    const containers = (pod.spec?.containers ?? [])
      .map((c) => c.name)
      .filter((c) => typeof c === 'string' && (!wanted || c === wanted));
    for (const container of containers) {
      const key = `${name}/${container}`;
      const status = pod.status.containerStatuses?.find((s) => s.name === container);
      if (status && !status.state?.running) continue; // not started yet, or waiting to restart
      const containerId = status?.containerID;
      if (this.streams.has(key) || (this.ended.has(key) && this.ended.get(key) === containerId)) continue;
      if (this.streams.size >= MAX_STREAMS_PER_SESSION) {
        this.refuse(key, `not following ${key}: a session follows at most ${MAX_STREAMS_PER_SESSION} containers`);
        continue;
      }
      let release: () => void;
      try {
        release = this.ctx.conn.admit(this.ctx.caller, true);
      } catch (err) {
        if (!(err instanceof TooManyRequestsError)) throw err;
        this.refuse(key, `not following ${key}: ${err.message}`);
        continue;
      }
      this.refused.delete(key);
      void this.follow(name, container, containerId, true, release);
    }
  }

  private refuse(key: string, message: string): void {
    if (this.refused.has(key)) return;
    this.refused.add(key);
    void this.send({ type: 'info', data: message });
  }

  /** Follows one container's log until it ends, the pod goes or the session closes. */
  private async follow(
    pod: string,
    container: string | undefined,
    containerId: string | undefined,
    tagged: boolean,
    release: () => void,
    opened?: UpstreamResponse,
  ): Promise<void> {
    const key = `${pod}/${container ?? ''}`;
    const stream: FollowedStream = { controller: new AbortController() };
    this.streams.set(key, stream);
    const signal = AbortSignal.any([this.controller.signal, stream.controller.signal]);
    const origin = container ? { pod, container } : { pod };
    const tag = `[${pod}/${container ?? ''}]: `;
    try {
      if (tagged) await this.send({ type: 'info', data: `following ${pod}/${container}`, ...origin });
      const res =
        opened ??
        (await openLog(this.ctx.conn, this.ctx.headers, this.ctx.namespace, pod, this.ctx.options, signal, container));
      try {
        for await (const line of streamLines(res, MAX_LOG_LINE_BYTES)) {
          await this.send({ type: 'log', data: tagged ? tag + line : line, ...origin });
        }
      } finally {
        res.once('error', () => undefined);
        res.destroy();
      }
      await this.send({ type: 'close', data: JSON.stringify({ status: 'closed', ...origin }), ...origin });
    } catch (err) {
      if (this.closed) return;
      if (signal.aborted)
        await this.send({ type: 'close', data: JSON.stringify({ status: 'closed', ...origin }), ...origin });
      else
        await this.send({
          type: 'error',
          data: `failed to follow the log of ${pod}${container ? `/${container}` : ''}: ${(err as Error).message}`,
          ...origin,
        });
    } finally {
      release();
      if (this.streams.get(key) === stream) this.streams.delete(key);
      // A stream stopped because its pod was deleted is forgotten with the pod.
      if (!stream.controller.signal.aborted) this.ended.set(key, containerId);
    }
  }

  private onClientMessage(text: string): void {
    let type: unknown;
    try {
      type = (JSON.parse(text) as { type?: unknown })?.type;
    } catch {
      type = text.trim();
    }
    if (type === 'ping') void this.send({ type: 'pong', data: 'pong' });
  }

  /** Sends one message; waits until the socket took it when much is waiting already. */
  private async send(message: LogMessage): Promise<void> {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    const text = JSON.stringify(message);
    if (this.ws.bufferedAmount < HIGH_WATER_BYTES) return this.ws.send(text);
    await new Promise<void>((resolve) => this.ws.send(text, () => resolve()));
  }

  /** Ends the session: every upstream request is aborted, every slot given back. */
  private stop(): void {
    if (this.closed) return;
    this.controller.abort();
    this.releaseSlot();
    this.ctx.log.debug({ namespace: this.ctx.namespace, streams: this.streams.size }, 'log session ended');
  }
}
