-- A JIT invitation is good for one acceptance within 7 days of its making (invitations made before this
-- file get their 7 days from now).
alter table platform.jit_invites add column if not exists expires_at timestamptz not null
  default now() + interval '7 days';
