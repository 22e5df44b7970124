import { errors } from "../errors";

/**
 * PostgREST's query-string grammar (select, filters, logic trees, order), parsed into plain values.
 * Knows nothing of SQL or of the schema.
 */

export interface JsonStep {
  arrow: "->" | "->>";
  /** A key, or an array index when `index` is true. */
  key: string;
  index: boolean;
}

/** A column, possibly followed by a JSON path (`address->city`). */
export interface Field {
  name: string;
  path: JsonStep[];
}

export type SelectItem =
  | { kind: "star" }
  | { kind: "column"; field: Field; alias?: string; cast?: string }
  | {
      kind: "embed";
      relation: string;
      alias?: string;
      hint?: string;
      inner: boolean;
      spread: boolean;
      children: SelectItem[];
    };

export type IsTest = "null" | "not_null" | "true" | "false" | "unknown";

/** A filter's right-hand side, parsed for its operator: `is` tests, lists for `in` and quantifiers, else text. */
export type Operand =
  { kind: "text"; text: string } | { kind: "list"; items: string[] } | { kind: "is"; test: IsTest };

export interface Filter {
  kind: "filter";
  field: Field;
  negate: boolean;
  operator: string;
  quantifier?: "any" | "all";
  /** fts language, as in `fts(english)`. */
  language?: string;
  operand: Operand;
}

export interface LogicTree {
  kind: "logic";
  operator: "and" | "or";
  negate: boolean;
  children: (LogicTree | Filter)[];
}

export interface OrderTerm {
  /** Set when ordering by a to-one embed's column: `rel(col)`. */
  relation?: string;
  field: Field;
  direction?: "asc" | "desc";
  nulls?: "first" | "last";
}

export const OPERATORS = new Set([
  "eq",
  "neq",
  "gt",
  "gte",
  "lt",
  "lte",
  "like",
  "ilike",
  "match",
  "imatch",
  "in",
  "is",
  "isdistinct",
  "cs",
  "cd",
  "ov",
  "sl",
  "sr",
  "nxl",
  "nxr",
  "adj",
  "fts",
  "plfts",
  "phfts",
  "wfts",
]);

/** Splits on `sep` at nesting depth 0, outside double quotes. */
export function splitTopLevel(input: string, sep = ","): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c === "\\" && quoted) {
      i++;
      continue;
    }
    if (c === '"') quoted = !quoted;
    else if (!quoted && c === "(") depth++;
    else if (!quoted && c === ")") depth--;
    else if (!quoted && depth === 0 && c === sep) {
      parts.push(input.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(input.slice(start));
  return parts;
}

function unquote(name: string): string {
  const t = name.trim();
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) return t.slice(1, -1).replace(/\\(.)/g, "$1");
  return t;
}

/** `col`, `col->a->>b`, `col->0`, `"quoted col"->k`. */
export function parseField(input: string, what = "select"): Field {
  const text = input.trim();
  const m = /^("(?:[^"\\]|\\.)*"|[^-:>]+?(?:-(?!>)[^-:>]*)*)((?:->>?[^->]+(?:-(?!>)[^->]*)*)*)$/.exec(text);
  if (!m || m[1].trim() === "")
    throw errors.parse(what, input, 1, `unexpected "${text[0] ?? ""}" expecting field name`);
  const path: JsonStep[] = [];
  const stepRe = /(->>?)((?:[^->]|-(?!>))+)/g;
  let s: RegExpExecArray | null;
  while ((s = stepRe.exec(m[2]))) {
    const key = unquote(s[2]);
    path.push({ arrow: s[1] as "->" | "->>", key, index: /^-?\d+$/.test(key) });
  }
  return { name: unquote(m[1]), path };
}

/** The output key of a column: its alias, else the last JSON key, else the column's name. */
export function outputName(field: Field, alias?: string): string {
  if (alias) return alias;
  return field.path.length ? field.path[field.path.length - 1].key : field.name;
}

