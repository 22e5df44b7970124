import { Transform, type TransformCallback } from "node:stream";

/** The statement the platform's CLI steps down from its temporary login with (utils/connect.go). */
const STEP_DOWN = "SET SESSION ROLE postgres";
const QUERY = 0x51; // 'Q': a simple query, its text
const PARSE = 0x50; // 'P': a statement to prepare: its name, its text, its parameters' types
/** Longer messages cannot be the step-down: they pass as they come. */
const HELD_MAX = 128;

/**
 * The client's side of a session of the platform CLI's temporary login (`cli_login_…`). The CLI steps down from
 * that login with `SET SESSION ROLE postgres` (on the platform the login is a member of `postgres`, the project's
 * owner), on each connection and pool client. Through the listener `postgres` is the project's owner role, in the
 * startup message and in that statement alike: that exact statement, as a simple query or a prepared one (its
 * migrations run it in their batch), is sent for the owner (which a read-only login may not become either).
 * Every other message passes as its bytes come, unbuffered.
 */
export class StepDown extends Transform {
  /** The current message's type and length, while fewer than its 5 bytes have come. */
  private header = Buffer.alloc(0);
  /** Bytes of the current message's body still to come. */
  private remaining = 0;
  /** The body of a short query or statement, held until whole to be read. */
  private held: Buffer[] | undefined;

  constructor(private readonly owner: string) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const out: Buffer[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.header.length < 5) {
        const take = Math.min(5 - this.header.length, chunk.length - at);
        this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)]);
        at += take;
        if (this.header.length < 5) break;
        const length = this.header.readInt32BE(1);
        if (length < 4) return done(new Error("malformed client message"));
        this.remaining = length - 4;
        const type = this.header[0];
        if ((type === QUERY || type === PARSE) && this.remaining <= HELD_MAX) this.held = [];
        else out.push(this.header);
      } else {
        const part = chunk.subarray(at, at + Math.min(this.remaining, chunk.length - at));
        at += part.length;
        this.remaining -= part.length;
        (this.held ?? out).push(part);
      }
      if (this.header.length === 5 && this.remaining === 0) this.endMessage(out);
    }
    done(null, Buffer.concat(out));
  }

  private endMessage(out: Buffer[]): void {
    if (this.held) {
      const body = Buffer.concat(this.held);
      out.push(this.header[0] === QUERY ? this.query(body) : this.parse(body));
      this.held = undefined;
    }
    this.header = Buffer.alloc(0);
  }

  /** A simple query: its text and a NUL. */
  private query(body: Buffer): Buffer {
    if (body.toString("utf8") !== `${STEP_DOWN}\0`) return Buffer.concat([this.header, body]);
    return message(QUERY, Buffer.from(`${this.ownerStatement()}\0`));
  }

  /** Parse: the statement's name, its text (each with a NUL), then its parameters' types. */
  private parse(body: Buffer): Buffer {
    const nameEnd = body.indexOf(0);
    const textEnd = nameEnd < 0 ? -1 : body.indexOf(0, nameEnd + 1);
    if (textEnd < 0 || body.toString("utf8", nameEnd + 1, textEnd) !== STEP_DOWN)
      return Buffer.concat([this.header, body]);
    return message(
      PARSE,
      Buffer.concat([
        body.subarray(0, nameEnd + 1),
        Buffer.from(`${this.ownerStatement()}\0`),
        body.subarray(textEnd + 1),
      ]),
    );
  }

  private ownerStatement(): string {
    return `SET SESSION ROLE "${this.owner}"`;
  }
}

/** A typed message: its type byte, its length, its body. */
function message(type: number, body: Buffer): Buffer {
  const head = Buffer.from([type, 0, 0, 0, 0]);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
