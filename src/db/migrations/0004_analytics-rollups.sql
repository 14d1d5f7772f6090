CREATE TABLE "event_name_contacts" (
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"contact_id" text NOT NULL,
	"first_at" timestamp with time zone NOT NULL,
	"last_at" timestamp with time zone NOT NULL,
	CONSTRAINT "event_name_contacts_project_id_name_contact_id_pk" PRIMARY KEY("project_id","name","contact_id")
);
--> statement-breakpoint
CREATE TABLE "event_name_days" (
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"day" date NOT NULL,
	"shard" smallint NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "event_name_days_project_id_name_day_shard_pk" PRIMARY KEY("project_id","name","day","shard")
);
--> statement-breakpoint
ALTER TABLE "event_name_contacts" ADD CONSTRAINT "event_name_contacts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "event_name_contacts" ADD CONSTRAINT "event_name_contacts_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "event_name_days" ADD CONSTRAINT "event_name_days_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "event_name_contacts_contact_idx" ON "event_name_contacts" USING btree ("contact_id");-- Backfill the rollups from the events already recorded (tracked events only, as events/record.ts writes them).
INSERT INTO "event_name_days" ("project_id", "name", "day", "shard", "count")
SELECT e.project_id, e.name, (e.created_at AT TIME ZONE 'UTC')::date, 0, count(*)
  FROM "events" AS e
 WHERE NOT (e.name LIKE 'email.%' OR e.name IN ('contact.subscribed', 'contact.unsubscribed') OR e.name LIKE 'segment.%.entry' OR e.name LIKE 'segment.%.exit')
 GROUP BY 1, 2, 3;--> statement-breakpoint
INSERT INTO "event_name_contacts" ("project_id", "name", "contact_id", "first_at", "last_at")
SELECT e.project_id, e.name, e.contact_id, min(e.created_at), max(e.created_at)
  FROM "events" AS e
 WHERE e.contact_id IS NOT NULL
   AND NOT (e.name LIKE 'email.%' OR e.name IN ('contact.subscribed', 'contact.unsubscribed') OR e.name LIKE 'segment.%.entry' OR e.name LIKE 'segment.%.exit')
 GROUP BY 1, 2, 3;
