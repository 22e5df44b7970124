import { claimDuty } from "../../src/platform/duties";
import { startTestServer, type TestServer } from "../helpers/server";

/**
 * Periodic work every node could do but one should (platform.node_duties): of the claims made while the duty
 * is due, one wins; it is due again once its period passed. Checked on the control plane's rows.
 */

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

test("one claim of a due duty wins, the next one once its period passed", async () => {
  const pool = server.strata.ctx.platformPool;
  const claims = await Promise.all([1, 2, 3, 4].map(() => claimDuty(pool, "test-duty", 60_000)));
  expect(claims.filter(Boolean)).toHaveLength(1);
  expect(await claimDuty(pool, "test-duty", 60_000)).toBe(false);
  const { rows } = await server.controlSql(
    "select next_due > now() + interval '50 seconds' as ahead from platform.node_duties where name = 'test-duty'",
  );
  expect(rows).toEqual([{ ahead: true }]);

  // The period passed (as if a minute went by): due again, for one claim.
  await server.controlSql("update platform.node_duties set next_due = now() where name = 'test-duty'");
  const again = await Promise.all([1, 2].map(() => claimDuty(pool, "test-duty", 60_000)));
  expect(again.filter(Boolean)).toHaveLength(1);
});
