-- Function bundles uploaded with `deploy?bundleOnly=true` (the CLI's multi-function deploy): stored and
-- written to disk, but not served until `PUT /v1/projects/{ref}/functions` names them by id and version.
create table if not exists platform.edge_function_bundles (
  project_ref text not null references platform.projects (ref) on delete cascade,
  -- The id the function has (or will have once the bundle is activated).
  id uuid not null,
  slug text not null,
  version integer not null,
  name text not null,
  verify_jwt boolean not null,
  entrypoint_path text,
  import_map_path text,
  files jsonb not null,
  created_at timestamptz not null default now(),
  primary key (project_ref, slug, version)
);
