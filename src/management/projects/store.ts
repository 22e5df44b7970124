import type pg from "pg";
import { kekOf, type KeyEncryptionKey } from "../../platform/kek";
import { clusterOfRow, type Cluster } from "../../projects/clusters";
import { oneRow } from "../rows";

type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/** A project row joined with its organization and cluster, as the Management API shows it. */
export interface ProjectRow {
  id: number;
  ref: string;
  name: string;
  status: string;
  is_default: boolean;
  /** A preview branch of another project. */
  is_branch: boolean;
  database_name: string;
  created_at: Date;
  organization_id: string;
  organization_slug: string;
  cluster: Cluster;
}

const SELECT = `
  select p.id, p.ref, p.name, p.status, p.is_default, p.database_name, p.created_at,
         exists (select from platform.branches b where b.project_ref = p.ref) as is_branch,
         o.id as organization_id, o.slug as organization_slug,
         c.id as cluster_id, c.region, c.admin_url, c.authenticator_password
    from platform.projects p
    join platform.organizations o on o.id = p.organization_id
    join platform.clusters c on c.id = p.cluster_id`;

/** Only projects of organizations the user belongs to are visible. */
const VISIBLE = `exists (select from platform.organization_members m
                          where m.organization_id = p.organization_id and m.user_id = $1)`;

function toProject(row: any, kek: KeyEncryptionKey): ProjectRow {
  return { ...row, cluster: clusterOfRow(row, kek) };
}

/** The user's projects; `onlyOrganization` (an OAuth token's organization) narrows them to one's. */
export async function listProjects(
  db: pg.Pool,
  userId: string,
  onlyOrganization: string | null = null,
): Promise<ProjectRow[]> {
  const { rows } = await db.query(
    `${SELECT} where ${VISIBLE} and ($2::uuid is null or p.organization_id = $2) order by p.created_at, p.id`,
    [userId, onlyOrganization],
  );
  return rows.map((r) => toProject(r, kekOf(db)));
}

export async function findProject(
  db: Queryable,
  userId: string,
  ref: string,
): Promise<ProjectRow | undefined> {
  const { rows } = await db.query(`${SELECT} where ${VISIBLE} and p.ref = $2`, [userId, ref]);
  return rows[0] && toProject(rows[0], kekOf(db));
}

/** A project by ref, whoever's it is (for work whose access was checked another way). */
export async function findAnyProject(db: Queryable, ref: string): Promise<ProjectRow | undefined> {
  const { rows } = await db.query(`${SELECT} where p.ref = $1`, [ref]);
  return rows[0] && toProject(rows[0], kekOf(db));
}

const SORTS = {
  name_asc: "p.name asc, p.id",
  name_desc: "p.name desc, p.id",
  created_asc: "p.created_at asc, p.id",
  created_desc: "p.created_at desc, p.id desc",
} as const;

/** When the project was created: a setting it never changed has been in force since then. */
export async function projectCreatedAt(db: Queryable, ref: string): Promise<Date> {
  const { rows } = await db.query("select created_at from platform.projects where ref = $1", [ref]);
  return new Date(rows[0].created_at);
}

/** Where a project stands for a transfer: its organization and its branches. */
export async function transferSource(
  db: Queryable,
  ref: string,
): Promise<{ organization_id: string; slug: string; plan: string; branches: number; is_branch: boolean }> {
  return oneRow(
    db,
    `select p.organization_id, o.slug, o.plan,
            (select count(*)::int from platform.branches b where b.parent_project_ref = p.ref) as branches,
            exists (select from platform.branches b where b.project_ref = p.ref) as is_branch
       from platform.projects p join platform.organizations o on o.id = p.organization_id where p.ref = $1`,
    [ref],
  );
}

/** Moves a project and its branches to another organization. */
export async function moveProject(db: Queryable, ref: string, organizationId: string): Promise<void> {
  await db.query(
    `update platform.projects set organization_id = $2, updated_at = now()
      where ref = $1 or ref in (select project_ref from platform.branches where parent_project_ref = $1)`,
    [ref, organizationId],
  );
}

