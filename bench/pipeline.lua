-- wrk script: each request is DEPTH pipelined copies of the URL's GET, sent in one write
-- (TechEmpower's pipeline.lua). Usage: wrk -s bench/pipeline.lua URL -- 16
init = function(args)
  local depth = tonumber(args[1]) or 1
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  req = table.concat(r)
end

request = function()
  return req
end
