-- Responses in the order they arrived, so query_responses pages by a cursor that stays right
-- while agents keep answering (a keyset over arrival, never an offset: an offset skips or
-- repeats rows when a row lands before it). Each execution counts its rows; a result's rows
-- take the next numbers under the execution row's lock, so a reader that sees a number
-- sees every smaller one (the transactions that took them committed first).
ALTER TABLE execution ADD COLUMN responses_received BIGINT NOT NULL DEFAULT 0;
ALTER TABLE response ADD COLUMN arrival BIGINT NOT NULL DEFAULT 0;
-- Rows stored before: numbered in the order pages used to show them.
UPDATE response SET arrival = numbered.n
FROM (SELECT execution_id, step, agent_id, row_index,
             row_number() OVER (PARTITION BY execution_id ORDER BY step, agent_id, row_index) AS n
      FROM response) AS numbered
WHERE response.execution_id = numbered.execution_id AND response.step = numbered.step
  AND response.agent_id = numbered.agent_id AND response.row_index = numbered.row_index;
UPDATE execution SET responses_received =
    (SELECT coalesce(max(arrival), 0) FROM response WHERE response.execution_id = execution.execution_id);
CREATE INDEX response_by_arrival ON response (execution_id, step, arrival);
