-- GET /v1/oauth/authorize/project-claim: a code may carry the claim of a project (of the application's
-- organization) into the organization the user chose; the project moves when the application exchanges
-- the code with its secret.
alter table platform.oauth_codes
  add column if not exists claim_project_ref text references platform.projects (ref) on delete cascade;
