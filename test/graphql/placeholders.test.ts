import { replacePlaceholders } from "../../plugins/pgGqlPlaceholders";

/** The SQL lexer the mutations plugin renumbers a records statement's placeholders with. */
describe("replacePlaceholders", () => {
  const renumbered = (text: string) => replacePlaceholders(text, (n) => `$${n + 10}`);

  it("rewrites every real placeholder, casts and multi-digit numbers included", () => {
    expect(renumbered("select $1::int, $12, f($2,$3)")).toBe("select $11::int, $22, f($12,$13)");
  });

  it("copies string constants, escape strings and dollar-quoted bodies as they are", () => {
    expect(renumbered("select '$1', 'it''s $2', $3")).toBe("select '$1', 'it''s $2', $13");
    expect(renumbered("select E'\\' $1', $2")).toBe("select E'\\' $1', $12");
    expect(renumbered("select $$ $1 $$, $tag$ $2 $$ $tag$, $3")).toBe(
      "select $$ $1 $$, $tag$ $2 $$ $tag$, $13",
    );
  });

  it("copies quoted identifiers, identifiers holding a $ and comments as they are", () => {
    expect(renumbered('select "a$1", "say ""$2""", b$3, $4')).toBe('select "a$1", "say ""$2""", b$3, $14');
    expect(renumbered("select $1 -- $2\n, /* $3 /* $4 */ $5 */ $6")).toBe(
      "select $11 -- $2\n, /* $3 /* $4 */ $5 */ $16",
    );
  });

  it("leaves an unterminated constant or comment as it is to the end", () => {
    expect(renumbered("select $1, 'open $2")).toBe("select $11, 'open $2");
    expect(renumbered("select $1 /* open $2")).toBe("select $11 /* open $2");
  });
});