const CAST_RE = /^[a-z_][a-z0-9_ ]*(\[\])?$/i;

function parseSelectItem(raw: string, whole: string): SelectItem {
  let text = raw.trim();
  if (text === "*") return { kind: "star" };
  let spread = false;
  if (text.startsWith("...")) {
    spread = true;
    text = text.slice(3).trim();
  }
  let alias: string | undefined;
  const aliasMatch = /^("(?:[^"\\]|\\.)*"|[^:("]+):(?!:)/.exec(text);
  if (aliasMatch) {
    alias = unquote(aliasMatch[1]);
    text = text.slice(aliasMatch[0].length).trim();
  }
  const open = text.indexOf("(");
  if (open >= 0 && text.endsWith(")") && !text.startsWith('"') ? true : open >= 0 && text.endsWith(")")) {
    const head = text.slice(0, open).trim();
    const inner = text.slice(open + 1, -1);
    const [nameRaw, ...marks] = splitTopLevel(head, "!");
    let hint: string | undefined;
    let isInner = false;
    for (const mark of marks.map((x) => x.trim())) {
      if (mark === "inner") isInner = true;
      else if (mark === "left") isInner = false;
      else hint = unquote(mark);
    }
    const children = inner.trim() === "" ? [] : splitTopLevel(inner).map((c) => parseSelectItem(c, whole));
    return { kind: "embed", relation: unquote(nameRaw), alias, hint, inner: isInner, spread, children };
  }
  if (spread) throw errors.parse("select", whole, 1, "a spread must embed a relationship");
  let cast: string | undefined;
  const castAt = text.lastIndexOf("::");
  if (castAt > 0) {
    cast = text.slice(castAt + 2).trim();
    text = text.slice(0, castAt);
    if (!CAST_RE.test(cast))
      throw errors.parse("select", whole, castAt + 3, `unexpected cast type "${cast}"`);
  }
  return { kind: "column", field: parseField(text), alias, cast };
}

export function parseSelect(input: string): SelectItem[] {
  if (input.trim() === "") return [{ kind: "star" }];
  return splitTopLevel(input).map((item) => parseSelectItem(item, input));
}

/** `[not.]op[(lang|any|all)].value` — the right-hand side of a filter parameter. */
export function parseFilterValue(field: Field, rhs: string, whole: string): Filter {
  let rest = rhs;
  let negate = false;
  if (rest.startsWith("not.")) {
    negate = true;
    rest = rest.slice(4);
  }
  const m = /^([a-z]+)(?:\(([^)]*)\))?\.([\s\S]*)$/.exec(rest);
  if (!m || !OPERATORS.has(m[1])) {
    throw errors.parse("filter", whole, 1, `unknown or malformed operator in "${rhs}"`);
  }
  const [, operator, modifier, value] = m;
  let language: string | undefined;
  let quantifier: Filter["quantifier"];
  if (modifier !== undefined) {
    if (["fts", "plfts", "phfts", "wfts"].includes(operator)) language = modifier;
    else if (
      (modifier === "any" || modifier === "all") &&
      ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "match", "imatch"].includes(operator)
    )
      quantifier = modifier;
    else throw errors.parse("filter", whole, 1, `unexpected modifier "${modifier}" for operator ${operator}`);
  }
  const filter: Filter = {
    kind: "filter",
    field,
    negate,
    operator,
    operand: parseOperand(operator, value, !!quantifier),
  };
  if (language !== undefined) filter.language = language;
  if (quantifier) filter.quantifier = quantifier;
  return filter;
}

const IS_TESTS = new Set<string>(["null", "not_null", "true", "false", "unknown"]);

