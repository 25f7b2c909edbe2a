-- The questions asked most across a fleet look rows up by name (a package, a process, a
-- user, a service) or by port: expression indexes on those JSON fields, so an equality on
-- them reads the matching rows instead of every row of the table. agent_id last: the rows
-- come out in the order pages are cut in, so SQLite needs no sort and picks these indexes.
CREATE INDEX inventory_row_by_name ON inventory_row (table_name, json_extract(row, '$.name'), agent_id);
CREATE INDEX inventory_row_by_port ON inventory_row (table_name, json_extract(row, '$.port'), agent_id);
