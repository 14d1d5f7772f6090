-- Stripe does not deliver events in order: the payments webhook remembers the stored subscription's
-- creation time and the time of the last subscription event it applied, and ignores older events
-- (billing/webhook.ts `supersedes`). Existing rows have neither: their next event applies.
ALTER TABLE "project_billing" ADD COLUMN "subscription_created_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "project_billing" ADD COLUMN "subscription_event_at" timestamp with time zone;