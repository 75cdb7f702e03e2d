-- How many times the job was taken. A run's token ("<worker id>:<n>"), its finish's receipt ("=<worker
-- id>:<n>...") and a sweep's mark that the run was taken away ("~<worker id>:<n>") carry the start number
-- n, so no field holds it while there is one; an operator's retry, which clears the token, writes it into
-- `attemptsStarted` instead.
local function startsOf(token, attemptsStarted)
  return tonumber(token and string.match(token, ':(%d+)')) or tonumber(attemptsStarted) or 0
end
