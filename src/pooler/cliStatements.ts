import { Transform, type TransformCallback } from "node:stream";
import { CLI_RESET_LENGTHS, isCliReset, STRATA_RESET } from "./cliReset";

/** The statement the platform's CLI steps down from its temporary login with (utils/connect.go). */
const STEP_DOWN = "SET SESSION ROLE postgres";
const QUERY = 0x51; // 'Q': a simple query, its text
const PARSE = 0x50; // 'P': a statement to prepare: its name, its text, its parameters' types
/** Shorter messages may be the step-down. */
const STEP_DOWN_MAX = 128;
/** What a Parse message holds besides its text: the statement's name (at most 63 bytes), NULs, no parameters. */
const PARSE_EXTRA = 64 + 2 + 2;

/**
 * The client's side of a session of the platform's CLI through the listener, where two of its statements are sent
 * in Strata's terms, each only as that exact statement, simple or prepared:
 * - the step-down of its temporary logins (`cli_login_…`), `SET SESSION ROLE postgres` (on the platform the login
 *   is a member of `postgres`, the project's owner), on each connection and pool client: `postgres` is the
 *   project's owner role here, in the startup message and in that statement alike, so it is sent for the owner
 *   (which a read-only login may not become either);
 * - its reset (`db reset`, `migration down`; cliReset.ts), sent as Strata's, on the owner's sessions too.
 * Every other message passes as its bytes come; only a query or statement of a length one of them has is held
 * until whole, to be read.
 */
export class CliStatements extends Transform {
  /** The current message's type and length, while fewer than its 5 bytes have come. */
  private header = Buffer.alloc(0);
  /** Bytes of the current message's body still to come. */
  private remaining = 0;
  /** The body of a query or statement that may be one of the CLI's, held until whole to be read. */
  private held: Buffer[] | undefined;

  /** `owner` is set on the sessions of a temporary login, which step down to it. */
  constructor(private readonly owner?: string) {
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
        if (this.mayRewrite(this.header[0], this.remaining)) this.held = [];
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

  /** Whether a message of this type and body length may be a statement sent in Strata's terms. */
  private mayRewrite(type: number, length: number): boolean {
    if (type !== QUERY && type !== PARSE) return false;
    if (this.owner !== undefined && length <= STEP_DOWN_MAX) return true;
    return CLI_RESET_LENGTHS.some((n) => length > n && length <= n + PARSE_EXTRA);
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
    const statement =
      body[body.length - 1] === 0 ? this.rewrite(body.toString("utf8", 0, body.length - 1)) : undefined;
    if (statement === undefined) return Buffer.concat([this.header, body]);
    return message(QUERY, Buffer.from(`${statement}\0`));
  }

  /** Parse: the statement's name, its text (each with a NUL), then its parameters' types. */
  private parse(body: Buffer): Buffer {
    const nameEnd = body.indexOf(0);
    const textEnd = nameEnd < 0 ? -1 : body.indexOf(0, nameEnd + 1);
    const statement = textEnd < 0 ? undefined : this.rewrite(body.toString("utf8", nameEnd + 1, textEnd));
    if (statement === undefined) return Buffer.concat([this.header, body]);
    return message(
      PARSE,
      Buffer.concat([
        body.subarray(0, nameEnd + 1),
        Buffer.from(`${statement}\0`),
        body.subarray(textEnd + 1),
      ]),
    );
  }

  /** The statement sent for `text`, or undefined when it passes as it is. */
  private rewrite(text: string): string | undefined {
    if (this.owner !== undefined && text === STEP_DOWN) return `SET SESSION ROLE "${this.owner}"`;
    if (isCliReset(text)) return STRATA_RESET;
    return undefined;
  }
}

/** A typed message: its type byte, its length, its body. */
function message(type: number, body: Buffer): Buffer {
  const head = Buffer.from([type, 0, 0, 0, 0]);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
