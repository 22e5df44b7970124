import { CLI_RESET_LENGTHS, isCliReset, STRATA_RESET } from "../../src/pooler/cliReset";
import { CliStatements } from "../../src/pooler/cliStatements";

/**
 * The listener's rewriting of the platform CLI's statements, on the bytes: only the exact statements, whole or
 * split across chunks, simple or prepared; every other message passes byte for byte.
 */

/** A client message: type, length, body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
const query = (text: string) => message("Q", Buffer.from(`${text}\0`));
const parse = (text: string) => message("P", Buffer.concat([Buffer.from(`s1\0${text}\0`), Buffer.alloc(2)]));

/** What the transform sends for `input`, fed in chunks of `size` bytes. */
async function through(input: Buffer, size: number, owner?: string): Promise<Buffer> {
  const t = new CliStatements(owner);
  const out: Buffer[] = [];
  t.on("data", (d: Buffer) => out.push(d));
  for (let at = 0; at < input.length; at += size) t.write(input.subarray(at, at + size));
  await new Promise((resolve) => t.end(resolve));
  return Buffer.concat(out);
}

/** A text of the reset's length that is not the reset (the CLI's own text is not in the repository). */
const NEAR_MISS = "x".repeat(CLI_RESET_LENGTHS[0]);

describe("the CLI's statements through the listener", () => {
  it("recognises the reset by its exact bytes only", () => {
    expect(isCliReset(NEAR_MISS)).toBe(false);
    expect(isCliReset(STRATA_RESET)).toBe(false);
  });

  it("passes every other message byte for byte, whole or split, simple or prepared", async () => {
    const input = Buffer.concat([
      query("select 1"),
      query(NEAR_MISS),
      parse(NEAR_MISS),
      message("S", Buffer.alloc(0)),
      query("SET SESSION ROLE postgres"),
    ]);
    for (const size of [1, 7, 4096, input.length]) expect(await through(input, size)).toEqual(input);
  });

  it("sends the step-down for the owner on a temporary login's session only", async () => {
    const input = Buffer.concat([query("SET SESSION ROLE postgres"), parse("SET SESSION ROLE postgres")]);
    const expected = Buffer.concat([
      query('SET SESSION ROLE "postgres_abc"'),
      parse('SET SESSION ROLE "postgres_abc"'),
    ]);
    for (const size of [1, 3, input.length])
      expect(await through(input, size, "postgres_abc")).toEqual(expected);
  });
});
