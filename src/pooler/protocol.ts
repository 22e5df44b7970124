/**
 * The few messages of the PostgreSQL wire protocol (v3) the listener reads or writes itself: the first message a
 * client sends (SSLRequest, GSSENCRequest, CancelRequest or StartupMessage), a FATAL ErrorResponse, and the server's
 * messages up to the end of authentication. Everything else passes through as bytes.
 *
 * Written here because no maintained server-side library is installed (pg-gateway would fit); `pg-protocol`, which
 * is, parses the server's messages only for a client.
 */

export const SSL_REQUEST = 80877103;
export const GSSENC_REQUEST = 80877104;
export const CANCEL_REQUEST = 80877102;
/** Protocol 3.0, as every client of PostgreSQL 14+ opens with (minor versions are negotiated by the server). */
const PROTOCOL_MAJOR = 3;
/** A startup message longer than this is no client's (PostgreSQL's own limit is 10000 bytes). */
export const MAX_STARTUP_LENGTH = 10_000;

export type FirstMessage =
  | { kind: "ssl" }
  | { kind: "gssenc" }
  | { kind: "cancel"; bytes: Buffer }
  | { kind: "startup"; version: number; params: Map<string, string> }
  | { kind: "invalid"; reason: string };

/** The length of the untyped first message at the head of `buffer`, or undefined while fewer than 4 bytes came. */
export function firstMessageLength(buffer: Buffer): number | undefined {
  return buffer.length < 4 ? undefined : buffer.readInt32BE(0);
}

/** Reads one complete untyped first message (its length word included). */
export function parseFirstMessage(message: Buffer): FirstMessage {
  if (message.length < 8 || message.length > MAX_STARTUP_LENGTH)
    return { kind: "invalid", reason: "bad length" };
  const code = message.readInt32BE(4);
  if (code === SSL_REQUEST && message.length === 8) return { kind: "ssl" };
  if (code === GSSENC_REQUEST && message.length === 8) return { kind: "gssenc" };
  if (code === CANCEL_REQUEST) return { kind: "cancel", bytes: message };
  if (code >>> 16 !== PROTOCOL_MAJOR) return { kind: "invalid", reason: "unsupported protocol version" };
  const params = new Map<string, string>();
  let i = 8;
  for (;;) {
    const keyEnd = message.indexOf(0, i);
    if (keyEnd < 0) return { kind: "invalid", reason: "unterminated startup message" };
    if (keyEnd === i) break;
    const valueEnd = message.indexOf(0, keyEnd + 1);
    if (valueEnd < 0) return { kind: "invalid", reason: "unterminated startup message" };
    params.set(message.toString("utf8", i, keyEnd), message.toString("utf8", keyEnd + 1, valueEnd));
    i = valueEnd + 1;
  }
  return { kind: "startup", version: code, params };
}

/** A StartupMessage of `version` with `params`. */
export function startupMessage(version: number, params: Map<string, string>): Buffer {
  const body = Buffer.concat([
    ...[...params].map(([k, v]) => Buffer.from(`${k}\0${v}\0`, "utf8")),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + body.length, 0);
  head.writeInt32BE(version, 4);
  return Buffer.concat([head, body]);
}

/** A FATAL ErrorResponse with SQLSTATE `code`, as the server sends it before closing. */
export function fatalError(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`, "utf8");
  const head = Buffer.alloc(5);
  head.write("E", 0, "latin1");
  head.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/** A message of the server: its type byte and its body. */
export interface ServerMessage {
  type: string;
  body: Buffer;
}

/**
 * Splits the server's bytes into messages as they come; `push` answers the messages completed by a chunk.
 * A length below 4 or above `maxLength` is no server's: the reader throws.
 */
export class ServerMessageReader {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly maxLength = 1 << 20) {}

  push(chunk: Buffer): ServerMessage[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: ServerMessage[] = [];
    while (this.pending.length >= 5) {
      const length = this.pending.readInt32BE(1);
      if (length < 4 || length > this.maxLength) throw new Error("malformed server message");
      if (this.pending.length < 1 + length) break;
      out.push({ type: this.pending.toString("latin1", 0, 1), body: this.pending.subarray(5, 1 + length) });
      this.pending = this.pending.subarray(1 + length);
    }
    return out;
  }
}

/** The SQLSTATE of an ErrorResponse body ('C' field). */
export function errorCode(body: Buffer): string | undefined {
  let i = 0;
  while (i < body.length && body[i] !== 0) {
    const end = body.indexOf(0, i + 1);
    if (end < 0) return undefined;
    if (body[i] === 0x43) return body.toString("utf8", i + 1, end);
    i = end + 1;
  }
  return undefined;
}
