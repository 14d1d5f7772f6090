-- events becomes partitioned by month (UTC) on created_at (issue 15). Drizzle cannot declare
-- partitioning, so the table is rebuilt here with the same columns, keys and indexes, and its rows
-- are copied over; events/partitions.ts creates the months ahead from now on. The primary key takes
-- created_at (every unique key of a partitioned table includes its partition key).
ALTER TABLE "events" RENAME TO "events_unpartitioned";--> statement-breakpoint
ALTER TABLE "events_unpartitioned" DROP CONSTRAINT "events_pkey";--> statement-breakpoint
DROP INDEX "events_project_created_idx";--> statement-breakpoint
DROP INDEX "events_project_name_created_idx";--> statement-breakpoint
DROP INDEX "events_contact_name_created_idx";--> statement-breakpoint
DROP INDEX "events_contact_created_idx";--> statement-breakpoint
DROP INDEX "events_campaign_clicks_idx";--> statement-breakpoint
CREATE TABLE "events" (
	"id" text NOT NULL,
	"project_id" text NOT NULL,
	"contact_id" text,
	"name" text NOT NULL,
	"data" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "events_id_created_at_pk" PRIMARY KEY("id","created_at")
) PARTITION BY RANGE ("created_at");
--> statement-breakpoint
-- Rows of a month without its partition land here instead of failing; the partition job moves them.
CREATE TABLE "events_default" PARTITION OF "events" DEFAULT;--> statement-breakpoint
-- One partition per month, from the oldest stored event's month to three months after this one
-- (the names and bounds events/partitions.ts uses: events_YYYY_MM, [first of month, next first) UTC).
DO $$
DECLARE
  m timestamp := date_trunc('month', coalesce((SELECT min(created_at) FROM "events_unpartitioned"), now()) AT TIME ZONE 'UTC');
  last timestamp := date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months';
BEGIN
  WHILE m <= last LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF "events" FOR VALUES FROM (%L) TO (%L)',
                   'events_' || to_char(m, 'YYYY_MM'), m AT TIME ZONE 'UTC', (m + interval '1 month') AT TIME ZONE 'UTC');
    m := m + interval '1 month';
  END LOOP;
END $$;--> statement-breakpoint
INSERT INTO "events" ("id", "project_id", "contact_id", "name", "data", "created_at")
SELECT "id", "project_id", "contact_id", "name", "data", "created_at" FROM "events_unpartitioned";--> statement-breakpoint
DROP TABLE "events_unpartitioned";--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Indexes on the partitioned table: each partition gets its own, each leads with the list's filter
-- and ends with the sort (created_at, id), so a page is a merge of per-month index scans.
CREATE INDEX "events_project_created_idx" ON "events" USING btree ("project_id","created_at","id");--> statement-breakpoint
CREATE INDEX "events_project_name_created_idx" ON "events" USING btree ("project_id","name","created_at");--> statement-breakpoint
CREATE INDEX "events_contact_name_created_idx" ON "events" USING btree ("contact_id","name","created_at");--> statement-breakpoint
CREATE INDEX "events_contact_created_idx" ON "events" USING btree ("contact_id","created_at","id");--> statement-breakpoint
CREATE INDEX "events_campaign_clicks_idx" ON "events" USING btree (("data"->>'campaignId'),("data"->>'link')) WHERE name = 'email.clicked';
