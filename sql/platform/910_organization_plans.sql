-- Plans act from this version on (src/management/billing/plans.ts): a new organization starts on `free`, as
-- on the platform. Organizations that exist already had every feature until now, so they move to
-- `enterprise` (every feature) and keep what they use; the operator changes a plan with
-- `npm run strata -- org plan <slug> <plan>`.
update platform.organizations set plan = 'enterprise' where plan = 'free';
alter table platform.organizations drop constraint if exists organizations_plan_known;
alter table platform.organizations
  add constraint organizations_plan_known check (plan in ('free', 'pro', 'team', 'enterprise'));
