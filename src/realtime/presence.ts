import { randomBytes } from "node:crypto";

/**
 * Presence of one topic, as Phoenix.Presence keeps it: per key, the metas of every tracked session, each with
 * its own `phx_ref`. A join sends `presence_state` (the whole state) to the joiner; every track, untrack and
 * leave sends `presence_diff` ({joins, leaves}) to every member of the topic.
 */

export type Metas = Record<string, { metas: Record<string, unknown>[] }>;

export interface PresenceDiff {
  joins: Metas;
  leaves: Metas;
}

interface Entry {
  key: string;
  meta: Record<string, unknown>;
}

export class PresenceState {
  /** Session id -> its tracked entry (one per session, as a channel tracks one payload at a time). */
  private readonly entries = new Map<string, Entry>();

  get size(): number {
    return this.entries.size;
  }

  list(): { sessionId: string; key: string; meta: Record<string, unknown> }[] {
    return [...this.entries].map(([sessionId, e]) => ({ sessionId, key: e.key, meta: e.meta }));
  }

  state(): Metas {
    const out: Metas = {};
    for (const { key, meta } of this.entries.values()) (out[key] ??= { metas: [] }).metas.push(meta);
    return out;
  }

  /** Tracks (or re-tracks) a session's payload under `key`: the diff to send to the topic. */
  track(sessionId: string, key: string, payload: Record<string, unknown>): PresenceDiff {
    const previous = this.entries.get(sessionId);
    const meta: Record<string, unknown> = { ...payload, phx_ref: newRef() };
    if (previous) meta.phx_ref_prev = previous.meta.phx_ref;
    this.entries.set(sessionId, { key, meta });
    const diff: PresenceDiff = { joins: { [key]: { metas: [meta] } }, leaves: {} };
    if (previous) diff.leaves[previous.key] = { metas: [previous.meta] };
    return diff;
  }

  /** Removes a session's entry: the diff to send, or undefined when it tracked nothing. */
  untrack(sessionId: string): PresenceDiff | undefined {
    const previous = this.entries.get(sessionId);
    if (!previous) return undefined;
    this.entries.delete(sessionId);
    return { joins: {}, leaves: { [previous.key]: { metas: [previous.meta] } } };
  }
}

function newRef(): string {
  return randomBytes(9).toString("base64url");
}
