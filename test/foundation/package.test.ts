import { execFile } from "node:child_process";
import { lstatSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { adminQuery, createTestDatabase, dropTestDatabase } from "../helpers/db";
import { testTempDir } from "../helpers/tempDir";

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, "../..");

/** The environment of a fresh npm: none of the `npm test` run's own npm settings. */
function freshNpmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^npm_/i.test(name)) env[name] = value;
  return { ...env, npm_config_loglevel: "error", npm_config_fund: "false", npm_config_audit: "false" };
}

/** What the app does with the preset: pg_graphql queries and mutations, each answer printed as one JSON line. */
const APP = `
import { PgGraphqlPreset } from "strata/presets/PgGraphqlPreset";
import { postgraphile } from "postgraphile";
import { makePgService } from "postgraphile/adaptors/pg";
import { grafast } from "postgraphile/grafast";
const pgl = postgraphile({
  extends: [PgGraphqlPreset],
  pgServices: [makePgService({ connectionString: process.env.DATABASE_URL, schemas: ["public"] })],
});
const { schema, resolvedPreset } = await pgl.getSchemaResult();
const answers = [];
for (const source of JSON.parse(process.argv[2])) {
  answers.push(await grafast({ schema, resolvedPreset, requestContext: {}, source }));
}
console.log(JSON.stringify(answers));
await pgl.release();
`;

/**
 * The preset as a library: `npm pack` makes a package of compiled JavaScript with type declarations and an
 * `exports` map; npm installs that tarball, and its dependencies from the registry (pristine, at the versions the
 * package pins: no patches, nothing of this checkout's node_modules), into a fresh app, which extends the preset
 * in a plain PostGraphile app and answers pg_graphql queries and mutations against a real database.
 * Optional dependencies and install scripts are left out: they only fetch the server's binaries (Node, Deno,
 * PostgreSQL, image codecs), which the preset does not use.
 */
describe("the npm package", () => {
  let dbUrl: string;
  beforeAll(async () => {
    dbUrl = await createTestDatabase();
    await adminQuery(
      `comment on schema public is '@graphql({"inflect_names": true})';
       create table public.shelf (id int primary key, label text not null);
       create table public.book (id serial primary key, shelf_id int not null references public.shelf, title text not null);
       insert into public.shelf values (1, 'first'), (2, 'second');
       insert into public.book (shelf_id, title) values (1, 'one'), (1, 'two'), (2, 'three');`,
      [],
      dbUrl,
    );
  });
  afterAll(() => dropTestDatabase(dbUrl));

  it("installs from its tarball into a fresh PostGraphile app and answers pg_graphql queries and mutations", async () => {
    const work = testTempDir("strata-pack-");
    await run(process.execPath, [path.join(ROOT, "src/cli/build-if-stale.mjs")], { cwd: ROOT });
    const { stdout } = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", work], {
      cwd: ROOT,
      env: freshNpmEnv(),
      maxBuffer: 64 * 1024 * 1024,
    });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as {
      filename: string;
      files: { path: string }[];
    }[];
    const files = packed.files.map((f) => f.path);
    expect(files).toContain("dist/presets/PgGraphqlPreset.js");
    expect(files).toContain("dist/presets/PgGraphqlPreset.d.ts");
    expect(files.some((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toBe(false);

    // Outside this checkout: nothing resolves from its node_modules.
    const app = path.join(work, "app");
    expect(path.relative(ROOT, app).startsWith("..")).toBe(true);
    await run("mkdir", [app]);
    writeFileSync(
      path.join(app, "package.json"),
      JSON.stringify({ name: "app", type: "module", private: true }),
    );
    writeFileSync(path.join(app, "app.js"), APP);
    await run(
      "npm",
      [
        "install",
        "--omit=optional",
        "--omit=dev",
        "--ignore-scripts",
        "--prefer-offline",
        path.join(work, packed.filename),
      ],
      { cwd: app, env: freshNpmEnv(), maxBuffer: 64 * 1024 * 1024 },
    );
    // The engine the app runs is the registry's, at the versions the package pins.
    const pins = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")).dependencies;
    for (const name of ["grafast", "@dataplan/pg"]) {
      const installed = path.join(app, "node_modules", name);
      expect(lstatSync(installed).isSymbolicLink()).toBe(false);
      expect(JSON.parse(readFileSync(path.join(installed, "package.json"), "utf8")).version).toBe(pins[name]);
    }

    // The preset and its plugins stand alone: nothing of the server (dist/src) is loaded by them.
    const installedDist = path.join(app, "node_modules/strata/dist");
    const presetFiles = [
      path.join(installedDist, "presets/PgGraphqlPreset.js"),
      ...readdirSync(path.join(installedDist, "plugins"))
        .filter((f) => f.endsWith(".js"))
        .map((f) => path.join(installedDist, "plugins", f)),
    ];
    for (const file of presetFiles) expect(readFileSync(file, "utf8")).not.toMatch(/require\("\.\.\/src\//);

    const sources = [
      `{ shelfCollection(orderBy: [{ id: AscNullsLast }]) { edges { node { id label bookCollection { edges { node { title } } } } } } }`,
      `mutation { insertIntoBookCollection(objects: [{ shelfId: 2, title: "four" }]) { affectedCount records { title shelf { label } } } }`,
      `mutation { updateBookCollection(set: { title: "renamed" }, filter: { shelfId: { eq: 1 } }) { affectedCount } }`,
      `mutation { deleteFromBookCollection(filter: { title: { eq: "one" } }) { records { title } } }`,
      `{ shelfCollection(filter: { id: { eq: 1 } }) { edges { node { bookCollection { edges { node { title } } } } } } bookCollection(filter: { shelfId: { eq: 2 } }) { edges { node { title } } } }`,
    ];
    const out = await run(process.execPath, ["app.js", JSON.stringify(sources)], {
      cwd: app,
      env: { ...process.env, NODE_PATH: "", DATABASE_URL: dbUrl },
    });
    const books = (...titles: string[]) => ({ edges: titles.map((title) => ({ node: { title } })) });
    expect(JSON.parse(out.stdout.trim().split("\n").pop()!)).toEqual([
      {
        data: {
          shelfCollection: {
            edges: [
              { node: { id: 1, label: "first", bookCollection: books("one", "two") } },
              { node: { id: 2, label: "second", bookCollection: books("three") } },
            ],
          },
        },
      },
      {
        data: {
          insertIntoBookCollection: {
            affectedCount: 1,
            records: [{ title: "four", shelf: { label: "second" } }],
          },
        },
      },
      // Past atMost (1): pg_graphql's refusal, and the whole request rolled back.
      { data: null, errors: [{ message: "update impacts too many records" }] },
      { data: { deleteFromBookCollection: { records: [{ title: "one" }] } } },
      {
        data: {
          shelfCollection: { edges: [{ node: { bookCollection: books("two") } }] },
          bookCollection: books("three", "four"),
        },
      },
    ]);
  }, 300_000);
});
