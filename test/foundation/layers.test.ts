import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";

/**
 * The layers of README "Layout": a lower layer never imports an upper one. Read from the source's import
 * lines (`import`/`export ... from`, `import("...")` types, `declare module "..."` additions to a lower
 * module's types), as superuserModules.test.ts reads names; a file's imports of its own folder are its own.
 */
const ROOT = path.resolve(__dirname, "../..");

/** The services: each opens its requests itself, and none imports another. */
const SERVICES = [
  "src/graphql/",
  "src/rest/",
  "src/storage/",
  "src/realtime/",
  "src/functions/",
  "src/webhooks/",
  "src/auth/routes.ts",
  "src/pooler/",
];

interface Rule {
  rule: string;
  from: string;
  never: string[];
}

const RULES: Rule[] = [
  { rule: "the GraphQL preset's plugins stand alone", from: "plugins/", never: ["src/"] },
  { rule: "src/db imports no other layer", from: "src/db/", never: ["src/"] },
  { rule: "src/net imports no other layer", from: "src/net/", never: ["src/"] },
  {
    rule: "src/context.ts imports no layer above it",
    from: "src/context.ts",
    never: [
      "src/auth/",
      "src/catalog/",
      "src/http/",
      ...SERVICES,
      "src/jobs/",
      "src/management/",
      "src/dataPath.ts",
      "src/server.ts",
      "src/app.ts",
      "src/cli/",
    ],
  },
  ...["src/auth/", "src/http/", ...SERVICES, "src/jobs/"].map((from) => ({
    rule: `${from} imports nothing from the Management API`,
    from,
    never: ["src/management/"],
  })),
  ...SERVICES.map((from) => ({
    rule: `${from} imports no other service`,
    from,
    never: SERVICES.filter((other) => other !== from),
  })),
  ...[...SERVICES, "src/auth/", "src/http/"].map((from) => ({
    rule: `${from} imports no background job`,
    from,
    never: ["src/jobs/"],
  })),
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}

const SPECIFIER =
  /\bfrom\s+["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|^\s*import\s+["']([^"']+)["']|\bdeclare\s+module\s+["']([^"']+)["']/gm;

/** The modules of this tree a file imports, as paths from the root (`src/projects/runtime.ts`, `src/jobs/`). */
function importsOf(file: string): string[] {
  // Comments may name a module without importing it.
  const code = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\/|(^|[^:])\/\/.*$/gm, "$1");
  return [...code.matchAll(SPECIFIER)]
    .map((m) => m.slice(1).find((s) => s !== undefined)!)
    .filter((specifier) => specifier.startsWith("."))
    .map((specifier) => {
      const target = path.resolve(path.dirname(file), specifier);
      const found = [`${target}.ts`, path.join(target, "index.ts"), target].find((p) => existsSync(p));
      return path.relative(ROOT, found ?? target);
    });
}

const imports = [
  ...sourceFiles(path.join(ROOT, "src")),
  ...sourceFiles(path.join(ROOT, "plugins")),
  ...sourceFiles(path.join(ROOT, "presets")),
].flatMap((file) => {
  const module = path.relative(ROOT, file);
  return importsOf(file).map((target) => ({ module, target }));
});

const within = (module: string, prefix: string) => module === prefix || module.startsWith(prefix);

describe("The layers", () => {
  it("are read from the source: the server's wiring imports every layer", () => {
    const wired = imports.filter((i) => i.module === "src/app.ts").map((i) => i.target);
    expect(wired).toEqual(
      expect.arrayContaining(["src/context.ts", "src/jobs/upgrades.ts", "src/storage/backend/index.ts"]),
    );
  });

  it.each(RULES.map((r) => [r.rule, r] as const))("%s", (_rule, { from, never }) => {
    const crossing = imports
      .filter((i) => within(i.module, from) && !within(i.target, from))
      .filter((i) => never.some((upper) => within(i.target, upper)))
      .map((i) => `${i.module} -> ${i.target}`);
    expect(crossing).toEqual([]);
  });
});
