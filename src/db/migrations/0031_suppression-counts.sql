CREATE TABLE "suppression_counts" (
	"project_id" text NOT NULL,
	"reason" text NOT NULL,
	"shard" integer NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "suppression_counts_project_id_reason_shard_pk" PRIMARY KEY("project_id","reason","shard")
);
--> statement-breakpoint
ALTER TABLE "suppression_counts" ADD CONSTRAINT "suppression_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- No suppression is written from here to this migration's commit (the counts below), so none is
-- counted twice or missed.
LOCK TABLE "suppressions" IN SHARE ROW EXCLUSIVE MODE;--> statement-breakpoint
-- The exact count per project and reason behind GET /suppressions' `total`, kept by statement-level
-- triggers on `suppressions` as migration 0021 keeps contact_counts: counting a project's
-- suppressions took about 100 ms a million, on every first page. A writer adds to the row of its
-- own backend (shard = its pid), so counter writes never wait. Herald never updates a suppression
-- (the first reason is kept); the update trigger keeps the counts right if an operator does.
CREATE FUNCTION "suppression_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM new_rows) THEN RETURN NULL; END IF;
  INSERT INTO suppression_counts AS c (project_id, reason, shard, count)
  SELECT r.project_id, r.reason, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY r.project_id, r.reason
  ON CONFLICT (project_id, reason, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "suppression_counts_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM new_rows) THEN RETURN NULL; END IF;
  INSERT INTO suppression_counts AS c (project_id, reason, shard, count)
  SELECT d.project_id, d.reason, pg_backend_pid(), d.n
    FROM (SELECT r.project_id, r.reason, sum(r.n) AS n
            FROM (SELECT project_id, reason, 1 AS n FROM new_rows UNION ALL SELECT project_id, reason, -1 FROM old_rows) AS r
           GROUP BY r.project_id, r.reason) AS d
   WHERE d.n <> 0
  ON CONFLICT (project_id, reason, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Rows deleted with their project (its cascade) have no counter left to subtract from.
CREATE FUNCTION "suppression_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
  WITH removed AS MATERIALIZED (SELECT r.project_id, r.reason, count(*) AS n FROM old_rows AS r GROUP BY r.project_id, r.reason)
  INSERT INTO suppression_counts AS c (project_id, reason, shard, count)
  SELECT r.project_id, r.reason, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
  ON CONFLICT (project_id, reason, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "suppressions_count_insert" AFTER INSERT ON "suppressions" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "suppression_counts_add"();--> statement-breakpoint
CREATE TRIGGER "suppressions_count_update" AFTER UPDATE ON "suppressions" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "suppression_counts_move"();--> statement-breakpoint
CREATE TRIGGER "suppressions_count_delete" AFTER DELETE ON "suppressions" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "suppression_counts_subtract"();--> statement-breakpoint
INSERT INTO "suppression_counts" ("project_id", "reason", "shard", "count")
SELECT "project_id", "reason", 0, count(*) FROM "suppressions" GROUP BY "project_id", "reason";