/** Every project still being created, whoever's. */
export async function projectsComingUp(db: pg.Pool): Promise<ProjectRow[]> {
  const { rows } = await db.query(`${SELECT} where p.status = 'COMING_UP' order by p.id`);
  return rows.map((r) => toProject(r, kekOf(db)));
}

export async function listOrganizationProjects(
  db: pg.Pool,
  organizationId: string,
  opts: { offset: number; limit: number; search?: string; sort: keyof typeof SORTS; statuses?: string[] },
): Promise<{ rows: ProjectRow[]; count: number }> {
  const where = `p.organization_id = $1
    and ($2::text is null or p.name ilike '%' || replace(replace(replace($2, '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%')
    and ($3::text[] is null or p.status = any($3))`;
  const params = [organizationId, opts.search ?? null, opts.statuses ?? null];
  const [page, total] = await Promise.all([
    db.query(`${SELECT} where ${where} order by ${SORTS[opts.sort]} offset $4 limit $5`, [
      ...params,
      opts.offset,
      opts.limit,
    ]),
    db.query(`select count(*)::int as count from platform.projects p where ${where}`, params),
  ]);
  return { rows: page.rows.map((r) => toProject(r, kekOf(db))), count: total.rows[0].count };
}

/** The cluster a new project goes to: one in the requested region when Strata knows it, else the default. */
export async function clusterFor(
  db: pg.Pool,
  region: string | undefined,
  defaultId: string,
): Promise<Cluster> {
  const { rows } = await db.query(
    `select id as cluster_id, region, admin_url, authenticator_password from platform.clusters
      order by (region = $1) desc nulls last, (id = $2) desc, id limit 1`,
    [region ?? null, defaultId],
  );
  return clusterOfRow(rows[0], kekOf(db));
}

export async function insertProject(
  db: pg.Pool,
  p: {
    ref: string;
    name: string;
    organizationId: string;
    clusterId: string;
    databaseName: string;
    jwtSecret: string;
  },
): Promise<void> {
  await db.query(
    `insert into platform.projects (ref, name, organization_id, cluster_id, database_name, status, jwt_secret)
     values ($1, $2, $3, $4, $5, 'COMING_UP', $6)`,
    [
      p.ref,
      p.name,
      p.organizationId,
      p.clusterId,
      p.databaseName,
      kekOf(db).seal(p.jwtSecret, "platform.projects.jwt_secret"),
    ],
  );
}

/**
 * Moves a project from one of `from` to `to`; returns false when it was in another state (someone else moved
 * it first).
 */
export async function setStatus(db: Queryable, ref: string, from: string[], to: string): Promise<boolean> {
  const { rowCount } = await db.query(
    "update platform.projects set status = $3, updated_at = now() where ref = $1 and status = any($2)",
    [ref, from, to],
  );
  return rowCount === 1;
}

export async function renameProject(db: pg.Pool, ref: string, name: string): Promise<void> {
  await db.query("update platform.projects set name = $2, updated_at = now() where ref = $1", [ref, name]);
}

/** A change of the row without a change of values: every process reloads the project (restart). */
export async function touchProject(db: Queryable, ref: string): Promise<void> {
  await db.query("update platform.projects set updated_at = now() where ref = $1", [ref]);
}

/**
 * Deletes the project's row, then its log events (they have no foreign key, 920_log_events_unchecked.sql): the
 * row's deletion waits for a log batch that locked it, so the second statement sees that batch's events.
 */
export async function deleteProjectRow(db: Queryable, ref: string): Promise<void> {
  await db.query("delete from platform.projects where ref = $1", [ref]);
  await db.query("delete from platform.log_events where project_ref = $1", [ref]);
}

export async function clusterRegions(db: pg.Pool): Promise<string[]> {
  const { rows } = await db.query("select distinct region from platform.clusters order by region");
  return rows.map((r) => r.region);
}
