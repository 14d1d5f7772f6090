-- A recipient never gets a campaign twice: at most one email per (campaign, contact).
CREATE UNIQUE INDEX IF NOT EXISTS "emails_campaign_contact_key" ON "emails" USING btree ("campaign_id","contact_id") WHERE "campaign_id" IS NOT NULL;
