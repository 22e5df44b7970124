-- Periodic work every Strata node of one installation could do but one should (a sweep of a shared store,
-- deleting old rows, due branch deletions): the node whose claim moves `next_due` forward does it this time.
create table if not exists platform.node_duties (
  name text primary key,
  next_due timestamptz not null
);
