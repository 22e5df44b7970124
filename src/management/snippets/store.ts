import type pg from "pg";
import { allRows, firstRow } from "../rows";

/** platform.snippets: the SQL snippets of a user, with their owner's name and their project's. */

const SELECT = `select s.*, u.username, p.id as project_id, p.name as project_name
                  from platform.snippets s join platform.users u on u.id = s.owner_id
                  left join platform.projects p on p.ref = s.project_ref`;

export type SnippetRow = Record<string, any>;

/** Whose snippets, and (an OAuth token's) the one organization their projects must be in. */
export interface SnippetOwner {
  userId: string;
  organizationId: string | null;
}

export async function listSnippets(
  pool: pg.Pool,
  owner: SnippetOwner,
  page: {
    projectRef: string | null;
    sortBy: "name" | "inserted_at";
    ascending: boolean;
    limit: number;
    offset: number;
  },
): Promise<SnippetRow[]> {
  const order = `${page.sortBy === "name" ? "s.name" : "s.inserted_at"} ${page.ascending ? "asc" : "desc"}`;
  return allRows(
    pool,
    `${SELECT}
      where s.owner_id = $1 and ($2::text is null or s.project_ref = $2)
        and ($5::uuid is null or p.organization_id = $5)
      order by ${order}, s.id limit $3 offset $4`,
    [owner.userId, page.projectRef, page.limit, page.offset, owner.organizationId],
  );
}

export async function getSnippet(pool: pg.Pool, owner: SnippetOwner, id: string) {
  return firstRow<SnippetRow>(
    pool,
    `${SELECT} where s.id::text = $1 and s.owner_id = $2 and ($3::uuid is null or p.organization_id = $3)`,
    [id, owner.userId, owner.organizationId],
  );
}

/**
 * Saves a new snippet of `owner`. A project it names must be one the owner is a member of (and, for an OAuth
 * token, which must name one, in the token's organization): otherwise nothing is written and the answer is null, as for a project that does
 * not exist. Checked in the insert itself, so a membership ending meanwhile cannot slip between check and write.
 */
export async function insertSnippet(
  pool: pg.Pool,
  owner: SnippetOwner,
  snippet: { name: string; description: string | null; projectRef: string | null; sql: string },
): Promise<string | null> {
  const row = await firstRow<{ id: string }>(
    pool,
    `insert into platform.snippets (owner_id, project_ref, name, description, content)
     select $1, $2, $3, $4, jsonb_build_object('schema_version', '1.0', 'favorite', false, 'sql', $5::text)
      where ($2::text is null and $6::uuid is null)
         or exists (select from platform.projects p
                      join platform.organization_members m on m.organization_id = p.organization_id
                     where p.ref = $2 and m.user_id = $1 and ($6::uuid is null or p.organization_id = $6))
     returning id`,
    [owner.userId, snippet.projectRef, snippet.name, snippet.description, snippet.sql, owner.organizationId],
  );
  return row?.id ?? null;
}

/** Deletes a snippet of `owner`; answers whether there was one. */
export async function deleteSnippet(pool: pg.Pool, owner: SnippetOwner, id: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    `delete from platform.snippets s where s.id::text = $1 and s.owner_id = $2
        and ($3::uuid is null or exists (select from platform.projects p
                                           where p.ref = s.project_ref and p.organization_id = $3))`,
    [id, owner.userId, owner.organizationId],
  );
  return (rowCount ?? 0) > 0;
}
