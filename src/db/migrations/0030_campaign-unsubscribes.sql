CREATE TABLE "campaign_unsubscribes" (
	"project_id" text NOT NULL,
	"campaign_id" uuid NOT NULL,
	"contact_id" text NOT NULL,
	"unsubscribed_at" timestamp with time zone NOT NULL,
	CONSTRAINT "campaign_unsubscribes_project_id_campaign_id_contact_id_pk" PRIMARY KEY("project_id","campaign_id","contact_id")
);
--> statement-breakpoint
ALTER TABLE "campaign_unsubscribes" ADD CONSTRAINT "campaign_unsubscribes_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Kept by a statement-level trigger on the partitioned `events`, as migration 0009 keeps the event
-- counts: it sees every statement's `contact.unsubscribed` rows, whatever the path (a contact's
-- PATCH, /v1/track, a bulk change, an import, a workflow, the pages behind an email's links). An
-- unsubscribe counts for each campaign whose email was sent to the contact at or before it; one
-- that names the email it came from (`data.emailId`: the pages' links) for that email's campaign
-- only; one caused by a bounce or a complaint (`data.reason`) for none. ON CONFLICT keeps the first:
-- a recipient is counted once per campaign. The emails are read per unsubscribing contact through
-- their contact index alone: OFFSET 0 keeps the other conditions out of that scan, where the planner
-- had combined it with the project's (project_id, sent_at) index and read every sent email of the
-- project per unsubscribe (250,000 unsubscribes after a campaign of 1,000,000: not done in 26
-- minutes, 2 s before the trigger). A statement without unsubscribes reads nothing.
-- docs/decisions.md § Teams, project lifecycle, billing and analytics.
CREATE FUNCTION "campaign_unsubscribes_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM new_rows AS u WHERE u.name = 'contact.unsubscribed') THEN
    RETURN NULL;
  END IF;
  WITH unsubscribed AS MATERIALIZED (
    SELECT u.project_id, u.contact_id, u.created_at, u.data->>'emailId' AS email_id
      FROM new_rows AS u
     WHERE u.name = 'contact.unsubscribed' AND u.contact_id IS NOT NULL AND (u.data IS NULL OR u.data->>'reason' IS NULL)
  )
  INSERT INTO campaign_unsubscribes (project_id, campaign_id, contact_id, unsubscribed_at)
  SELECT u.project_id, e.campaign_id, u.contact_id, min(u.created_at)
    FROM unsubscribed AS u
   CROSS JOIN LATERAL (
     SELECT e.id, e.project_id, e.campaign_id, e.sent_at FROM emails AS e WHERE e.contact_id = u.contact_id OFFSET 0
   ) AS e
   WHERE e.project_id = u.project_id AND e.campaign_id IS NOT NULL
     AND e.sent_at IS NOT NULL AND e.sent_at <= u.created_at
     AND (u.email_id IS NULL OR e.id::text = u.email_id)
   GROUP BY 1, 2, 3
   ORDER BY 1, 2, 3
  ON CONFLICT (project_id, campaign_id, contact_id) DO NOTHING;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "events_campaign_unsubscribes" AFTER INSERT ON "events" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "campaign_unsubscribes_add"();
--> statement-breakpoint
-- The unsubscribes already stored, once the trigger exists: creating it locked `events` against
-- writes until this migration commits, so none is missed or counted twice. The same rule as the
-- trigger's; it is what GET /campaigns/:id/stats counted from the events until now.
INSERT INTO "campaign_unsubscribes" ("project_id", "campaign_id", "contact_id", "unsubscribed_at")
SELECT e.project_id, e.campaign_id, e.contact_id, min(ev.created_at)
  FROM "events" AS ev
  JOIN "emails" AS e ON e.contact_id = ev.contact_id AND e.project_id = ev.project_id
 WHERE ev.name = 'contact.unsubscribed' AND (ev.data IS NULL OR ev.data->>'reason' IS NULL)
   AND e.campaign_id IS NOT NULL AND e.sent_at IS NOT NULL AND e.sent_at <= ev.created_at
   AND (ev.data IS NULL OR ev.data->>'emailId' IS NULL OR ev.data->>'emailId' = e.id::text)
 GROUP BY 1, 2, 3;
