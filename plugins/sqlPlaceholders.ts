/** Rewrites `$n` placeholders outside quoted text and identifiers. */
export function replacePlaceholders(text: string, replace: (n: number) => string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < text.length && !(text[j] === c && text[j + 1] !== c)) j += text[j] === c ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === "$" && /\d/.test(text[i + 1] ?? "")) {
      let j = i + 1;
      while (/\d/.test(text[j] ?? "")) j++;
      out += replace(Number(text.slice(i + 1, j)));
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}
