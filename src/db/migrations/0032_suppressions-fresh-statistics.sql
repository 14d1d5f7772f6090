-- As 0029, for the suppressions: a project whose suppressions the last ANALYZE did not see is
-- estimated at one row, and its search then walked its rows instead of reading the trigram index
-- (90,000 unseen beside another project's 1,000,000: part of one address 109 ms, against 7 ms once
-- autovacuum had analyzed the table, 93 s after the insert with this setting; without it, not
-- until a tenth of the table has changed). docs/decisions.md § Growth.
ALTER TABLE "suppressions" SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000);
