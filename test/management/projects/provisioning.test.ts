import { startStrata, type RunningStrata } from "../../../src/app";
import { loadConfig } from "../../../src/config";
import { createLogger } from "../../../src/log";
import { adminQuery } from "../../helpers/db";
import { startTestServer, TEST_JWT_SECRET, type TestServer, TEST_KEK } from "../../helpers/server";
import { mgmt, waitForStatus } from "../client";
import { testTempDir } from "../../helpers/tempDir";

describe("project creation interrupted by a dying process", () => {
  let server: TestServer;
  let restarted: RunningStrata | undefined;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await restarted?.stop();
    await server.stop();
  });

  it("is finished by the next Strata process that starts", async () => {
    // What a process leaves when it dies while creating a project: a COMING_UP row and a bare database.
    const ref = "interruptedprojectab";
    const database = `project_${ref}`;
    await server.controlSql(
      `insert into platform.projects (ref, name, organization_id, cluster_id, database_name, status, jwt_secret)
       select $1, 'interrupted', o.id, 'local', $2, 'COMING_UP', 'a-secret-of-at-least-thirty-two-chars'
         from platform.organizations o where o.slug = 'default-org'`,
      [ref, database],
    );
    await adminQuery(`create database ${database}`);

    restarted = await startStrata(
      loadConfig({
        DATABASE_URL: server.dbUrl,
        PORT: "0",
        JWT_SECRET: TEST_JWT_SECRET,
        AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
        STRATA_KEK: TEST_KEK,
        STRATA_DATA_DIR: testTempDir("strata-resume-"),
      }),
      createLogger("silent"),
    );
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    const roles = await adminQuery(
      "select count(*)::int as n from _strata.bootstrap where set_name = 'project'",
      [],
      server.dbUrl.replace(/\/[^/]+$/, `/${database}`),
    );
    expect(roles.rows[0].n).toBeGreaterThan(0);
    // The row was written in plain text, as by a version before sealing: the start sealed it.
    const secret = await server.controlSql("select jwt_secret from platform.projects where ref = $1", [ref]);
    expect(secret.rows[0].jwt_secret).toMatch(/^kek1:/);
    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}`)).status).toBe(200);
  });
});
