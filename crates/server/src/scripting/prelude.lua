-- Builds the sandbox scripts run in. Called once per VM with `api`, the
-- private table of Rust functions. Everything the functions below use is captured as a local, so a
-- script cannot redirect them by changing an environment.
local api = ...

local G = _G
local error, type, select, tostring, tonumber, pairs = error, type, select, tostring, tonumber, pairs
local raw_setmetatable, raw_rawset = setmetatable, rawset
local raw_loadstring, concat = loadstring, table.concat

-- Tables no script may change, weakly keyed so dropped ones can go.
local readonly = raw_setmetatable({}, { __mode = 'k' })

-- As a metamethod (level 2 is the script's line) and from the wrappers
-- below (level 3).
local function refuse()
  error('Attempt to modify a readonly table', 2)
end
local function refuse_here()
  error('Attempt to modify a readonly table', 3)
end

local function missing(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end

-- What getmetatable() shows for a protected table: readonly itself, so the
-- real metatable (and the table behind a proxy) stays out of reach.
local guard = raw_setmetatable({}, { __newindex = refuse, __metatable = false })
readonly[guard] = true

-- Every string's metatable, whose __index is the string library itself:
-- shared by all scripts of the VM, so getmetatable('') shows the guard.
local string_mt = G.getmetatable('')
if string_mt then string_mt.__metatable = guard end

-- A readonly view of `t`. With `strict`, reading a missing field is an
-- error, as it is for the globals.
local function protect(t, strict)
  if strict then
    raw_setmetatable(t, { __index = missing, __metatable = guard })
  end
  local proxy = raw_setmetatable({}, { __index = t, __newindex = refuse, __metatable = guard })
  readonly[proxy] = true
  return proxy
end

-- The globals live in S; the global table itself stays empty, so every
-- assignment to a global, new or existing, reaches __newindex.
local S = {}
for k, v in pairs(G) do S[k] = v end
for k in pairs(S) do raw_rawset(G, k, nil) end
-- What Redis 7.0 leaves out of the globals; getfenv and setfenv would
-- reach other functions' environments, newproxy make userdata.
for _, name in pairs({ 'print', 'dofile', 'loadfile', 'require', 'module', 'package', 'os', 'io', 'debug',
    'getfenv', 'setfenv', 'newproxy' }) do
  S[name] = nil
end

S.setmetatable = function(t, mt)
  if readonly[t] then refuse_here() end
  return raw_setmetatable(t, mt)
end
S.rawset = function(t, k, v)
  if readonly[t] then refuse_here() end
  return raw_rawset(t, k, v)
end
-- Lua's pcall, except that an error raised as a table with an `err`
-- field (what redis.call raises) comes back as that text, as in Redis, so
-- `local ok, e = pcall(redis.call, ...)` gives a string to match against.
local raw_pcall = S.pcall
local function pcall_result(ok, ...)
  if ok then return true, ... end
  local e = ...
  if type(e) == 'table' then
    local text = e.err
    if type(text) == 'string' or type(text) == 'number' then e = text end
  end
  return false, e
end
S.pcall = function(...)
  return pcall_result(raw_pcall(...))
end
-- Precompiled chunks can crash the VM: only source is loaded.
local function loadstring(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then
    return nil, 'binary chunks are not allowed'
  end
  return raw_loadstring(s, name)
end
S.loadstring = loadstring
S.load = function(reader, name)
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == '' then break end
    parts[#parts + 1] = piece
  end
  return loadstring(concat(parts), name)
end

local function raise(msg)
  error({ err = 'ERR ' .. msg })
end

-- Redis's error table text: '-CODE message' keeps its code, a message
-- without one gets ERR; surrounding line breaks go.
local function error_text(s)
  local body = s:sub(2)
  local sp = body:find(' ', 1, true)
  local code, msg = 'ERR', body
  if sp then code, msg = body:sub(1, sp - 1), body:sub(sp + 1) end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return code .. ' ' .. msg
end

local redis = {}
redis.call = api.call
redis.pcall = api.pcall
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then raise('wrong number of arguments') end
  return api.sha1hex((...))
end
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  -- Redis reads the text as a C string: it ends at a NUL.
  s = s:match('^[^%z]*')
  if s:sub(1, 1) ~= '-' then s = '-' .. s end
  return { err = error_text(s) }
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = s }
end
redis.log = function(...)
  if select('#', ...) < 2 then raise('redis.log() requires two arguments or more.') end
  local level = ...
  if type(level) ~= 'number' then raise('First argument must be a number') end
  if level < 0 or level > 3 then raise('Invalid debug level.') end
  api.log(...)
end
redis.setresp = function(...)
  if select('#', ...) ~= 1 then raise('redis.setresp() requires one argument.') end
  local v = tonumber((...))
  if v ~= 2 and v ~= 3 then raise('RESP version must be 2 or 3.') end
  api.setresp(v)
end
-- Effects are what durakv logs, whatever the script asks: only validated.
redis.set_repl = function(...)
  if select('#', ...) ~= 1 then raise('redis.set_repl() requires two arguments.') end
  local f = tonumber((...))
  if f == nil or f < 0 or f > 3 or f % 1 ~= 0 then
    raise('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = function(...)
  if select('#', ...) < 1 then raise('Please specify at least one argument for this redis lib call') end
  local ok, allowed = api.acl_check_cmd(...)
  if not ok then raise(allowed) end
  return allowed
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = api.version, api.version_num

-- A missing field of a library is nil, as in Redis: a function that calls
-- redis.register_function gets "attempt to call field ... (a nil value)",
-- and `if cjson.encode_escape_forward_slash then` tests for a feature.
S.redis = protect(redis, false)
for _, name in pairs({ 'cjson', 'bit', 'cmsgpack', 'struct', 'string', 'table', 'math', 'coroutine' }) do
  if S[name] then S[name] = protect(S[name], false) end
end

-- What FUNCTION LOAD's code sees instead of the globals: only a `redis`
-- with register_function, log and the version; anything else is missing.
local load_redis = {
  register_function = api.register_function,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
local load_env = protect({ redis = protect(load_redis, true) }, true)

S._G = G
raw_setmetatable(S, { __index = missing, __newindex = refuse, __metatable = guard })
local globals_mt = { __index = S, __newindex = refuse, __metatable = guard }
raw_setmetatable(G, globals_mt)
readonly[S] = true
readonly[G] = true

-- Switches what the globals resolve to: the load environment while a
-- library registers its functions (`true`), the usual globals otherwise.
local function loading(on)
  globals_mt.__index = on and load_env or S
end

-- What the server runs under xpcall for a function's callback, which gets
-- its KEYS and ARGV as arguments (Lua 5.1's xpcall passes none); a
-- script's body runs as it is. Made before the run: Lua code after
-- xpcall returns would meet a pending SCRIPT KILL unprotected.
local function runner(f, keys, argv)
  return function() return f(keys, argv) end
end

-- KEYS and ARGV are replaced per run through the table behind the globals.
return S, loading, runner
