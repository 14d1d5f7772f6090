-- GET /analytics/top-campaigns reads the newest 1,000 sent campaigns of its range: without this
-- index it read and sorted every sent campaign of the project in the range, and campaigns have no
-- cap (docs/decisions.md § Hardening). A campaign row is written a few times in its life.
CREATE INDEX "campaigns_project_sent_idx" ON "campaigns" USING btree ("project_id","sent_at") WHERE "campaigns"."sent_at" IS NOT NULL;