-- The retention sweep (`delete ... where timestamp < <cutoff>`, src/logs/recorder.ts) had only the
-- (project_ref, source, timestamp) index, so every sweep read all of it. Events arrive in time order, so a
-- BRIN index on the time finds the expired ones from a few range summaries, and costs a write next to nothing
-- (the range being filled is summarized later, by vacuum).
create index if not exists log_events_time_brin on platform.log_events using brin (timestamp);
