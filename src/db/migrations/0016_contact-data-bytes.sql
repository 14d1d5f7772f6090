ALTER TABLE "contacts" ADD COLUMN "data_bytes" integer;--> statement-breakpoint
-- The size of a contact's data as it is served, kept on every write of `data` (the upserts,
-- PATCH, the import, a field delete, a workflow step: whatever the path), so that a list can end a
-- page at a byte budget (db/page-budget.ts) from a column instead of printing up to 100 MB of data
-- to measure it. Rows written before this migration keep NULL, and their readers compute it.
CREATE FUNCTION "contacts_data_bytes"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.data_bytes := octet_length(NEW.data::text);
  RETURN NEW;
END $$;--> statement-breakpoint
CREATE TRIGGER "contacts_data_bytes" BEFORE INSERT OR UPDATE OF "data" ON "contacts"
  FOR EACH ROW EXECUTE FUNCTION "contacts_data_bytes"();
--> statement-breakpoint
-- Contacts already stored: only those whose data takes more than 2 KB stored, whose size a list
-- could not afford to print; the rest stay NULL and are measured in the query (2 KB of jsonb
-- prints as at most 80 KB; compressed, as at most a few hundred). Not a write of `data`, so the
-- trigger does not fire; the scan reads each row's stored size, not its data.
UPDATE "contacts" SET "data_bytes" = octet_length("data"::text) WHERE "data_bytes" IS NULL AND pg_column_size("data") > 2048;
