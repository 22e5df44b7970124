import { makePgService } from "@dataplan/pg/adaptors/pg";
import { grafast, type OperationPlan } from "grafast";
import { parse, specifiedRules, validate, type ValidationRule } from "grafast/graphql";
import { makeSchema } from "graphile-build";
import pg from "pg";
import { PgGqlLimitsPlugin } from "../../plugins/PgGqlLimitsPlugin";
import { PgGraphqlPreset } from "../../presets/PgGraphqlPreset";
import { createTestDatabase, dropTestDatabase } from "../helpers/db";

describe("PgGraphqlPreset in a plain PostGraphile v5 app", () => {
  let dbUrl: string;
  let pool: pg.Pool;
  beforeAll(async () => {
    dbUrl = await createTestDatabase();
    pool = new pg.Pool({ connectionString: dbUrl, max: 2 });
    await pool.query(
      `create table public.blog_post(id int primary key, title text not null);
       insert into public.blog_post values (1, 'hello'), (2, 'world');`,
    );
  });
  afterAll(async () => {
    await pool.end();
    await dropTestDatabase(dbUrl);
  });

  it("builds the pg_graphql schema with extends: [PgGraphqlPreset] and answers a query", async () => {
    const { schema, resolvedPreset } = await makeSchema({
      extends: [PgGraphqlPreset],
      pgServices: [makePgService({ pool, schemas: ["public"] })],
    });
    const result = await grafast({
      schema,
      resolvedPreset,
      requestContext: {},
      source: `{ blog_postCollection(filter: { id: { gt: 1 } }) { edges { cursor node { nodeId title } } } }`,
    });
    expect(result).toEqual({
      data: {
        blog_postCollection: {
          edges: [
            {
              cursor: Buffer.from("[2]").toString("base64"),
              node: {
                nodeId: Buffer.from('["public", "blog_post", 2]').toString("base64"),
                title: "world",
              },
            },
          ],
        },
      },
    });
  });

  /** `n` aliased `__typename`s. */
  const aliases = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: __typename`).join(" ")} }`;

  it("refuses a document beyond its limits in grafast(), and takes other limits from the preset", async () => {
    const withLimits = (pgGraphql?: GraphileConfig.Preset["pgGraphql"]) =>
      makeSchema({
        extends: [PgGraphqlPreset],
        pgServices: [makePgService({ pool, schemas: ["public"] })],
        pgGraphql,
      });
    const run = async (preset: Awaited<ReturnType<typeof withLimits>>, source: string) =>
      grafast({ schema: preset.schema, resolvedPreset: preset.resolvedPreset, requestContext: {}, source });
    const defaults = await withLimits();
    expect(await run(defaults, aliases(101))).toEqual({
      errors: [expect.objectContaining({ message: "The operation has more than 100 aliases" })],
    });
    // Past the token limit parsing stops: a syntax error, answered with `data: null` as pg_graphql answers one.
    expect(await run(defaults, `{ ${"__typename ".repeat(15_001)}}`)).toEqual({
      data: null,
      errors: [expect.objectContaining({ message: expect.stringMatching(/more that 15000 tokens/) })],
    });
    const raised = await withLimits({ maxAliases: 200 });
    expect(await run(raised, aliases(101))).toEqual({
      data: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`a${i}`, "Query"])),
    });
  });

  it("reuses grafast's plan for a repeated document (seen through grafast's establishOperationPlan middleware)", async () => {
    const plans: OperationPlan[] = [];
    const PlanWatchPlugin: GraphileConfig.Plugin = {
      name: "PlanWatchPlugin",
      version: "0.0.0",
      grafast: {
        middleware: {
          establishOperationPlan(next) {
            const plan = next();
            plans.push(plan);
            return plan;
          },
        },
      },
    };
    const { schema, resolvedPreset } = await makeSchema({
      extends: [PgGraphqlPreset],
      plugins: [PlanWatchPlugin],
      pgServices: [makePgService({ pool, schemas: ["public"] })],
    });
    const source = "{ blog_postCollection { edges { node { title } } } }";
    for (const query of [source, source, `${source} `]) {
      await grafast({ schema, resolvedPreset, requestContext: {}, source: query });
    }
    expect(plans).toHaveLength(3);
    expect(plans[1]).toBe(plans[0]);
    expect(plans[2]).not.toBe(plans[0]);
  });

  it("gives grafserv a validation rule that refuses a document beyond its limits before any other rule runs", async () => {
    const { schema, resolvedPreset } = await makeSchema({
      extends: [PgGraphqlPreset],
      pgServices: [makePgService({ pool, schemas: ["public"] })],
    });
    let otherRuleRan = 0;
    const otherRule: ValidationRule = () => {
      otherRuleRan++;
      return {};
    };
    // What grafserv does when it takes the preset: its middleware may change the validation rules.
    const event = { resolvedPreset, validationRules: [...specifiedRules, otherRule] };
    const setPreset = PgGqlLimitsPlugin.grafserv?.middleware?.setPreset as unknown as (
      next: () => void,
      event: { validationRules: ValidationRule[] },
    ) => void;
    setPreset(() => undefined, event);
    const rules = event.validationRules;
    expect(validate(schema, parse(`{ ${"__typename ".repeat(1_001)}}`), rules).map((e) => e.message)).toEqual(
      ["The operation selects more than 1000 fields (a fragment counts at every spread)"],
    );
    expect(otherRuleRan).toBe(0);
    expect(validate(schema, parse("{ blog_postCollection { edges { node { title } } } }"), rules)).toEqual(
      [],
    );
    expect(otherRuleRan).toBe(1);
  });
});
