-- Which server an agent is connected to now (NULL: none). With one server this says what
-- its memory says; several replicas on one database read it to know who is online elsewhere.
ALTER TABLE agent ADD COLUMN connected_to TEXT;
