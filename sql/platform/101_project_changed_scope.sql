-- Storing the passwords of a project's SQL roles (done when the project is first opened) changes nothing
-- the running processes hold: it must not make them all reload the project.
drop trigger if exists project_changed on platform.projects;
create trigger project_changed after update on platform.projects
  for each row
  when ((to_jsonb(old) - 'sql_role_password' - 'read_role_password')
        is distinct from (to_jsonb(new) - 'sql_role_password' - 'read_role_password'))
  execute function platform.notify_project_changed();
drop trigger if exists project_deleted on platform.projects;
create trigger project_deleted after delete on platform.projects
  for each row execute function platform.notify_project_changed();
