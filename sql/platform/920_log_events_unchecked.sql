-- Log events keep their project without a foreign key. The key's check ran once per event (a row lock on the
-- project for each of a batch's hundreds of rows: about half the cost of writing an API request's event);
-- instead a batch locks each of its projects once (`for key share`, src/logs/recorder.ts) and a project's
-- deletion deletes its events after its row (src/management/projects/store.ts), which waits for a batch that
-- holds the lock, so no event outlives its project.
alter table platform.log_events drop constraint if exists log_events_project_ref_fkey;
