CREATE TABLE "email_counts" (
	"project_id" text NOT NULL,
	"status" text NOT NULL,
	"shard" integer NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "email_counts_project_id_status_shard_pk" PRIMARY KEY("project_id","status","shard")
);
--> statement-breakpoint
ALTER TABLE "email_counts" ADD CONSTRAINT "email_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- No email is written from here to this migration's commit (the index's build and the counts
-- below), so none is counted twice or missed.
LOCK TABLE "emails" IN SHARE ROW EXCLUSIVE MODE;--> statement-breakpoint
-- GET /emails?status= of a rare status (issue 15): its newest page read from the status's own
-- entries, where the project's index walked a thousand emails per complaint. The build takes
-- under a second per million emails.
CREATE INDEX "emails_project_rare_status_idx" ON "emails" USING btree ("project_id","status","created_at","id") WHERE status IN ('BOUNCED', 'COMPLAINED', 'FAILED', 'SKIPPED', 'SUPPRESSED');--> statement-breakpoint
-- The exact count per project and status behind GET /emails' `total` (issue 15), kept by
-- statement-level triggers on `emails`, as migration 0009 keeps event_counts: they see every
-- statement's rows through its transition tables, whatever the path (sends, campaigns, workflows,
-- delivery, tracking, a contact's delete setting contact_id NULL, a project's reset). An update
-- writes only the statuses whose number changed (a hand-off, a lease renewal or an open changes
-- none). A writer adds to the row of its own backend (shard = its pid), which no other live
-- transaction writes: counter writes never wait on each other, so they can take no part in a
-- deadlock, whatever else a transaction locks before or after them. Hourly storage maintenance
-- folds the rows of backends that have exited into shard 0 (db/counter-rows.ts).
CREATE FUNCTION "email_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO email_counts AS c (project_id, status, shard, count)
  SELECT r.project_id, r.status, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY r.project_id, r.status ORDER BY r.project_id, r.status
  ON CONFLICT (project_id, status, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "email_counts_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO email_counts AS c (project_id, status, shard, count)
  SELECT d.project_id, d.status, pg_backend_pid(), d.n
    FROM (SELECT r.project_id, r.status, sum(r.n) AS n
            FROM (SELECT project_id, status, 1 AS n FROM new_rows UNION ALL SELECT project_id, status, -1 FROM old_rows) AS r
           GROUP BY r.project_id, r.status) AS d
   WHERE d.n <> 0
   ORDER BY d.project_id, d.status
  ON CONFLICT (project_id, status, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Rows deleted with their project (its cascade) have no counter left to subtract from.
CREATE FUNCTION "email_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH removed AS MATERIALIZED (SELECT r.project_id, r.status, count(*) AS n FROM old_rows AS r GROUP BY r.project_id, r.status)
  INSERT INTO email_counts AS c (project_id, status, shard, count)
  SELECT r.project_id, r.status, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
   ORDER BY r.project_id, r.status
  ON CONFLICT (project_id, status, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "emails_count_insert" AFTER INSERT ON "emails" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "email_counts_add"();--> statement-breakpoint
CREATE TRIGGER "emails_count_update" AFTER UPDATE ON "emails" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "email_counts_move"();--> statement-breakpoint
CREATE TRIGGER "emails_count_delete" AFTER DELETE ON "emails" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "email_counts_subtract"();--> statement-breakpoint
INSERT INTO "email_counts" ("project_id", "status", "shard", "count")
SELECT "project_id", "status", 0, count(*) FROM "emails" GROUP BY "project_id", "status";
