-- The next job's id, name, data and options, from meta's field (nextJob.lua says what it holds): a leading
-- "*" says a finish named the job (its worker sends its key), so a later add keeps its id.
local function decodeNext(spec)
  local from = string.byte(spec) == 42 and 2 or 1
  local c1 = string.find(spec, ',', from, true)
  local c2 = string.find(spec, ',', c1 + 1, true)
  local c3 = string.find(spec, ',', c2 + 1, true)
  local idLen, nameLen, dataLen = tonumber(string.sub(spec, from, c1 - 1)), tonumber(string.sub(spec, c1 + 1, c2 - 1)),
    tonumber(string.sub(spec, c2 + 1, c3 - 1))
  local at = c3 + 1
  local id = string.sub(spec, at, at + idLen - 1)
  local name = string.sub(spec, at + idLen, at + idLen + nameLen - 1)
  local data = string.sub(spec, at + idLen + nameLen, at + idLen + nameLen + dataLen - 1)
  return id, name, data, string.sub(spec, at + idLen + nameLen + dataLen)
end

