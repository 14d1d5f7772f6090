CREATE TABLE "contact_counts" (
	"project_id" text NOT NULL,
	"subscribed" boolean NOT NULL,
	"shard" integer NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "contact_counts_project_id_subscribed_shard_pk" PRIMARY KEY("project_id","subscribed","shard")
);
--> statement-breakpoint
ALTER TABLE "contact_counts" ADD CONSTRAINT "contact_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- No contact is written from here to this migration's commit (the counts below), so none is
-- counted twice or missed.
LOCK TABLE "contacts" IN SHARE ROW EXCLUSIVE MODE;--> statement-breakpoint
-- The exact count per project and subscription behind GET /contacts' `total` (issue 15), kept by
-- statement-level triggers on `contacts`, as migration 0018 keeps email_counts: they see every
-- statement's rows through its transition tables, whatever the path (sends, tracks, imports, the
-- API, workflows, bulk operations, subscription changes, deletes and resets). An update writes
-- only the keys whose number changed (a change of data writes none); nothing changes a contact's
-- project. A writer adds to the row of its own backend (shard = its pid), so counter writes never
-- wait. Contacts are written on the hottest paths, and most of those statements write none (a
-- track of a known contact whose data stays as it was): each function returns at once when its
-- statement changed no row (in SQL about 2.5 µs a call with nothing to count, against 7 without the check).
CREATE FUNCTION "contact_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM new_rows) THEN RETURN NULL; END IF;
  INSERT INTO contact_counts AS c (project_id, subscribed, shard, count)
  SELECT r.project_id, r.subscribed, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY r.project_id, r.subscribed
  ON CONFLICT (project_id, subscribed, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "contact_counts_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM new_rows) THEN RETURN NULL; END IF;
  INSERT INTO contact_counts AS c (project_id, subscribed, shard, count)
  SELECT d.project_id, d.subscribed, pg_backend_pid(), d.n
    FROM (SELECT r.project_id, r.subscribed, sum(r.n) AS n
            FROM (SELECT project_id, subscribed, 1 AS n FROM new_rows UNION ALL SELECT project_id, subscribed, -1 FROM old_rows) AS r
           GROUP BY r.project_id, r.subscribed) AS d
   WHERE d.n <> 0
  ON CONFLICT (project_id, subscribed, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Rows deleted with their project (its cascade) have no counter left to subtract from.
CREATE FUNCTION "contact_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
  WITH removed AS MATERIALIZED (SELECT r.project_id, r.subscribed, count(*) AS n FROM old_rows AS r GROUP BY r.project_id, r.subscribed)
  INSERT INTO contact_counts AS c (project_id, subscribed, shard, count)
  SELECT r.project_id, r.subscribed, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
  ON CONFLICT (project_id, subscribed, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "contacts_count_insert" AFTER INSERT ON "contacts" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "contact_counts_add"();--> statement-breakpoint
CREATE TRIGGER "contacts_count_update" AFTER UPDATE ON "contacts" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "contact_counts_move"();--> statement-breakpoint
CREATE TRIGGER "contacts_count_delete" AFTER DELETE ON "contacts" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "contact_counts_subtract"();--> statement-breakpoint
INSERT INTO "contact_counts" ("project_id", "subscribed", "shard", "count")
SELECT "project_id", "subscribed", 0, count(*) FROM "contacts" GROUP BY "project_id", "subscribed";
