-- The planner's statistics are refreshed after a fixed number of changed rows instead of a tenth of
-- the table: a project whose rows a table's last ANALYZE did not see is estimated at one row, and
-- its lists then sorted every row of it (GET /events?limit=50: 350 ms for 200,000 events, against
-- 4 ms once seen) or walked the project's rows for one contact's (GET /emails?contactId=: 96 ms
-- against 3 ms; a contact search, 122 against 7 ms; a static segment's contacts, 1,160 against
-- 285 ms). With a tenth, a partition of 10,000,000 events waited for 1,000,000 changes.
-- events/partitions.ts gives each new partition the same. docs/decisions.md § Growth.
-- Setting them takes no lock that reads or writes wait for.
ALTER TABLE "emails" SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000);
--> statement-breakpoint
ALTER TABLE "contacts" SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000);
--> statement-breakpoint
ALTER TABLE "segment_members" SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000);
--> statement-breakpoint
DO $$
DECLARE partition regclass;
BEGIN
  FOR partition IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'events'::regclass LOOP
    EXECUTE format('ALTER TABLE %s SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000)', partition);
  END LOOP;
END $$;
