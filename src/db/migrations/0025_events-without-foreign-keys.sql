-- Events keep no foreign keys: their checks were about 40 % of an event insert's time, and the one to
-- contacts locked the contact's row (a WAL record, a dirtied page) for every email.* event. A
-- contact's delete deletes its events itself, and remembers the contact here for a minute's
-- second pass (contacts/deleted.ts); a project's purge deletes its events
-- (projects/purge.ts). docs/decisions.md § Events without foreign keys.
CREATE TABLE "deleted_contacts" (
	"contact_id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"deleted_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "events" DROP CONSTRAINT "events_project_id_projects_id_fk";
--> statement-breakpoint
ALTER TABLE "events" DROP CONSTRAINT "events_contact_id_contacts_id_fk";
--> statement-breakpoint
CREATE INDEX "deleted_contacts_deleted_at_idx" ON "deleted_contacts" USING btree ("deleted_at");