-- Two indexes of emails leave out NULLs (issue 15): a transactional email has no campaign, and no
-- email has a Message-ID before it is sent, yet each of an email's three writes (queued, claimed,
-- recorded) added an entry for the NULL. Every lookup by either column names a value. Rebuilding
-- them holds writes to emails back for the build (seconds per million emails).
DROP INDEX "emails_campaign_idx";--> statement-breakpoint
DROP INDEX "emails_project_message_id_idx";--> statement-breakpoint
CREATE INDEX "emails_campaign_idx" ON "emails" USING btree ("campaign_id","status") WHERE campaign_id IS NOT NULL;--> statement-breakpoint
CREATE INDEX "emails_project_message_id_idx" ON "emails" USING btree ("message_id") WHERE message_id IS NOT NULL;