-- wrk script for scripts/bench.sh: one JSON-RPC request per call, its arguments varied so
-- nothing can be cached by body. BENCH_MODE: list | read | write | invalid.
local mode = os.getenv("BENCH_MODE") or "list"
local token = os.getenv("BENCH_TOKEN") or ""
local read_tool = os.getenv("BENCH_READ_TOOL") or "tool_0000"
local write_tool = os.getenv("BENCH_WRITE_TOOL") or "tool_0010"
local counter = 0

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"
wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
if token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

request = function()
  counter = counter + 1
  local body
  if mode == "list" then
    body = string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/list"}', counter)
  elseif mode == "invalid" then
    body = string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{"id":"x%d","count":"many"}}}',
      counter, read_tool, counter)
  else
    local tool = (mode == "write") and write_tool or read_tool
    body = string.format(
      '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{"id":"x%d","count":%d,"tags":["a","b%d"]}}}',
      counter, tool, counter, counter % 1000, counter % 7)
  end
  return wrk.format(nil, "/mcp", nil, body)
end

done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format("RESULT rps=%.1f p50_us=%d p99_us=%d requests=%d non2xx=%d errors=%d\n",
    summary.requests / seconds, latency:percentile(50), latency:percentile(99), summary.requests,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
