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
