CREATE TABLE "event_counts" (
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"shard" smallint NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "event_counts_project_id_name_shard_pk" PRIMARY KEY("project_id","name","shard")
);
--> statement-breakpoint
ALTER TABLE "event_counts" ADD CONSTRAINT "event_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- The exact count per project and name behind GET /events' `total` (issue 15), kept by
-- statement-level triggers on the partitioned `events` (decisions.md § Growth): they see every
-- statement's rows through its transition table, whatever the path (the event writer, contact and
-- project cascades, DELETE /events/:name, retention's batches). Statement-level triggers of the
-- partitioned table do not fire for statements naming a partition (the partition job's move of
-- rows out of events_default, a net zero), nor for DROP TABLE of a partition: retention subtracts
-- a partition's rows itself before dropping it (events/partitions.ts). A writer adds to its shard,
-- the backend pid modulo 16, so concurrent writers of one name seldom wait on one row; rows are
-- taken in (project, name) order so that two writers of several names lock them in the same order.
CREATE FUNCTION "event_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_counts AS c (project_id, name, shard, count)
  SELECT r.project_id, r.name, pg_backend_pid() % 16, count(*) FROM new_rows AS r
   GROUP BY r.project_id, r.name ORDER BY r.project_id, r.name
  ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Rows deleted with their project (its cascade) have no counter left to subtract from. Grouped
-- first, so a project reset of millions of events looks each project up once.
CREATE FUNCTION "event_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH removed AS MATERIALIZED (SELECT r.project_id, r.name, count(*) AS n FROM old_rows AS r GROUP BY r.project_id, r.name)
  INSERT INTO event_counts AS c (project_id, name, shard, count)
  SELECT r.project_id, r.name, pg_backend_pid() % 16, -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
   ORDER BY r.project_id, r.name
  ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "events_count_insert" AFTER INSERT ON "events" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "event_counts_add"();--> statement-breakpoint
CREATE TRIGGER "events_count_delete" AFTER DELETE ON "events" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "event_counts_subtract"();--> statement-breakpoint
-- Nothing updates events' project or name today; an update that did would stay counted.
CREATE TRIGGER "events_count_update_new" AFTER UPDATE ON "events" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "event_counts_add"();--> statement-breakpoint
CREATE TRIGGER "events_count_update_old" AFTER UPDATE ON "events" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "event_counts_subtract"();--> statement-breakpoint
-- The events already stored, counted once after the triggers exist: creating them locked `events`
-- against writes until this migration commits, so no event is counted twice or missed.
INSERT INTO "event_counts" ("project_id", "name", "shard", "count")
SELECT "project_id", "name", 0, count(*) FROM "events" GROUP BY "project_id", "name";
