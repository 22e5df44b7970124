import type pg from "pg";
import { allRows } from "../rows";

export interface BucketRow {
  id: string;
  name: string;
  owner: string;
  created_at: Date;
  updated_at: Date;
  public: boolean;
}

/** The project's buckets, by name; none before storage's tables exist. */
export async function listBuckets(client: pg.ClientBase): Promise<BucketRow[]> {
  const exists = await client.query("select to_regclass('storage.buckets') is not null as present");
  if (!exists.rows[0].present) return [];
  return allRows<BucketRow>(
    client,
    `select id::text, name, coalesce(owner::text, '') as owner, created_at, updated_at, coalesce(public, false) as public
       from storage.buckets order by name`,
  );
}
