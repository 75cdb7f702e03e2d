-- How many times the job was taken. A run's token ("<worker id>:<n>") and its finish's receipt
-- ("=<worker id>:<n>...") carry the start number n, so no field holds it while there is one; a move that
-- clears the token (a sweep's recovery, an operator's retry) writes it into `attemptsStarted` instead.
local function startsOf(token, attemptsStarted)
  return tonumber(token and string.match(token, ':(%d+)')) or tonumber(attemptsStarted) or 0
end
