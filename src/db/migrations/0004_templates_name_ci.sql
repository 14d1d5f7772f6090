DROP INDEX "templates_project_name_idx";--> statement-breakpoint
CREATE INDEX "templates_project_lower_name_idx" ON "templates" USING btree ("project_id",lower("name"),"id");