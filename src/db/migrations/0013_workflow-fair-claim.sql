-- The runner claims each project's oldest due executions, so one project's backlog cannot hold
-- another's back (engine/claim.ts): it needs one project's RUNNING executions by due time too, not
-- only its WAITING ones. GET /activity/upcoming (status = 'WAITING') reads the same index. Rebuilding
-- it holds writes to workflow_executions back for the build (seconds per million active executions).
DROP INDEX "workflow_executions_project_due_idx";--> statement-breakpoint
CREATE INDEX "workflow_executions_project_due_idx" ON "workflow_executions" USING btree ("project_id","due_at") WHERE status IN ('RUNNING', 'WAITING');