-- With Stripe on, a project without a live subscription (active, trialing, past_due) is capped by the
-- free plan's caps (BILLING_FREE_PLAN_LIMITS, billing/limits.ts), whatever `plan_limit_*` holds; a
-- deletion now stores no plan caps (NULL). Until now it stored 0 in each: the cancelled projects'
-- rows are made the same, so that a later subscription whose price names only some caps leaves the
-- others uncapped, as on a project that never had one.
UPDATE "project_billing"
   SET "plan_limit_transactional" = NULL, "plan_limit_campaigns" = NULL, "plan_limit_workflows" = NULL, "plan_limit_inbound" = NULL
 WHERE "subscription_status" = 'canceled';
