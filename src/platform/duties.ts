import type pg from "pg";

/**
 * Claims a periodic duty shared by every node of the installation: true for the one node whose claim moves
 * the duty's next due time `everyMs` forward, false while it is not due (another node did it lately). A
 * node that stops mid-duty leaves it to whichever node claims it when it is due again.
 */
export async function claimDuty(pool: pg.Pool, name: string, everyMs: number): Promise<boolean> {
  // A little short of the period, so a node ticking every `everyMs` is not a tick late because of drift.
  const { rowCount } = await pool.query(
    `insert into platform.node_duties as d (name, next_due) values ($1, now() + make_interval(secs => $2))
     on conflict (name) do update set next_due = excluded.next_due where d.next_due <= now()`,
    [name, (everyMs * 0.95) / 1000],
  );
  return rowCount === 1;
}
