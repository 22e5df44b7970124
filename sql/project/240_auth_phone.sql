-- Phone sign-in: a number belongs to one user, and a user has one factor per number, as on the platform.
create unique index if not exists users_phone_key on auth.users (phone);
create unique index if not exists unique_phone_factor_per_user on auth.mfa_factors (user_id, phone);
