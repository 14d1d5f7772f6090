-- The plan's caps apart from the project's own (billing/limits.ts): the payments webhook writes
-- `plan_limit_*`, PUT billing-limits writes `limit_*`, and with Stripe on the lower of the two binds,
-- so a project ADMIN can no longer lift a plan's caps (or a cancellation's 0). Until now the webhook
-- wrote the plan's caps into `limit_*`: a project with a Stripe subscription has its plan's caps
-- there, which move to `plan_limit_*`, leaving the project no caps of its own. Projects without a
-- subscription keep theirs as they are.
ALTER TABLE "project_billing" ADD COLUMN "plan_limit_transactional" integer;--> statement-breakpoint
ALTER TABLE "project_billing" ADD COLUMN "plan_limit_campaigns" integer;--> statement-breakpoint
ALTER TABLE "project_billing" ADD COLUMN "plan_limit_workflows" integer;--> statement-breakpoint
ALTER TABLE "project_billing" ADD COLUMN "plan_limit_inbound" integer;--> statement-breakpoint
UPDATE "project_billing"
   SET "plan_limit_transactional" = "limit_transactional", "plan_limit_campaigns" = "limit_campaigns",
       "plan_limit_workflows" = "limit_workflows", "plan_limit_inbound" = "limit_inbound",
       "limit_transactional" = NULL, "limit_campaigns" = NULL, "limit_workflows" = NULL, "limit_inbound" = NULL
 WHERE "stripe_subscription_id" IS NOT NULL;
