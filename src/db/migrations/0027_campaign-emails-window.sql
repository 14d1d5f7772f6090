-- The window of a campaign's emails' created_at, written with each fan-out batch: a campaign's
-- emails list reads the project's emails of that window, not every newer one (a page of an old
-- campaign of 1,000,000 walked the 300,000 emails sent after it). docs/decisions.md § Growth.
ALTER TABLE "campaigns" ADD COLUMN "emails_from" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "campaigns" ADD COLUMN "emails_until" timestamp with time zone;