-- The executions list of one ending now reads COMPLETED's entries too (docs/decisions.md
-- § Hardening): a workflow whose paths mostly EXIT has few completed executions, and
-- ?status=COMPLETED walked all of the workflow's others to fill its page. The build holds
-- execution writes for its length (about 1.2 s a million executions here).
DROP INDEX "workflow_executions_workflow_ended_idx";--> statement-breakpoint
CREATE INDEX "workflow_executions_workflow_ended_idx" ON "workflow_executions" USING btree ("workflow_id","status","started_at","id") WHERE status IN ('COMPLETED', 'EXITED', 'FAILED', 'CANCELLED');