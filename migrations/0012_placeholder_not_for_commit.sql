-- Stands in for the lead's 0012 (inbox key order) so this branch's migrations are contiguous
-- in local test runs. NOT FOR COMMIT.
SELECT 1;