function parseOperand(operator: string, value: string, quantified: boolean): Operand {
  if (operator === "is") {
    const test = value.toLowerCase();
    if (!IS_TESTS.has(test)) {
      throw errors.parse(
        "filter",
        `is.${value}`,
        4,
        `unexpected "${value}" expecting null, not_null, true, false or unknown`,
      );
    }
    return { kind: "is", test: test as IsTest };
  }
  if (operator === "in" || quantified) return { kind: "list", items: parseList(value) };
  return { kind: "text", text: value };
}

/** `(a.eq.1,and(b.gt.2,c.is.null))` after `or=` / `and=` / `not.or=`. */
export function parseLogicTree(
  operator: "and" | "or",
  negate: boolean,
  input: string,
  whole = input,
): LogicTree {
  const text = input.trim();
  if (!text.startsWith("(") || !text.endsWith(")")) {
    throw errors.parse("logic tree", whole, 1, `expecting "(" at the start of the logic tree`);
  }
  const children = splitTopLevel(text.slice(1, -1)).map((part) => {
    const p = part.trim();
    const nested = /^(not\.)?(and|or)(\([\s\S]*\))$/.exec(p);
    if (nested) return parseLogicTree(nested[2] as "and" | "or", !!nested[1], nested[3], whole);
    const dot = p.indexOf(".");
    if (dot <= 0) throw errors.parse("logic tree", whole, 1, `unexpected "${p}" expecting a filter`);
    // A field can hold JSON arrows but no dots; the rest is the operator and its value.
    return parseFilterValue(parseField(p.slice(0, dot), "logic tree"), p.slice(dot + 1), whole);
  });
  return { kind: "logic", operator, negate, children };
}

export function parseOrder(input: string): OrderTerm[] {
  const terms: OrderTerm[] = [];
  let offset = 0;
  for (const raw of splitTopLevel(input)) {
    const text = raw.trim();
    const m = /^(?:([^(.]+)\(([^)]+)\)|([^.]+))((?:\.[a-z]+)*)$/.exec(text);
    if (!m) throw errors.parse("order", input, offset + 1, `unexpected "${text}"`);
    const term: OrderTerm = m[1]
      ? { relation: unquote(m[1]), field: parseField(m[2], "order") }
      : { field: parseField(m[3], "order") };
    let pos = offset + (m[1] ? m[1].length + m[2].length + 2 : m[3].length);
    const mods = m[4] ? m[4].slice(1).split(".") : [];
    for (let i = 0; i < mods.length; i++) {
      const mod = mods[i];
      if ((mod === "asc" || mod === "desc") && i === 0) term.direction = mod;
      else if ((mod === "nullsfirst" || mod === "nullslast") && !term.nulls)
        term.nulls = mod === "nullsfirst" ? "first" : "last";
      else {
        const expected = term.nulls || i >= 1 ? `"," or end of input` : `delimiter (.), "," or end of input`;
        const valid = ["asc", "desc", "nullsfirst", "nullslast"].find((v) => mod.startsWith(v) && mod !== v);
        const col = valid ? pos + 1 + valid.length + 1 : pos + 2;
        const bad = valid ? mod[valid.length] : mod[0];
        throw errors.parse("order", input, col, `unexpected '${bad}' expecting ${expected}`);
      }
      pos += mod.length + 1;
    }
    terms.push(term);
    offset += raw.length + 1;
  }
  return terms;
}

/** A comma-separated list of column names (`columns=`, `on_conflict=`), double quotes allowed. */
export function parseColumnList(value: string): string[] {
  return splitTopLevel(value).map(unquote);
}

/** Items of `in.(a,"b,c")` / quantifier lists `{a,b}`. */
export function parseList(value: string): string[] {
  const text = value.trim();
  const inner = /^[({]([\s\S]*)[)}]$/.exec(text)?.[1];
  if (inner === undefined)
    throw errors.parse("filter", value, 1, `expecting a list in parentheses: "${value}"`);
  if (inner.trim() === "") return [];
  return splitTopLevel(inner).map((item) => unquote(item));
}
