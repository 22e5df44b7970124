-- The TOTP time step whose code last verified a factor: a code is accepted only for a later step, so one
-- code (seen over a shoulder, or sent twice) cannot verify a second challenge within its window.
alter table auth.mfa_factors add column if not exists last_totp_step bigint;
