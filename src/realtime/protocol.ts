/**
 * Phoenix channel frames as realtime-js speaks them: protocol vsn 1.0.0 sends JSON objects, vsn 2.0.0 JSON
 * arrays `[join_ref, ref, topic, event, payload]` plus a binary frame for a user broadcast (kind 3). The
 * server always answers in text frames of the client's vsn, which both serializers decode.
 */

export type Vsn = "1.0.0" | "2.0.0";

export interface Frame {
  join_ref: string | null;
  ref: string | null;
  topic: string;
  event: string;
  payload: Record<string, unknown>;
}

/**
 * A payload already encoded as JSON, so that a message going to many sessions (a broadcast, a change) is
 * encoded once, not once per session.
 */
export class EncodedJson {
  constructor(readonly json: string) {}

  static of(value: unknown): EncodedJson {
    return new EncodedJson(JSON.stringify(value));
  }
}

/** A frame the server sends: its payload an object or already encoded. */
export interface OutFrame extends Omit<Frame, "payload"> {
  payload: Record<string, unknown> | EncodedJson;
}

/**
 * A frame every subscriber of a topic gets alike (a broadcast, a presence diff, a change): encoded once per
 * topic and vsn, to the bytes each socket then sends. As Phoenix's fastlane, it has no join_ref or ref (both
 * null): they are what makes one session's frame differ from another's.
 */
export class SharedFrame {
  /** By vsn ("1.0.0", "2.0.0"), the encoded frame of each topic. */
  private readonly encoded = [new Map<string, Buffer>(), new Map<string, Buffer>()];

  constructor(
    readonly event: string,
    readonly payload: EncodedJson,
  ) {}

  bytes(topic: string, vsn: Vsn): Buffer {
    const byTopic = this.encoded[vsn === "2.0.0" ? 1 : 0];
    let bytes = byTopic.get(topic);
    if (!bytes) {
      const frame = { join_ref: null, ref: null, topic, event: this.event, payload: this.payload };
      byTopic.set(topic, (bytes = Buffer.from(encodeFrame(frame, vsn))));
    }
    return bytes;
  }
}

/** Kind byte of realtime-js' binary user broadcast push. */
const USER_BROADCAST_PUSH = 3;
const JSON_ENCODING = 1;

function asPayload(v: unknown): Record<string, unknown> {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function asRef(v: unknown): string | null {
  return typeof v === "string" ? v : typeof v === "number" ? String(v) : null;
}

/** Decodes one frame, or undefined for a frame that is not a Phoenix message. */
export function decodeFrame(data: Buffer, isBinary: boolean, vsn: Vsn): Frame | undefined {
  if (isBinary) return decodeBinary(data);
  let parsed: unknown;
  try {
    parsed = JSON.parse(data.toString("utf8"));
  } catch {
    return undefined;
  }
  if (Array.isArray(parsed) && vsn === "2.0.0") {
    const [joinRef, ref, topic, event, payload] = parsed;
    if (typeof topic !== "string" || typeof event !== "string") return undefined;
    return { join_ref: asRef(joinRef), ref: asRef(ref), topic, event, payload: asPayload(payload) };
  }
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
    const m = parsed as Record<string, unknown>;
    if (typeof m.topic !== "string" || typeof m.event !== "string") return undefined;
    return {
      join_ref: asRef(m.join_ref),
      ref: asRef(m.ref),
      topic: m.topic,
      event: m.event,
      payload: asPayload(m.payload),
    };
  }
  return undefined;
}

/** A binary user broadcast: header lengths, then join_ref, ref, topic, event, metadata and the payload. */
function decodeBinary(data: Buffer): Frame | undefined {
  if (data.length < 7 || data[0] !== USER_BROADCAST_PUSH) return undefined;
  const lengths = [data[1], data[2], data[3], data[4], data[5]];
  const encoding = data[6];
  let offset = 7;
  const parts = lengths.map((n) => {
    const s = data.subarray(offset, offset + n).toString("utf8");
    offset += n;
    return s;
  });
  const [joinRef, ref, topic, event, metadata] = parts;
  if (encoding !== JSON_ENCODING) return undefined;
  let userPayload: unknown;
  try {
    userPayload = JSON.parse(data.subarray(offset).toString("utf8"));
    const meta = metadata ? (JSON.parse(metadata) as Record<string, unknown>) : {};
    return {
      join_ref: joinRef || null,
      ref: ref || null,
      topic,
      event: "broadcast",
      payload: { ...meta, type: "broadcast", event, payload: userPayload },
    };
  } catch {
    return undefined;
  }
}

/** The text frame, as JSON.stringify writes the object (vsn 1.0.0) or the array (vsn 2.0.0). */
export function encodeFrame(frame: OutFrame, vsn: Vsn): string {
  const { payload } = frame;
  const json = payload instanceof EncodedJson ? payload.json : JSON.stringify(payload);
  const [joinRef, ref, topic, event] = [frame.join_ref, frame.ref, frame.topic, frame.event].map((v) =>
    JSON.stringify(v),
  );
  return vsn === "2.0.0"
    ? `[${joinRef},${ref},${topic},${event},${json}]`
    : `{"join_ref":${joinRef},"ref":${ref},"topic":${topic},"event":${event},"payload":${json}}`;
}
