/**
 * Rewrites the `$n` placeholders of an SQL text. Only real placeholders are touched: text inside string
 * constants (`'...'`, `E'...'` with backslash escapes, dollar-quoted `$tag$...$tag$`), quoted identifiers
 * and comments (`-- ...`, nested `/* ... *\/`) is copied as it is, as is a `$` inside an identifier.
 */
export function replacePlaceholders(text: string, replace: (n: number) => string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const end = verbatimEnd(text, i);
    if (end > i) {
      out += text.slice(i, end);
      i = end;
      continue;
    }
    const placeholder = /^\$(\d+)/.exec(text.slice(i, i + 12));
    if (placeholder && !isIdentifierChar(text[i - 1])) {
      out += replace(Number(placeholder[1]));
      i += placeholder[0].length;
    } else {
      out += text[i];
      i++;
    }
  }
  return out;
}

const isIdentifierChar = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_$\u0080-\uffff]/.test(c);

/** Where the comment, constant or quoted identifier starting at `i` ends; `i` itself when none starts there. */
function verbatimEnd(text: string, i: number): number {
  const c = text[i];
  const next = text[i + 1];
  if (c === "-" && next === "-") {
    const eol = text.indexOf("\n", i);
    return eol < 0 ? text.length : eol + 1;
  }
  if (c === "/" && next === "*") return blockCommentEnd(text, i);
  if (c === '"') return quotedEnd(text, i, '"', false);
  if (c === "'") {
    const prefix = text[i - 1];
    const escapes = (prefix === "E" || prefix === "e") && !isIdentifierChar(text[i - 2]);
    return quotedEnd(text, i, "'", escapes);
  }
  if (c === "$" && !isIdentifierChar(text[i - 1])) {
    const tag = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 64));
    if (tag) {
      const close = text.indexOf(tag[0], i + tag[0].length);
      return close < 0 ? text.length : close + tag[0].length;
    }
  }
  return i;
}

/** The end of `/* ... *\/`, which nests in PostgreSQL. */
function blockCommentEnd(text: string, start: number): number {
  let depth = 0;
  let i = start;
  while (i < text.length) {
    if (text[i] === "/" && text[i + 1] === "*") {
      depth++;
      i += 2;
    } else if (text[i] === "*" && text[i + 1] === "/") {
      depth--;
      i += 2;
      if (depth === 0) return i;
    } else i++;
  }
  return text.length;
}

/** The end of a quoted run: a doubled quote stays inside; with `escapes`, so does a backslashed character. */
function quotedEnd(text: string, start: number, quote: string, escapes: boolean): number {
  let i = start + 1;
  while (i < text.length) {
    if (escapes && text[i] === "\\") i += 2;
    else if (text[i] === quote && text[i + 1] === quote) i += 2;
    else if (text[i] === quote) return i + 1;
    else i++;
  }
  return text.length;
}
